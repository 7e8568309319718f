"""Capex, power, $/GPU-hour and $ per run (models.md 2.8, prices in the catalog).

- Network capex = N_sw P_sw + N_xcvr P_xcvr + N_cable P_cable + N_nic P_nic.
- Capex = servers + network + storage building blocks.
- Power (kW) = servers + switches + NICs + optics + storage; energy cost per hour =
  kW * PUE * $/kWh.
- $/GPU-hour (owned) = (capex / (years * 8760 h) + energy per hour) / N_GPU.
- Total cost of ownership (spec ``site.tco``): + facility $/MW x IT MW / (facility years
  x 8760 h) + staff $/GPU-year x N_GPU / 8760 h, per GPU; the front-end and storage
  networks join the capex.
- Run cost = $/GPU-hour * N_GPU * wall hours.
- Waiting cost: the share of the run cost spent while GPUs wait on the network
  (exposed communication and tail) or on storage (checkpoint blocks, lost work).
"""

from __future__ import annotations

from typing import Any

import numpy as np

HOURS_PER_YEAR = 8760.0


def network_capex_usd(*, switches: Any, switch_usd: Any, nic_xcvrs: Any, nic_xcvr_usd: Any, switch_xcvrs: Any,
                      switch_xcvr_usd: Any, cables: Any, cable_usd: Any, nics: Any, nic_usd: Any) -> Any:
    """Compute-fabric capex (models.md 2.8)."""
    return (np.asarray(switches) * switch_usd + np.asarray(nic_xcvrs) * nic_xcvr_usd
            + np.asarray(switch_xcvrs) * switch_xcvr_usd + np.asarray(cables) * cable_usd + np.asarray(nics) * nic_usd)


def energy_usd_per_hour(power_kw: Any, pue: Any, usd_per_kwh: Any) -> Any:
    """Electricity cost per hour of operation."""
    return np.asarray(power_kw) * pue * usd_per_kwh


def usd_per_gpu_hour(*, capex_usd: Any, power_kw: Any, num_gpus: Any, years: Any, pue: Any, usd_per_kwh: Any) -> Any:
    """Owned-cluster cost of one GPU-hour: amortised capex plus energy."""
    per_hour = np.asarray(capex_usd) / (np.asarray(years) * HOURS_PER_YEAR) + energy_usd_per_hour(power_kw, pue, usd_per_kwh)
    return per_hour / np.asarray(num_gpus)


def tco_usd_per_gpu_hour(*, capex_usd: Any, power_kw: Any, num_gpus: Any, years: Any, pue: Any, usd_per_kwh: Any,
                         facility_usd_per_mw: Any, facility_years: Any, staff_usd_per_gpu_year: Any) -> Any:
    """Total cost of ownership per GPU-hour: ``usd_per_gpu_hour`` plus the facility (build
    cost per MW of IT load, amortised over its own years) and operations staff."""
    facility = np.asarray(facility_usd_per_mw) * np.asarray(power_kw) / 1e3 / (np.asarray(facility_years) * HOURS_PER_YEAR)
    staff = np.asarray(staff_usd_per_gpu_year) * np.asarray(num_gpus) / HOURS_PER_YEAR
    return usd_per_gpu_hour(capex_usd=capex_usd, power_kw=power_kw, num_gpus=num_gpus, years=years, pue=pue,
                            usd_per_kwh=usd_per_kwh) + (facility + staff) / np.asarray(num_gpus)


def run_cost_usd(*, usd_per_gpu_hour: Any, num_gpus: Any, wall_hours: Any) -> Any:
    """Cost of the whole training run."""
    return np.asarray(usd_per_gpu_hour) * np.asarray(num_gpus) * np.asarray(wall_hours)
