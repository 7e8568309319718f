"""Candidate records and requirement checks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.model.collectives import ALGORITHMS
from gpufabric.model.step import StepBreakdown
from gpufabric.plan.evaluate import Candidate, evaluate_table
from gpufabric.plan.table import Design, Table, build_table, concat_tables, enumerate_designs, scale_table
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


def to_records(spec: Spec, designs: Sequence[Design], out: dict[str, np.ndarray]) -> list[Candidate]:
    """Candidate records (with StepBreakdown) from evaluated columns."""
    records = []
    n = spec.num_gpus
    for i, d in enumerate(designs):
        bd = StepBreakdown(
            step_time_s=float(out["step_time_det_s"][i]), compute_s=float(out["compute_s"][i]),
            bubble_s=float(out["bubble_s"][i]), comm_exposed_s=float(out["comm_exposed_s"][i]),
            dependent_latency_steps=int(round(out["dependent_steps"][i])),
            latency_per_step_s=float(out["latency_per_step_s"][i]), jitter_per_step_s=float(out["jitter_per_step_s"][i]),
            num_ranks=n, num_nodes=spec.cluster.nodes, nodes_per_leaf=int(out["nodes_per_leaf"][i]),
            checkpoint_write_s=float(out["checkpoint_write_s"][i]), checkpoint_block_s=float(out["checkpoint_block_s"][i]),
            checkpoint_interval_s=spec.workload.checkpoint.interval_min * 60.0,
            checkpoint_async=spec.workload.checkpoint.mode == "async", restart_s=float(out["restart_s"][i]),
            job_mttf_s=float(out["job_mttf_s"][i]), compute_cv=float(out["compute_cv"][i]),
            hiccup_prob=float(out["hiccup_prob"][i]), hiccup_s=float(out["hiccup_s"][i]),
            checkpoint_lag_s=float(out["checkpoint_lag_s"][i]),
        )
        v = violations_of(spec, out, i)
        f = lambda k: float(out[k][i])  # noqa: E731
        records.append(Candidate(
            id=d.id, fabric=d.fabric, topology=d.topology, oversubscription=d.oversubscription, storage=d.storage,
            tiers=int(out["tiers"][i]), step_time_s=f("step_time_s"), step_time_p99_s=f("step_time_p99_s"),
            step_time_cv=f("step_time_cv"), comm_exposed_s=f("comm_exposed_s"), checkpoint_write_s=f("checkpoint_write_s"),
            checkpoint_stall_fraction=f("checkpoint_stall_fraction"), goodput=f("goodput"),
            time_to_train_days=f("time_to_train_days"), capex_usd=f("capex_usd"), network_capex_usd=f("network_capex_usd"),
            storage_capex_usd=f("storage_capex_usd"), usd_per_gpu_hour=f("usd_per_gpu_hour"), run_cost_usd=f("run_cost_usd"),
            network_wait_usd=f("network_wait_usd"), storage_wait_usd=f("storage_wait_usd"),
            dp_algorithm=ALGORITHMS[int(out["dp_algorithm"][i])] if spec.workload.parallelism.dp > 1 else "none",
            switches=int(out["switches"][i]), transceivers=int(out["transceivers"][i]), cables=int(out["cables"][i]),
            power_kw=f("power_kw"), dataset_read_gbps_needed=f("dataset_read_gbps_needed"),
            storage_read_gbps=f("storage_read_gbps"), young_interval_min=f("young_interval_s") / 60,
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
    designs = enumerate_designs(spec)
    table: Table = build_table(spec, catalog, designs)
    if network_latency != 1.0 or storage_latency != 1.0:
        table = scale_table(table, network_latency=network_latency, storage_latency=storage_latency)
    return to_records(spec, designs, evaluate_table(table))
