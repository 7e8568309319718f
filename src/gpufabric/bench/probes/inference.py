"""``gpufabric bench inference``: the serving plan's KV transfers and weight load, measured.

Composes two existing probes rather than adding a worker (and, through
``bench.inference_service``, a serving load on the same run): the ``collectives`` probe with
``send_recv`` at the KV message sizes the model implies (one per-layer message of one TP
rank for the mean and the longest prompt: ``prompt x kv_bytes_per_token / (tp x
layers)``), and the ``checkpoint`` probe's safetensors write + cache-defeated read of a
scaled-down weight file. Both launches are parts of one run (``run_inference``); this
module derives the sizes and judges the measured p99 per-message time against the
model's prediction for the plan's recommended design (``Design``). On hardware that is not
the design's (``bench.planned``) those verdicts are ``not_planned_hardware``, as in the suite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpufabric.bench.probes import run as probe_run
from gpufabric.bench.probes import service
from gpufabric.bench.probes.outcomes import CheckpointRow, CollectiveRow, CollectivesOutcome, ProbeOutcome
from gpufabric.bench.probes.summaries import COMMIT_PHASES
from gpufabric.model import inference as m
from gpufabric.model.collectives import collective_times
from gpufabric.results.recorder import interruption
from gpufabric.results.records import Direction, Outcome, Slo, Verdict

#: Allowance on the model's mean per-message time before a transfer fails its SLO [U]:
#: the catalog's per-message jitter on RDMA fabrics (2-3 us sigma) keeps a 1 MiB message's
#: p99 within 1.2x of its ~40 us mean; 1.5x leaves room for host noise. TCP's rare
#: retransmission hiccups are a tail the simulator judges, not this per-message check.
KV_SLO_FACTOR = 1.5


@dataclass(frozen=True, slots=True, kw_only=True)
class KvProbeSize:
    """One KV message size to measure and its model time on the plan's fabric."""

    label: str
    prompt_tokens: int
    size_bytes: int
    model_time_us: float


def kv_probe_sizes(spec: Any, catalog: Any, *, fabric: str, tp: int) -> list[KvProbeSize]:
    """Per-layer, per-rank KV messages for the mean and the longest prompt of ``spec``."""
    shape = m.shape_from_spec(spec.workload.model)
    prompt = spec.workload.traffic.prompt_tokens
    longest = prompt.max if prompt.max is not None else 8 * prompt.mean
    if prompt.cv == 0:
        longest = prompt.mean
    links = m.serving_links(catalog, spec.cluster.gpu, fabric, spec.cluster.gpus_per_node)
    out = []
    for label, tokens in (("mean prompt", round(prompt.mean)), ("longest prompt", round(longest))):
        size = max(1, round(tokens * shape.kv_bytes_per_token / (tp * shape.layers)))
        t_us = float(collective_times("send_recv", size, 2, tp, links).time_us)
        out.append(KvProbeSize(label=label, prompt_tokens=int(tokens), size_bytes=int(size), model_time_us=t_us))
    return out


def kv_verdicts(sizes: list[KvProbeSize], rows: Sequence[CollectiveRow], *, fabric: str) -> list[Verdict]:
    """Measured p99 per-message time against ``KV_SLO_FACTOR`` x the model's time on ``fabric``."""
    verdicts = []
    for probe in sizes:
        # The probe rounds sizes down to whole elements; take the closest measured size.
        row = min(rows, key=lambda r: abs(r.size_bytes - probe.size_bytes), default=None)
        limit = KV_SLO_FACTOR * probe.model_time_us
        if row is None:
            verdicts.append(
                Verdict(
                    test=f"kv {probe.label}",
                    metric="time_p99_us",
                    host="cluster",
                    outcome=Outcome.failed,
                    measured=None,
                    expected=limit,
                    direction=Direction.lower,
                    margin=None,
                    reason="no measurement",
                    unit="us",
                )
            )
            continue
        measured = row.time_p99_us
        ok = measured <= limit
        verdicts.append(
            Verdict(
                test=f"kv {probe.label} ({probe.prompt_tokens} tokens, {probe.size_bytes} B/message)",
                metric="time_p99_us",
                host="cluster",
                outcome=Outcome.passed if ok else Outcome.failed,
                measured=measured,
                expected=limit,
                direction=Direction.lower,
                margin=(limit - measured) / limit,
                unit="us",
                reason=f"p99 {measured:.1f} us {'<=' if ok else '>'} {limit:.1f} us ({KV_SLO_FACTOR} x the {fabric} model)",
                source=f"gpufabric plan: model/inference.py kv transfer on {fabric}",
            )
        )
    return verdicts


@dataclass(frozen=True, slots=True, kw_only=True)
class Design:
    """The serving design the probe is judged against: the plan's recommendation (or ``--fabric``)."""

    fabric: str
    tp: int
    source: str  # "plan recommendation disaggregated/tcp-100g/local-nvme", "--fabric roce-400g"


def kv_slos(sizes: Sequence[KvProbeSize], design: Design) -> list[Slo]:
    """The KV verdicts' bounds as SLOs, for ``--dry-run`` (one line each, with provenance)."""
    return [
        Slo(
            test=f"kv {probe.label} ({probe.prompt_tokens} tokens, {probe.size_bytes} B/message)",
            metric="time_p99_us",
            direction=Direction.lower,
            maximum=KV_SLO_FACTOR * probe.model_time_us,
            source=f"{design.source}: {KV_SLO_FACTOR} x the {design.fabric} model's"
            f" {probe.model_time_us:.4g} us per message (tp {design.tp})",
        )
        for probe in sizes
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceOutcome(ProbeOutcome):
    """One ``bench inference`` run: the KV sweep and (with ``--dir``) the weight load."""

    kv: CollectivesOutcome
    kv_verdicts: tuple[Verdict, ...] = ()
    load_rows: tuple[CheckpointRow, ...] = ()
    loaded: bool = False  # the weight-load part ran


def run_inference(
    *,
    sizes: Sequence[KvProbeSize],
    design: Design | None,
    kv_config: dict[str, Any] | None,
    opts: probe_run.LaunchOptions,
    load_config: dict[str, Any] | None,
    load_opts: probe_run.LaunchOptions | None,
    db: str | None,
    argv: Sequence[str],
    judging: service.Judging = service.Judging(),
    spec_name: str = "",
    serving_load: Callable[[service.Session], Sequence[Verdict]] | None = None,
) -> InferenceOutcome:
    """The parts in one run (the KV sweep when ``kv_config``, the weight load when
    ``load_config``, then ``serving_load``, which stores its own results and returns its
    verdicts); the run's status covers the KV SLOs, exactness, the load and its SLOs."""
    meta: dict[str, Any] = {"launcher": opts.launcher}
    if design is not None:
        meta.update(fabric=design.fabric, tp=design.tp, design=design.source)
    if kv_config is not None:
        service.validate("collectives", kv_config, opts)
    if load_config is not None and load_opts is not None:
        service.validate("checkpoint", load_config, load_opts)
    kv_results: list[Any] = []
    kv_checks: list[Verdict] = []
    judged: list[Verdict] = []
    kv_error = ""
    with service.session(db, "bench.inference", argv, opts, meta=meta, judging=judging, spec_name=spec_name) as run:
        if kv_config is not None and design is not None:
            kv_results, kv_checks, kv_error = service.collectives_into(run, kv_config, opts, judging=judging, part="kv")
            judged = kv_verdicts(list(sizes), [CollectiveRow.from_result(r) for r in kv_results], fabric=design.fabric)
            if run.not_planned:
                from gpufabric.bench.planned import mark_not_planned

                judged = mark_not_planned(judged, run.not_planned)
            run.rec.add_verdicts(judged)
        load_results: list[Any] = []
        load_checks: list[Verdict] = []
        if load_config is not None and load_opts is not None and run.interrupted is None and not run.errors:
            load_results, load_checks, _ = service.checkpoint_into(
                run, load_config, load_opts, judging=service.Judging(), part="weight_load"
            )
        served: Sequence[Verdict] = ()
        if serving_load is not None and run.interrupted is None and not run.errors:
            served = serving_load(run)
        missing = kv_config is not None and not kv_results
        status = run.finish(no_results="no KV size finished" if missing else "")
    verdicts = [*kv_checks, *judged, *load_checks, *served]
    kv = CollectivesOutcome(
        run_id=run.rec.run_id,
        status=status,
        signum=run.signum,
        error=kv_error,
        rows=tuple(CollectiveRow.from_result(r) for r in kv_results),
        failures=service.lines(kv_checks, Outcome.failed, Outcome.not_planned),
        warnings=service.lines(kv_checks, Outcome.noisy),
    )
    return InferenceOutcome(
        run_id=run.rec.run_id,
        status=status,
        signum=run.signum,
        error="; ".join(run.errors) or (interruption(run.interrupted) if run.interrupted else ""),
        failures=service.lines(verdicts, Outcome.failed, Outcome.not_planned),
        warnings=service.lines(verdicts, Outcome.noisy),
        kv=kv,
        kv_verdicts=tuple(judged),
        load_rows=tuple(CheckpointRow.from_result(r, COMMIT_PHASES) for r in load_results),
        loaded=load_config is not None,
    )
