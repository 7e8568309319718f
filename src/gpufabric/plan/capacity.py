"""Choices beside the fabric: in-network reduction (SHARP) and rented capacity.

- :func:`check_options` refuses what the catalog cannot give: SHARP on a fabric without
  it, a provider-only fabric (EFA, TCPX) in the built design space, a rental offering
  whose GPU or GPUs per instance differ from the cluster's.
- :func:`with_break_even` adds to each rented candidate the utilisation and the months
  after which building the best built design becomes cheaper (model/cost.py formulas).
- :func:`sharp_text` and :func:`rent_text` are the rationale's sentences about them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpufabric.catalog import Catalog
from gpufabric.errors import InputError
from gpufabric.model import cost
from gpufabric.plan.evaluate import Candidate
from gpufabric.plan.layouts import check_nvlink_domain
from gpufabric.plan.table import nvlink_domain, rental_ids
from gpufabric.spec.loader import Located, did_you_mean
from gpufabric.spec.models import Spec

#: What a rented design gives up, and what ``config`` still renders for it.
RENTED_GIVES_UP = (
    "the provider owns the switches: InfiniBand partitions (OpenSM PKeys), switch QoS (PFC/ECN, DSCP"
    " classes), in-network reduction, topology and oversubscription are not yours to set"
)
RENTED_CONFIG = (
    "`gpufabric config` renders only host-side artefacts for it (nftables, sysctl, tuned, NCCL"
    " environment, launch scripts): no partitions.conf/opensm.conf, no switch QoS script, no NVMe-oF targets"
)


def _fail(located: Located | None, path: tuple, message: str, fix: str) -> Exception:
    if located is not None:
        return located.error(path, message, fix)
    return InputError(f"{'.'.join(str(p) for p in path)}: {message}; {fix}")


def check_options(spec: Spec, catalog: Catalog, located: Located | None = None) -> None:
    """Raise a (located, when ``located`` is given) error for a choice the catalog cannot give.

    Raises:
        SpecError: with ``located``; InputError without.
    """
    check_nvlink_domain(spec, nvlink_domain(spec, catalog.gpu(spec.cluster.gpu)), located)  # tp vs NVL72 racks
    o = spec.options
    if "build" in o.capacity:
        for i, fid in enumerate(o.fabrics):
            if catalog.fabric(fid).rented_only:
                raise _fail(
                    located,
                    ("options", "fabrics", i),
                    f"fabric {fid!r} is a provider's fabric and cannot be built",
                    "rent it instead: options.capacity: [build, rent] (catalog rentals)",
                )
        if o.sharp_choices == (True,):
            unable = [f for f in o.fabrics if not catalog.fabric(f).in_network_reduction]
            if unable:
                capable = sorted(k for k, f in catalog.fabrics.items() if f.in_network_reduction)
                raise _fail(
                    located,
                    ("options", "in_network_reduction"),
                    f"in-network reduction (SHARP) needs SHARP-capable switches; {', '.join(unable)} cannot",
                    f"use [true, false] to enumerate both, or list only capable fabrics ({', '.join(capable)})",
                )
    if "rent" in o.capacity:
        ids = rental_ids(spec, catalog)
        if not ids:
            raise _fail(
                located,
                ("options", "capacity"),
                f"no rental offering in the catalog has {spec.cluster.gpus_per_node} x {spec.cluster.gpu} per instance",
                "drop rent, change cluster.gpu, or add an offering with --catalog (section rentals)",
            )
        offered = sorted({st for rid in ids if rid in catalog.rentals for st in catalog.rental(rid).storage})
        if offered and not set(offered) & set(o.storage):
            raise _fail(
                located,
                ("options", "storage"),
                f"no rental offering for {spec.cluster.gpus_per_node} x {spec.cluster.gpu} offers any of options.storage"
                f" (they offer {', '.join(offered)})",
                f"add one of {', '.join(offered)} to options.storage, or drop rent from options.capacity",
            )
        for i, rid in enumerate(o.rentals or []):
            offer = catalog.rentals.get(rid)
            if offer is None:
                raise _fail(
                    located,
                    ("options", "rentals", i),
                    f"unknown rental offering {rid!r}",
                    did_you_mean(rid, sorted(catalog.rentals)),
                )
            if offer.gpu != spec.cluster.gpu or offer.gpus != spec.cluster.gpus_per_node:
                raise _fail(
                    located,
                    ("options", "rentals", i),
                    f"{rid} has {offer.gpus} x {offer.gpu} per instance, the cluster {spec.cluster.gpus_per_node}"
                    f" x {spec.cluster.gpu}",
                    "choose an offering with the cluster's GPU and GPUs per node",
                )
            if not set(offer.storage) & set(o.storage):
                raise _fail(
                    located,
                    ("options", "rentals", i),
                    f"{rid} offers storage {', '.join(offer.storage)}, none of options.storage",
                    "add one of them to options.storage",
                )


def _years(spec: Spec, catalog: Catalog) -> float:
    return float(spec.site.amortization_years or catalog.site.amortization_years)


def horizon_of(spec: Spec, catalog: Catalog) -> tuple[float, float]:
    """(horizon in months, mean utilisation over it) of ``spec`` (options.horizon_months, options.pipeline)."""
    return spec.options.horizon_and_utilisation(_years(spec, catalog))


def break_even(rented: Candidate, built: Candidate, spec: Spec, catalog: Catalog) -> tuple[float | None, float]:
    """(break-even utilisation, break-even months) of ``rented`` against ``built``.

    The rented storage (paid every hour) offsets the build's running cost, which also
    pays for its own storage: both formulas take opex net of it, so that at the
    break-even utilisation the months equal the amortisation period.
    """
    assert rented.rental and rented.term
    g = spec.num_gpus
    _, u = horizon_of(spec, catalog)
    rent_h = catalog.rental(rented.rental).usd_per_gpu_hour(rented.term) * g
    storage_h = rented.rent_storage_usd_per_gpu_hour * g  # paid every clock hour
    opex_net_h = built.opex_usd_per_gpu_hour * g - storage_h
    years = _years(spec, catalog)
    committed = rented.term != "on_demand"
    u_star = (
        None
        if committed
        else cost.break_even_utilisation(
            capex_usd=built.capex_usd, opex_usd_per_hour=opex_net_h, years=years, rent_usd_per_hour=rent_h
        )
    )
    paid_h = rent_h if committed else rent_h * u  # on demand: only the used hours are paid
    months = cost.break_even_months(
        capex_usd=built.capex_usd,
        build_opex_usd_per_month=opex_net_h * cost.HOURS_PER_MONTH,
        rent_usd_per_month=paid_h * cost.HOURS_PER_MONTH,
    )
    return u_star, months


def with_break_even(cands: Sequence[Candidate], spec: Spec, catalog: Catalog) -> list[Candidate]:
    """Rented candidates with break-even against the best-ranked built design that fits in memory."""
    built = next((c for c in cands if c.capacity == "build" and c.memory_gb <= c.memory_capacity_gb), None)
    if built is None:
        return list(cands)
    out = []
    for c in cands:
        if c.capacity == "rent":
            u_star, months = break_even(c, built, spec, catalog)
            c = dataclasses.replace(
                c, break_even_utilisation=u_star, break_even_months=months, build_reference=built.id
            )
        out.append(c)
    return out


def _money(x: float) -> str:
    return f"${x / 1e6:,.2f}M" if abs(x) >= 1e6 else f"${x / 1e3:,.1f}k" if abs(x) >= 1e3 else f"${x:,.0f}"


def sharp_text(cands: Sequence[Candidate], recommended: str | None, catalog: Catalog) -> str:
    """What in-network reduction costs and buys for the recommendation ('' when not in play)."""
    by_id = {c.id: c for c in cands}
    best = by_id.get(recommended or "")
    if best is None or best.capacity != "build":
        return ""
    on, off = (
        (best, by_id.get(best.id.removesuffix("/sharp")))
        if best.in_network_reduction
        else (by_id.get(best.id + "/sharp"), best)
    )
    if on is None:
        return ""
    f = catalog.fabric(on.fabric)
    cost_text = f"{_money(on.sharp_usd)} of licences and aggregation manager ({f.cite('sharp_usd_per_node')} per node)"
    if off is None:
        return f"In-network reduction (SHARP) is on: {cost_text}."
    buys = (
        f"step {on.step_time_s:.3g} s vs {off.step_time_s:.3g} s, run {_money(on.run_cost_usd)} vs"
        f" {_money(off.run_cost_usd)}, DP all-reduce by {on.dp_algorithm} vs {off.dp_algorithm}"
    )
    if best.in_network_reduction:
        return f"In-network reduction (SHARP) is chosen: {cost_text}; against the same design without it, {buys}."
    return f"In-network reduction (SHARP) was not chosen: on this design it costs {cost_text} and gives {buys}."


def rent_text(cands: Sequence[Candidate], recommended: str | None, spec: Spec, catalog: Catalog) -> str:
    """Build vs rent in a few sentences ('' without rented candidates)."""
    rented = [c for c in cands if c.capacity == "rent"]
    if not rented:
        return ""
    fits = [c for c in rented if c.memory_gb <= c.memory_capacity_gb] or rented
    best_rent = fits[0]  # candidates come ranked
    months, u = horizon_of(spec, catalog)
    o = spec.options
    stated = o.horizon_months is not None or o.pipeline is not None
    lines = [
        f"Build vs rent over a horizon of {months:g} months at {u:.0%} mean utilisation"
        + (
            " (options.horizon_months, options.pipeline)."
            if stated
            else f" (assumed: the {_years(spec, catalog):g}-year amortisation at options.utilisation; the spec states"
            " no horizon or pipeline of work, so building is credited with years of use: set options.horizon_months"
            " and options.pipeline to decide)."
        ),
        f"Rented: the best rented design is {best_rent.id} at ${best_rent.usd_per_gpu_hour:.2f} per useful GPU-hour"
        f" (run {_money(best_rent.run_cost_usd)}, {best_rent.time_to_train_days:.1f} days).",
    ]
    ref = best_rent.build_reference
    if ref is not None:
        built = next(c for c in cands if c.id == ref)
        lines.append(
            f"The best built design {ref} costs ${built.usd_per_gpu_hour:.2f} per useful GPU-hour at utilisation"
            f" {u:.0%}."
        )
        same = [c for c in fits if c.rental == best_rent.rental and c.storage == best_rent.storage]
        od = next((c for c in same if c.term == "on_demand"), None)
        if od is not None and od.break_even_utilisation is not None:
            lines.append(
                f"Building becomes cheaper than {od.rental} on demand above {od.break_even_utilisation:.0%}"
                f" utilisation"
                + (" (never: above 100%)" if od.break_even_utilisation > 1 else "")
                + f", and after {od.break_even_months:.0f} months of use at {u:.0%}."
            )
        for c in sorted(same, key=lambda c: c.term or ""):
            if c.term != "on_demand" and c.break_even_months is not None:
                when = "never" if c.break_even_months == float("inf") else f"after {c.break_even_months:.0f} months"
                lines.append(f"Against a {c.term} commitment building pays back {when}.")
    if best_rent.rent_commitment_usd > 0 and best_rent.term != "on_demand":
        lines.append(
            f"Its {best_rent.term} commitment obliges {_money(best_rent.rent_commitment_usd)} (the commit column)."
        )
    lines.append(f"A rented design gives up the fabric's controls: {RENTED_GIVES_UP}; {RENTED_CONFIG}.")
    return " ".join(lines)
