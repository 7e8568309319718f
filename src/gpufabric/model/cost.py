"""Capex, power, $/GPU-hour and $ per run (models.md 2.8, prices in the catalog).

- Network capex = N_sw P_sw + N_xcvr P_xcvr + N_cable P_cable + N_nic P_nic.
- Capex = servers + network + storage building blocks.
- Power (kW) = servers + switches + NICs + optics + storage; energy cost per hour =
  kW * PUE * $/kWh.
- $/GPU-hour (owned) = (capex / (years * 8760 h) + energy per hour) / N_GPU.
- Total cost of ownership (spec ``site.tco``): + facility $/MW x IT MW / (facility years
  x 8760 h) + staff $/GPU-year x N_GPU / 8760 h, per GPU; the front-end and storage
  networks join the capex.
- Utilisation u (``options.utilisation``): a built cluster is paid and powered whether
  busy or not, so a useful GPU-hour costs $/GPU-hour / u. Rented on demand: the catalog
  price per GPU-hour (paid only while used); rented on a 1- or 3-year commitment: the
  price / u (every hour of the term is paid).
- Horizon (``options.horizon_months``, default the amortisation period): a build needed
  for H months pays its capex less the resale of the book value left at H (straight-line
  over the amortisation, x ``site.resale_fraction``), spread over H; a commitment longer
  than H is paid in full. With ``options.pipeline`` the utilisation is the pipeline's
  busy share of the horizon (hours outside it are idle).
- Break-even utilisation (build vs on-demand rent): building is cheaper above
  u* = (capex / (years x 8760) + opex per hour) / rent per hour.
- Break-even months (build vs rent at the spec's utilisation): cumulative build cost
  capex + opex x m falls under cumulative rent R x m after m* = capex / (R - opex) months.
  At u = u*, m* = years x 12: the two figures agree by construction (tests check it).
- Run cost = $/GPU-hour * N_GPU * wall hours.
- Waiting cost: the share of the run cost spent while GPUs wait on the network
  (exposed communication and tail) or on storage (checkpoint blocks, lost work).
"""

from __future__ import annotations

from typing import Any

import numpy as np

HOURS_PER_YEAR = 8760.0
HOURS_PER_MONTH = HOURS_PER_YEAR / 12  # 730


def network_capex_usd(
    *,
    switches: Any,
    switch_usd: Any,
    nic_xcvrs: Any,
    nic_xcvr_usd: Any,
    switch_xcvrs: Any,
    switch_xcvr_usd: Any,
    cables: Any,
    cable_usd: Any,
    nics: Any,
    nic_usd: Any,
) -> Any:
    """Compute-fabric capex (models.md 2.8)."""
    return (
        np.asarray(switches) * switch_usd
        + np.asarray(nic_xcvrs) * nic_xcvr_usd
        + np.asarray(switch_xcvrs) * switch_xcvr_usd
        + np.asarray(cables) * cable_usd
        + np.asarray(nics) * nic_usd
    )


def energy_usd_per_hour(power_kw: Any, pue: Any, usd_per_kwh: Any) -> Any:
    """Electricity cost per hour of operation."""
    return np.asarray(power_kw) * pue * usd_per_kwh


def usd_per_gpu_hour(*, capex_usd: Any, power_kw: Any, num_gpus: Any, years: Any, pue: Any, usd_per_kwh: Any) -> Any:
    """Owned-cluster cost of one GPU-hour: amortised capex plus energy."""
    per_hour = np.asarray(capex_usd) / (np.asarray(years) * HOURS_PER_YEAR) + energy_usd_per_hour(
        power_kw, pue, usd_per_kwh
    )
    return per_hour / np.asarray(num_gpus)


def tco_usd_per_gpu_hour(
    *,
    capex_usd: Any,
    power_kw: Any,
    num_gpus: Any,
    years: Any,
    pue: Any,
    usd_per_kwh: Any,
    facility_usd_per_mw: Any,
    facility_years: Any,
    staff_usd_per_gpu_year: Any,
) -> Any:
    """Total cost of ownership per GPU-hour: ``usd_per_gpu_hour`` plus the facility (build
    cost per MW of IT load, amortised over its own years) and operations staff."""
    facility = (
        np.asarray(facility_usd_per_mw) * np.asarray(power_kw) / 1e3 / (np.asarray(facility_years) * HOURS_PER_YEAR)
    )
    staff = np.asarray(staff_usd_per_gpu_year) * np.asarray(num_gpus) / HOURS_PER_YEAR
    return usd_per_gpu_hour(
        capex_usd=capex_usd, power_kw=power_kw, num_gpus=num_gpus, years=years, pue=pue, usd_per_kwh=usd_per_kwh
    ) + (facility + staff) / np.asarray(num_gpus)


def run_cost_usd(*, usd_per_gpu_hour: Any, num_gpus: Any, wall_hours: Any) -> Any:
    """Cost of the whole training run."""
    return np.asarray(usd_per_gpu_hour) * np.asarray(num_gpus) * np.asarray(wall_hours)


def rented_usd_per_gpu_hour(
    *, usd_per_gpu_hour: Any, committed: Any, utilisation: Any, term_h: Any = 0.0, horizon_h: Any = np.inf
) -> Any:
    """Cost of one useful rented GPU-hour: on demand the catalog price; committed the price
    over the utilisation (the idle hours of the term are paid too), and a term longer than
    the horizon is paid in full: x term / horizon."""
    price = np.asarray(usd_per_gpu_hour, dtype=float)
    beyond = np.maximum(1.0, np.asarray(term_h, dtype=float) / np.asarray(horizon_h, dtype=float))
    return np.where(committed, price * beyond / np.asarray(utilisation, dtype=float), price)


def horizon_capex_usd(*, capex_usd: Any, residual_fraction: Any) -> Any:
    """Capex a horizon pays: all of it, less what the cluster sells for at the horizon's end
    (``residual_fraction`` = resale share x book value left, 0 at or past the amortisation)."""
    return np.asarray(capex_usd, dtype=float) * (1.0 - np.asarray(residual_fraction, dtype=float))


def break_even_utilisation(
    *, capex_usd: float, opex_usd_per_hour: float, years: float, rent_usd_per_hour: float
) -> float:
    """Utilisation above which building costs less per useful hour than renting on demand.

    Build: (capex / (years x 8760) + opex) / u per useful hour; on-demand rent: the same
    rent every useful hour. Above 1: renting on demand wins at any utilisation.
    """
    return (capex_usd / (years * HOURS_PER_YEAR) + opex_usd_per_hour) / rent_usd_per_hour


def break_even_months(*, capex_usd: float, build_opex_usd_per_month: float, rent_usd_per_month: float) -> float:
    """Months of use after which building (capex up front, then opex) is cheaper than renting.

    inf when the rent does not exceed the build's running cost (building never pays back).
    """
    saving = rent_usd_per_month - build_opex_usd_per_month
    return capex_usd / saving if saving > 0 else float("inf")
