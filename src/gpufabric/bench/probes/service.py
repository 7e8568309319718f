"""Run a probe end to end: launch, merge records, judge, record. The CLI only prints.

Each function records the run through ``Store.recording`` and returns a typed outcome
(``outcomes``) whose status gives the exit code; the CLI renders it. Verdicts: #wrong must
be 0, no straggler, and (train with repeats or a reference) bitwise-identical parameters.
"""

from __future__ import annotations

import base64
import io
import json
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpufabric.bench.probes import run as probe_run
from gpufabric.bench.probes.live import size_row
from gpufabric.bench.probes.outcomes import (
    CheckpointOutcome,
    CheckpointRow,
    CollectiveRow,
    CollectivesOutcome,
    Comparison,
    TrainOutcome,
    TrainRow,
)
from gpufabric.bench.probes.results import collective_results
from gpufabric.bench.probes.summaries import COMMIT_PHASES, checkpoint_results, compare_params, train_result
from gpufabric.errors import InputError
from gpufabric.results.records import Direction, Outcome, RunStatus, TestResult, Verdict

#: Largest parameter vector kept with a run (as a compressed artifact) for later --against.
MAX_PARAMS_ARTIFACT_BYTES = 16 << 20


def store_run(
    *,
    db: str | None,
    kind: str,
    argv: Sequence[str],
    executed: Sequence[Any],
    results: Sequence[TestResult],
    verdicts: Sequence[Verdict],
    status: RunStatus,
    meta: dict[str, Any],
    artifacts: dict[str, str] | None = None,
    started_at: float | None = None,
) -> int:
    """Record the run: fingerprint with the rank map, results, verdicts, launch artifacts.

    ``started_at``: when the probe started (the run is recorded after it ran; without it
    a 53 s sweep would show as lasting the 0.3 s its recording took).
    """
    from gpufabric.bench import fingerprint
    from gpufabric.results.store import Store

    first = executed[0]
    prep = first.prepared
    run_info = {"launcher": prep.plan.launcher, "backend": prep.config["backend"], "ranks": first.rank_map()}
    with (
        Store.open(db) as store,
        store.recording(kind, argv, fingerprint.collect(run=run_info), meta=meta, started_at=started_at) as rec,
    ):
        for result in results:
            rec.result(result)
        rec.add_verdicts(verdicts)
        rec.artifact("launch_commands", "\n".join(c.shell() for c in prep.plan.commands) + "\n")
        if prep.plan.script:
            rec.artifact("sbatch_script", prep.plan.script)
        for i, ex in enumerate(executed):
            if ex.error:
                rec.artifact(f"launch_logs_{i}", "\n----\n".join(ex.outcome.logs))
        for name, content in (artifacts or {}).items():
            rec.artifact(name, content)
        rec.finish(status)
    return rec.run_id


def collective_verdicts(results: Sequence[TestResult]) -> list[Verdict]:
    """#wrong must be 0 for every size; a straggler fails the size and names its rank and host."""
    verdicts = []
    for r in results:
        wrong = r.require("wrong_elements").value
        label = f"{r.name} {r.params['dtype']} {r.params['size_bytes']} B"
        verdicts.append(
            Verdict(
                test=label,
                metric="wrong_elements",
                host=r.host,
                outcome=Outcome.failed if wrong else Outcome.passed,
                measured=wrong,
                expected=0.0,
                direction=Direction.lower,
                margin=None,
                reason=f"{wrong:.0f} wrong element(s)" if wrong else "exact",
            )
        )
        verdicts += _straggler_verdicts(r, label, "rank_time_p50_us")
    return verdicts


def _straggler_verdicts(r: TestResult, label: str, metric: str) -> list[Verdict]:
    """Failed verdicts naming each straggler's rank and host; only 'noisy' on an oversubscribed host."""
    ranks = r.ranks
    if ranks is None:
        return []
    busy = ranks.oversubscribed
    return [
        Verdict(
            test=label,
            metric=metric,
            host=ranks.host(rank),
            outcome=Outcome.noisy if busy else Outcome.failed,
            measured=stat.p50 if (stat := ranks.get(rank)) else None,
            expected=None,
            direction=Direction.lower,
            margin=None,
            reason=f"straggler: rank {rank} on {ranks.host(rank)}" + (f" (not judged: {busy})" if busy else ""),
        )
        for rank in ranks.stragglers
    ]


def run_collectives(
    config: dict[str, Any],
    opts: probe_run.LaunchOptions,
    *,
    db: str | None,
    argv: Sequence[str],
    on_size: Callable[[dict[str, Any]], None] | None = None,
) -> CollectivesOutcome:
    """Run a sweep; ``on_size`` gets a ``live.size_row`` for each size rank 0 finishes, as it finishes."""
    started = time.time()
    prep = probe_run.prepare("collectives", config, opts)

    def on_record(record: dict[str, Any]) -> None:
        row = size_row(record, prep.plan.num_ranks)
        if row is not None and on_size is not None:  # installed only with on_size; re-tested to narrow it here
            on_size(row)

    try:
        ex = probe_run.execute(prep, opts, on_record if on_size is not None else None)
        results = collective_results(ex.logs, argv=tuple(prep.plan.commands[0].argv))
    finally:
        probe_run.cleanup(prep)
    verdicts = collective_verdicts(results)
    status = _status(ex.error, verdicts)
    run_id = store_run(
        db=db,
        kind="bench.collectives",
        argv=argv,
        executed=[ex],
        results=results,
        verdicts=verdicts,
        status=status,
        meta={"num_ranks": prep.plan.num_ranks, "launcher": opts.launcher},
        started_at=started,
    )
    return CollectivesOutcome(
        run_id=run_id,
        status=status,
        error=ex.error,
        rows=tuple(CollectiveRow.from_result(r) for r in results),
        failures=tuple(v.reason + f" ({v.test})" for v in verdicts if v.outcome is Outcome.failed),
        warnings=tuple(v.reason + f" ({v.test})" for v in verdicts if v.outcome is Outcome.noisy),
    )


def _status(error: str, verdicts: Sequence[Verdict], *, no_results: bool = False) -> RunStatus:
    """error when the launch failed, failed when a verdict did (or nothing was measured)."""
    if error:
        return RunStatus.error
    failed = no_results or any(v.outcome is Outcome.failed for v in verdicts)
    return RunStatus.failed if failed else RunStatus.passed


def _params_artifact(vector: np.ndarray) -> str:
    buf = io.BytesIO()
    np.save(buf, vector)
    return base64.b64encode(zlib.compress(buf.getvalue(), 6)).decode("ascii")


def _params_from_artifact(text: str) -> np.ndarray:
    return np.load(io.BytesIO(zlib.decompress(base64.b64decode(text))))


def _setup(result: TestResult, ex: Any) -> dict[str, Any]:
    keys = ("num_ranks", "mode", "seed", "hidden", "layers", "seq_len", "batch", "steps")
    setup: dict[str, Any] = {k: result.params.get(k) for k in keys}
    setup["rank_placement"] = json.dumps([(r["rank"], r["host"], r["device"]) for r in ex.rank_map()])
    setup["launcher"] = ex.prepared.plan.launcher
    return setup


def run_train(
    config: dict[str, Any],
    opts: probe_run.LaunchOptions,
    *,
    repeat: int,
    against: str | None,
    db: str | None,
    argv: Sequence[str],
    env: dict[str, str],
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> TrainOutcome:
    """K training steps, ``repeat`` times; bitwise verdict across repeats and/or against a stored run.

    ``on_record`` sees rank 0's records as they are written (live progress), from a thread.
    """
    started = time.time()
    reference = _load_reference(db, against) if against else None
    executed, results, vectors, setups = [], [], [], []
    for i in range(repeat):
        prep = probe_run.prepare("train", config, opts)
        try:
            ex = probe_run.execute(prep, opts, on_record)
            params_file = prep.out_dir / "params.npy"
            vectors.append(np.load(params_file) if params_file.exists() else None)
        finally:
            probe_run.cleanup(prep)
        executed.append(ex)
        result = train_result(ex.logs, prep.config, argv=tuple(prep.plan.commands[0].argv), repeat=i)
        if result is not None:
            results.append(result)
            setups.append(_setup(result, ex))
        if ex.error:
            break
    error = next((ex.error for ex in executed if ex.error), "")
    verdicts: list[Verdict] = []
    comparisons = []
    pairs = [
        (f"repeat 0 vs repeat {i}", vectors[0], vectors[i], setups[0], setups[i])
        for i in range(1, len(results))
        if len(vectors) > i
    ]
    if reference is not None and results:
        pairs.append(
            (f"run {reference['run_id']} vs this run", reference["vector"], vectors[0], reference["setup"], setups[0])
        )
    for label, a, b, sa, sb in pairs:
        rep = compare_params(a, b, setup_a=sa, setup_b=sb, env=env)
        comparisons.append(Comparison(compared=label, result=rep))
        verdicts.append(
            Verdict(
                test="torch.train.reproducibility",
                metric="max_abs_diff",
                host="cluster",
                outcome=Outcome.passed if rep.identical else Outcome.failed,
                measured=rep.max_abs_diff,
                expected=0.0,
                direction=Direction.lower,
                margin=None,
                reason=f"{label}: "
                + (
                    "bitwise identical"
                    if rep.identical
                    else f"{rep.differing_elements} of {rep.num_params} parameters differ,"
                    f" max abs {rep.max_abs_diff:.3g}, max rel {rep.max_rel_diff:.3g}"
                ),
            )
        )
    for r in results:
        verdicts += _straggler_verdicts(r, f"torch.train repeat {r.params['repeat']}", "rank_step_p50_s")
    status = _status(error, verdicts, no_results=not results)
    artifacts = {}
    if vectors and vectors[0] is not None and vectors[0].nbytes <= MAX_PARAMS_ARTIFACT_BYTES:
        artifacts["train_params_npy_zlib_b64"] = _params_artifact(vectors[0])
        artifacts["train_setup"] = json.dumps(setups[0])
    run_id = store_run(
        db=db,
        kind="bench.train",
        argv=argv,
        executed=executed,
        results=results,
        verdicts=verdicts,
        status=status,
        meta={"repeat": repeat, "launcher": opts.launcher},
        artifacts=artifacts,
        started_at=started,
    )
    return TrainOutcome(
        run_id=run_id,
        status=status,
        error=error,
        shape={
            k: config[k]
            for k in ("hidden", "layers", "heads", "seq_len", "vocab", "batch", "spec_layout", "mode", "seed", "steps")
        },
        rows=tuple(TrainRow.from_result(r) for r in results),
        reproducibility=tuple(comparisons),
        failures=tuple(v.reason for v in verdicts if v.outcome is Outcome.failed),
        warnings=tuple(v.reason for v in verdicts if v.outcome is Outcome.noisy),
    )


def _load_reference(db: str | None, ref: str) -> dict[str, Any]:
    from gpufabric.results.store import Store

    with Store.open(db) as store:
        run = store.get_run(int(ref) if ref.isdigit() else ref)
    if "train_params_npy_zlib_b64" not in run.artifacts:
        raise InputError(f"run {run.id} has no stored training parameters (not a `bench train` run, or too large)")
    return {
        "run_id": run.id,
        "vector": _params_from_artifact(run.artifacts["train_params_npy_zlib_b64"]),
        "setup": json.loads(run.artifacts.get("train_setup", "{}")),
    }


def run_checkpoint(
    config: dict[str, Any],
    opts: probe_run.LaunchOptions,
    *,
    db: str | None,
    argv: Sequence[str],
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> CheckpointOutcome:
    Path(config["directory"]).mkdir(parents=True, exist_ok=True)
    started = time.time()
    prep = probe_run.prepare("checkpoint", config, opts)
    try:
        ex = probe_run.execute(prep, opts, on_record)
    finally:
        probe_run.cleanup(prep)
    results = checkpoint_results(ex.logs, directory=config["directory"], argv=tuple(prep.plan.commands[0].argv))
    verdicts = [
        Verdict(
            test=r.name,
            metric="wrong_tensors",
            host="cluster",
            outcome=Outcome.failed if r.require("wrong_tensors").value else Outcome.passed,
            measured=r.require("wrong_tensors").value,
            expected=0.0,
            direction=Direction.lower,
            margin=None,
            reason=r.reason or "read back identical",
        )
        for r in results
    ]
    status = _status(ex.error, verdicts)
    run_id = store_run(
        db=db,
        kind="bench.checkpoint",
        argv=argv,
        executed=[ex],
        results=results,
        verdicts=verdicts,
        status=status,
        meta={"launcher": opts.launcher, "directory": config["directory"]},
        started_at=started,
    )
    return CheckpointOutcome(
        run_id=run_id,
        status=status,
        error=ex.error,
        rows=tuple(CheckpointRow.from_result(r, COMMIT_PHASES) for r in results),
        failures=tuple(v.reason for v in verdicts if v.outcome is Outcome.failed),
    )
