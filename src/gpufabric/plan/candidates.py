"""Evaluate a spec's designs into :class:`Candidate` records, with their requirement checks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.model.collectives import ALGORITHMS
from gpufabric.model.step import StepBreakdown
from gpufabric.plan.evaluate import Candidate, evaluate_table
from gpufabric.plan.table import Design, build_table, concat_tables, enumerate_designs, scale_table
from gpufabric.spec.models import Spec


def violations_of(spec: Spec, out: dict[str, np.ndarray], i: int) -> tuple[str, ...]:
    """Requirement violations of row ``i``, each 'what actual > limit'."""
    req = spec.requirements
    found = []
    if req.max_step_time_cv is not None and out["step_time_cv"][i] > req.max_step_time_cv:
        found.append(f"step_time_cv {out['step_time_cv'][i]:.3g} > {req.max_step_time_cv:g}")
    if req.max_checkpoint_stall_fraction is not None and out["checkpoint_stall_fraction"][i] > req.max_checkpoint_stall_fraction:
        found.append(f"checkpoint_stall_fraction {out['checkpoint_stall_fraction'][i]:.3g} > {req.max_checkpoint_stall_fraction:g}")
    if req.max_time_to_train_days is not None and out["time_to_train_days"][i] > req.max_time_to_train_days:
        found.append(f"time_to_train_days {out['time_to_train_days'][i]:.1f} > {req.max_time_to_train_days:g}")
    if req.budget_usd is not None and out["capex_usd"][i] > req.budget_usd:
        found.append(f"capex_usd {out['capex_usd'][i] / 1e6:.1f}M > budget {req.budget_usd / 1e6:.1f}M")
    if out["dataset_read_gbps_needed"][i] > out["storage_read_gbps"][i]:
        found.append(f"dataset_read_gbps {out['dataset_read_gbps_needed'][i]:.3g} > storage {out['storage_read_gbps'][i]:.3g}")
    if out["goodput"][i] <= 0:
        found.append("goodput 0: failures arrive faster than checkpoints complete")
    return tuple(found)


def invalid_outputs(out: dict[str, np.ndarray]) -> dict[int, tuple[str, ...]]:
    """Rows whose model outputs include a NaN, an infinity or a negative number, with those columns.

    Every output is a time, a size, a count, a fraction or money, so none may be negative
    or non-finite; one that is means an input the models were not built for (a catalog
    figure or spec value at an extreme). The candidate then fails a requirement named
    ``model_output`` and is never recommended while a design with sound numbers exists.
    One vectorised pass over the columns: the check costs microseconds per plan.
    """
    names = list(out)
    values = np.vstack([np.asarray(out[n], dtype=float) for n in names])
    bad = ~(np.isfinite(values) & (values >= 0))
    return {int(i): tuple(names[j] for j in np.flatnonzero(bad[:, i])) for i in np.flatnonzero(bad.any(axis=0))}


def _output_violation(columns: tuple[str, ...], design_id: str) -> tuple[str, ...]:
    if not columns:
        return ()
    shown = ", ".join(columns[:4]) + (" ..." if len(columns) > 4 else "")
    return (f"model_output {shown} not a finite non-negative number for design {design_id}",)


def to_records(spec: Spec, designs: Sequence[Design], out: dict[str, np.ndarray]) -> list[Candidate]:
    """Candidate records (with StepBreakdown) from evaluated columns."""
    records = []
    invalid = invalid_outputs(out)
    for i, d in enumerate(designs):
        r = {name: float(col[i]) for name, col in out.items()}
        bd = StepBreakdown(
            step_time_s=r["step_time_det_s"], compute_s=r["compute_s"], bubble_s=r["bubble_s"],
            comm_exposed_s=r["comm_exposed_s"], dependent_latency_steps=round(r["dependent_steps"]),
            latency_per_step_s=r["latency_per_step_s"], jitter_per_step_s=r["jitter_per_step_s"],
            num_ranks=spec.num_gpus, num_nodes=spec.cluster.nodes, nodes_per_leaf=int(r["nodes_per_leaf"]),
            checkpoint_write_s=r["checkpoint_write_s"], checkpoint_block_s=r["checkpoint_block_s"],
            checkpoint_interval_s=spec.workload.checkpoint.interval_min * 60.0,
            checkpoint_async=spec.workload.checkpoint.mode == "async", restart_s=r["restart_s"],
            job_mttf_s=r["job_mttf_s"], compute_cv=r["compute_cv"], hiccup_prob=r["hiccup_prob"],
            hiccup_s=r["hiccup_s"], checkpoint_lag_s=r["checkpoint_lag_s"],
        )
        v = _output_violation(invalid.get(i, ()), d.id) + violations_of(spec, out, i)
        records.append(Candidate(
            id=d.id, fabric=d.fabric, topology=d.topology, oversubscription=d.oversubscription, storage=d.storage,
            tiers=int(r["tiers"]), step_time_s=r["step_time_s"], step_time_p99_s=r["step_time_p99_s"],
            step_time_cv=r["step_time_cv"], comm_exposed_s=r["comm_exposed_s"], checkpoint_write_s=r["checkpoint_write_s"],
            checkpoint_stall_fraction=r["checkpoint_stall_fraction"], goodput=r["goodput"],
            time_to_train_days=r["time_to_train_days"], capex_usd=r["capex_usd"], network_capex_usd=r["network_capex_usd"],
            storage_capex_usd=r["storage_capex_usd"], usd_per_gpu_hour=r["usd_per_gpu_hour"], run_cost_usd=r["run_cost_usd"],
            network_wait_usd=r["network_wait_usd"], storage_wait_usd=r["storage_wait_usd"],
            dp_algorithm=ALGORITHMS[int(r["dp_algorithm"])] if spec.workload.parallelism.dp > 1 else "none",
            switches=int(r["switches"]), transceivers=int(r["transceivers"]), cables=int(r["cables"]),
            power_kw=r["power_kw"], dataset_read_gbps_needed=r["dataset_read_gbps_needed"],
            storage_read_gbps=r["storage_read_gbps"], young_interval_min=r["young_interval_s"] / 60,
            meets_requirements=not v, violations=v, breakdown=bd,
        ))
    return records


def evaluate_scenarios(spec: Spec, catalog: Catalog, scenarios: Sequence[tuple[float, float]]) -> list[list[Candidate]]:
    """Candidates under several (network_latency, storage_latency) multipliers, in one vectorised pass."""
    designs = enumerate_designs(spec)
    base = build_table(spec, catalog, designs)
    tables = [scale_table(base, network_latency=n, storage_latency=s) for n, s in scenarios]
    out = evaluate_table(concat_tables(tables))
    k = len(designs)
    return [to_records(spec, designs, {name: col[i * k:(i + 1) * k] for name, col in out.items()})
            for i in range(len(scenarios))]


def evaluate_candidates(spec: Spec, catalog: Catalog, *, network_latency: float = 1.0,
                        storage_latency: float = 1.0) -> list[Candidate]:
    """Evaluate every design the spec's options allow.

    Args:
        network_latency, storage_latency: multipliers for sensitivity analysis.
    """
    return evaluate_scenarios(spec, catalog, [(network_latency, storage_latency)])[0]
