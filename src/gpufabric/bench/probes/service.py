"""Run a probe end to end: record, launch, merge records, judge. The CLI only prints.

Each command is one run, opened (``session``) before anything is launched and holding
every launch it makes (``bench inference``: the KV sweep and the weight load). Each
launch's finished measurements are stored when it ends, also when Ctrl-C or SIGTERM
stopped it (``run.execute`` returns the interruption after the ranks' groups are killed);
the run then ends ``interrupted`` and the outcome's exit code is 130 or 143. Verdicts:
#wrong must be 0, no straggler, (train with repeats or a reference) bitwise-identical
parameters, and every SLO of ``--thresholds``/``--plan`` on the metrics measured
(``Judging``). The functions return typed outcomes (``outcomes``); the CLI renders them.
The probe requests (``requests.py``) call them; a launcher that follows its job instead of
reading the ranks' records back (k8s) is recorded by :func:`run_followed`.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import signal
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
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
    FollowedOutcome,
    TrainOutcome,
    TrainRow,
)
from gpufabric.bench.probes.results import collective_results
from gpufabric.bench.probes.summaries import COMMIT_PHASES, checkpoint_results, compare_params, train_result
from gpufabric.errors import InputError, Terminated
from gpufabric.exec.process import interrupt_once
from gpufabric.results.recorder import Recorder, interruption, run_info
from gpufabric.results.records import Direction, Outcome, RunInfo, RunStatus, Slo, Status, TestResult, Verdict

#: Largest parameter vector kept with a run (as a compressed artifact) for later --against.
MAX_PARAMS_ARTIFACT_BYTES = 16 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Judging:
    """What a probe's measurements are judged against besides exactness and stragglers.

    ``slos``: from ``--thresholds``, bounds for this hardware as the user gave them, judged
    as they are. ``plan_slos``: what the plan's recommended design should measure
    (``bench.slo.probe_slos``); on hardware that is not that design (``planned``,
    ``bench.planned``) their verdicts become ``not_planned_hardware``, as in the suite. Both
    match the probe's results by test name (``torch.all_reduce``, ``torch.train``,
    ``torch.checkpoint.dcp``, or one size's case) and metric.
    """

    slos: tuple[Slo, ...] = ()
    plan_slos: tuple[Slo, ...] = ()
    planned: Any = None  # bench.planned.PlannedHardware

    @property
    def count(self) -> int:
        return len(self.slos) + len(self.plan_slos)


@dataclass(slots=True)
class Session:
    """One probe command being recorded: one run, however many launches it takes."""

    rec: Recorder
    opts: probe_run.LaunchOptions
    spec_name: str = ""
    fingerprint: dict[str, Any] = field(default_factory=dict)
    not_planned: tuple[str, ...] = ()
    hosts: list[str] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)
    interrupted: KeyboardInterrupt | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def signum(self) -> int:
        if self.interrupted is None:
            return 0
        return Terminated.signum if isinstance(self.interrupted, Terminated) else int(signal.SIGINT)

    def launch(
        self,
        kind: str,
        config: dict[str, Any],
        opts: probe_run.LaunchOptions,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        *,
        part: str = "",
        before_cleanup: Callable[[Path], None] | None = None,
    ) -> probe_run.Executed:
        """Prepare, run and clean up one launch; its commands and (on failure) logs become artifacts.

        ``before_cleanup`` reads what it needs from the run directory before it is removed.
        """
        prep = probe_run.prepare(kind, config, opts)
        prefix = f"{part}_" if part else ""
        try:
            self.rec.artifact(f"{prefix}launch_commands", "\n".join(c.shell() for c in prep.plan.commands) + "\n")
            if prep.plan.script:
                self.rec.artifact(f"{prefix}sbatch_script", prep.plan.script)
            ex = probe_run.execute(prep, opts, on_record)
            if before_cleanup is not None:
                before_cleanup(prep.out_dir)
        finally:
            probe_run.cleanup(prep)
        self.hosts += [h for h in ex.hosts if h not in self.hosts]
        if not part or "ranks" not in self.fingerprint.get("run", {}):
            # The first launch's placement is the run's (a changed placement shows as drift).
            run_section = {**self.fingerprint.get("run", {}), "ranks": ex.rank_map()}
            self.fingerprint = {**self.fingerprint, "run": run_section}
            self.rec.update_fingerprint(self.fingerprint)
        if ex.outcome is not None:
            self.job_ids += [j for j in _job_ids(ex.outcome.logs) if j not in self.job_ids]
        if ex.error:
            self.errors.append(ex.error)
            if ex.outcome is not None:
                self.rec.artifact(f"{prefix}launch_logs", "\n----\n".join(ex.outcome.logs))
        if ex.interrupted is not None:
            self.interrupted = ex.interrupted
        return ex

    def judge(self, results: Sequence[TestResult], verdicts: Sequence[Verdict], judging: Judging) -> list[Verdict]:
        """Store ``results`` and every verdict on them: the probe's own checks, then its SLOs."""
        from gpufabric.results.verdicts import evaluate

        self.rec.add_results(list(results))
        planned = evaluate(results, judging.plan_slos) if judging.plan_slos else []
        if self.not_planned:
            from gpufabric.bench.planned import mark_not_planned

            planned = mark_not_planned(planned, self.not_planned)
        out = [*verdicts, *(evaluate(results, judging.slos) if judging.slos else []), *planned]
        self.rec.add_verdicts(out)
        return out

    def describe(self) -> None:
        """Tell the recorder where the run ran (stored when it finishes)."""
        self.rec.describe(run_info(hosts=self.hosts, job_ids=self.job_ids, cluster=self.spec_name))

    def finish(self, *, no_results: str = "") -> RunStatus:
        """End the run: interrupted, error (a launch failed), failed (``no_results`` says why), or judged."""
        self.describe()
        if self.interrupted is not None:
            return self.rec.finish(RunStatus.interrupted, reason=interruption(self.interrupted))
        if self.errors:
            return self.rec.finish(RunStatus.error, reason="; ".join(self.errors))
        if no_results:
            return self.rec.finish(RunStatus.failed, reason=no_results)
        return self.rec.finish()


def validate(kind: str, config: dict[str, Any], opts: probe_run.LaunchOptions) -> None:
    """Every check ``prepare`` makes, before a run is opened: a usage error (exit 2) stores no run."""
    probe_run.cleanup(probe_run.prepare(kind, config, opts, write=False))


@contextmanager
def session(
    db: str | None,
    kind: str,
    argv: Sequence[str],
    opts: probe_run.LaunchOptions,
    *,
    meta: dict[str, Any],
    judging: Judging = Judging(),
    spec_name: str = "",
) -> Iterator[Session]:
    """Open the run before anything is launched (so an interruption at any point is recorded),
    yield the session, and store where it ran when it ends."""
    from gpufabric.bench import fingerprint
    from gpufabric.results.store import Store

    fp = fingerprint.collect(run={"launcher": opts.launcher, "backend": opts.backend})
    not_planned: tuple[str, ...] = ()
    if judging.planned is not None:
        from gpufabric.bench.planned import mismatches

        not_planned = mismatches(judging.planned, fp)
    meta = {**meta, "slos": judging.count} if judging.count else meta
    with (
        interrupt_once(),  # a second Ctrl-C or SIGTERM must not cut the ranks' cleanup short
        Store.open(db) as store,
        store.recording(kind, argv, fp, meta=meta, spec_name=spec_name) as rec,
    ):
        current = Session(rec=rec, opts=opts, spec_name=spec_name, fingerprint=fp, not_planned=not_planned)
        try:
            yield current
        finally:
            current.describe()  # for a run the recorder ends (an exception): where it got to


def _job_ids(logs: Sequence[str]) -> list[str]:
    """Slurm job ids the launcher printed (``sbatch``: "Submitted batch job N")."""
    return [m for text in logs for m in re.findall(r"Submitted batch job (\d+)", text)]


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
    judging: Judging = Judging(),
) -> CollectivesOutcome:
    """Run a sweep; ``on_size`` gets a ``live.size_row`` for each size rank 0 finishes, as it finishes."""
    validate("collectives", config, opts)
    with session(
        db,
        "bench.collectives",
        argv,
        opts,
        meta={"num_ranks": opts.nodes * opts.nproc, "launcher": opts.launcher},
        judging=judging,
    ) as run:
        outcome = collectives_into(run, config, opts, on_size=on_size, judging=judging)
        status = run.finish(no_results="" if outcome[0] else "no size finished")
    results, verdicts, error = outcome
    return _collectives_outcome(run, status, results, verdicts, error)


def collectives_into(
    run: Session,
    config: dict[str, Any],
    opts: probe_run.LaunchOptions,
    *,
    on_size: Callable[[dict[str, Any]], None] | None = None,
    judging: Judging = Judging(),
    part: str = "",
) -> tuple[list[TestResult], list[Verdict], str]:
    """One collectives launch inside ``run``: its finished sizes stored and judged (also when interrupted)."""
    num_ranks = opts.nodes * opts.nproc

    def on_record(record: dict[str, Any]) -> None:
        row = size_row(record, num_ranks)
        if row is not None and on_size is not None:  # installed only with on_size; re-tested to narrow it here
            on_size(row)

    ex = run.launch("collectives", config, opts, on_record if on_size is not None else None, part=part)
    results = collective_results(ex.logs, argv=tuple(ex.prepared.plan.commands[0].argv))
    verdicts = run.judge(results, collective_verdicts(results), judging)
    return results, verdicts, ex.error


def _collectives_outcome(
    run: Session, status: RunStatus, results: Sequence[TestResult], verdicts: Sequence[Verdict], error: str
) -> CollectivesOutcome:
    return CollectivesOutcome(
        run_id=run.rec.run_id,
        status=status,
        signum=run.signum,
        error=error or (interruption(run.interrupted) if run.interrupted else ""),
        rows=tuple(CollectiveRow.from_result(r) for r in results),
        failures=lines(verdicts, Outcome.failed, Outcome.not_planned),
        warnings=lines(verdicts, Outcome.noisy),
    )


def lines(verdicts: Sequence[Verdict], *outcomes: Outcome) -> tuple[str, ...]:
    return tuple(f"{v.reason} ({v.test})" for v in verdicts if v.outcome in outcomes)


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
    judging: Judging = Judging(),
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> TrainOutcome:
    """K training steps, ``repeat`` times; bitwise verdict across repeats and/or against a stored run.

    ``on_record`` sees rank 0's records as they are written (live progress), from a thread.
    """
    reference = _load_reference(db, against) if against else None
    validate("train", config, opts)
    with session(
        db, "bench.train", argv, opts, meta={"repeat": repeat, "launcher": opts.launcher}, judging=judging
    ) as run:
        results, vectors, setups = [], [], []
        for i in range(repeat):
            kept: list[np.ndarray | None] = []
            ex = run.launch(
                "train",
                config,
                opts,
                on_record,
                part=f"repeat{i}" if i else "",
                before_cleanup=partial(_keep_params, kept),
            )
            vectors.append(kept[0] if kept else None)
            result = train_result(ex.logs, ex.prepared.config, argv=tuple(ex.prepared.plan.commands[0].argv), repeat=i)
            if result is not None:
                results.append(result)
                setups.append(_setup(result, ex))
            if ex.error or ex.interrupted:
                break
        comparisons, verdicts = _reproducibility(results, vectors, setups, reference, env)
        for r in results:
            verdicts += _straggler_verdicts(r, f"torch.train repeat {r.params['repeat']}", "rank_step_p50_s")
        verdicts = run.judge(results, verdicts, judging)
        if vectors and vectors[0] is not None and vectors[0].nbytes <= MAX_PARAMS_ARTIFACT_BYTES:
            run.rec.artifact("train_params_npy_zlib_b64", _params_artifact(vectors[0]))
            run.rec.artifact("train_setup", json.dumps(setups[0]))
        status = run.finish(no_results="" if results else "no training step finished")
    return TrainOutcome(
        run_id=run.rec.run_id,
        status=status,
        signum=run.signum,
        error="; ".join(run.errors) or (interruption(run.interrupted) if run.interrupted else ""),
        shape={
            k: config[k]
            for k in ("hidden", "layers", "heads", "seq_len", "vocab", "batch", "spec_layout", "mode", "seed", "steps")
        },
        rows=tuple(TrainRow.from_result(r) for r in results),
        reproducibility=tuple(comparisons),
        failures=lines(verdicts, Outcome.failed, Outcome.not_planned),
        warnings=lines(verdicts, Outcome.noisy),
    )


def _keep_params(kept: list[np.ndarray | None], run_dir: Path) -> None:
    """The parameter vector rank 0 saved (None when the run did not get that far)."""
    path = run_dir / "params.npy"
    kept.append(np.load(path) if path.exists() else None)


def _reproducibility(
    results: Sequence[TestResult],
    vectors: Sequence[np.ndarray | None],
    setups: Sequence[dict[str, Any]],
    reference: dict[str, Any] | None,
    env: dict[str, str],
) -> tuple[list[Comparison], list[Verdict]]:
    """Bitwise comparisons: repeat 0 against each later repeat, and the stored reference against repeat 0."""
    pairs = [
        (f"repeat 0 vs repeat {i}", vectors[0], vectors[i], setups[0], setups[i])
        for i in range(1, len(results))
        if len(vectors) > i
    ]
    if reference is not None and results:
        pairs.append(
            (f"run {reference['run_id']} vs this run", reference["vector"], vectors[0], reference["setup"], setups[0])
        )
    comparisons, verdicts = [], []
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
    return comparisons, verdicts


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
    judging: Judging = Judging(),
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> CheckpointOutcome:
    """Write and read back a checkpoint; ``on_record`` sees rank 0's records as they are written."""
    validate("checkpoint", config, opts)
    with session(
        db,
        "bench.checkpoint",
        argv,
        opts,
        meta={"launcher": opts.launcher, "directory": config["directory"]},
        judging=judging,
    ) as run:
        results, verdicts, error = checkpoint_into(run, config, opts, judging=judging, on_record=on_record)
        status = run.finish(no_results="" if results else "no checkpoint format finished")
    return CheckpointOutcome(
        run_id=run.rec.run_id,
        status=status,
        signum=run.signum,
        error=error or (interruption(run.interrupted) if run.interrupted else ""),
        rows=tuple(CheckpointRow.from_result(r, COMMIT_PHASES) for r in results),
        failures=lines(verdicts, Outcome.failed, Outcome.not_planned),
    )


def checkpoint_into(
    run: Session,
    config: dict[str, Any],
    opts: probe_run.LaunchOptions,
    *,
    judging: Judging = Judging(),
    part: str = "",
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[TestResult], list[Verdict], str]:
    """One checkpoint launch inside ``run``: every finished format stored and judged (also when interrupted)."""
    directory = Path(config["directory"])
    directory.mkdir(parents=True, exist_ok=True)
    try:
        ex = run.launch("checkpoint", config, opts, on_record, part=part)
    finally:
        if not config.get("keep"):
            # Rank 0 removes each format's files once it is measured; a rank killed mid-write
            # (Ctrl-C, SIGTERM, a timeout) leaves the format it was writing: remove it here.
            for fmt in config["formats"]:
                shutil.rmtree(directory / fmt, ignore_errors=True)
    results = checkpoint_results(ex.logs, directory=config["directory"], argv=tuple(ex.prepared.plan.commands[0].argv))
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
    return results, run.judge(results, verdicts, judging), ex.error


def run_followed(
    kind: str, config: dict[str, Any], opts: probe_run.LaunchOptions, *, db: str | None, argv: Sequence[str]
) -> FollowedOutcome:
    """Apply the probe's job (a launcher that ``follows_job``: k8s) and follow it, recorded as one run
    like any probe.

    The job is one result (``k8s.<kind>``: ok when kubectl followed it to success); its job
    name is the run's ``job_id`` and the namespace its ``cluster``.
    """
    from gpufabric.bench import fingerprint
    from gpufabric.errors import ToolNotFound
    from gpufabric.exec import launch
    from gpufabric.results.store import Store

    if shutil.which("kubectl") is None:
        raise ToolNotFound("kubectl")
    fp = fingerprint.collect(run={"launcher": opts.launcher, "backend": opts.backend})
    meta = {"launcher": opts.launcher}
    with Store.open(db) as store, store.recording(f"bench.{kind}", argv, fp, meta=meta) as rec:
        prep = probe_run.prepare(kind, config, opts)
        job = re.search(r"name: (gpufabric-[a-z]+-[0-9a-f]+)", prep.plan.script)
        rec.describe(RunInfo(cluster=opts.k8s_namespace, job_id=job.group(1) if job else ""))
        rec.artifact("trainjob_manifest", prep.plan.script)
        started = time.time()
        try:
            outcome = launch.execute(prep.plan, timeout_s=opts.timeout_s, log_dir=prep.out_dir)
        finally:
            probe_run.cleanup(prep)
        code = outcome.returncodes[0]
        status = Status.ok if code == 0 else (Status.timeout if outcome.timed_out else Status.failed)
        rec.result(
            TestResult(
                name=f"k8s.{kind}",
                tool="kubectl",
                host=opts.k8s_namespace,
                status=status,
                reason="" if status is Status.ok else f"TrainJob follow exited {code}",
                argv=tuple(prep.plan.commands[0].argv),
                started_at=started,
                duration_s=outcome.duration_s,
                raw_output=outcome.logs[0],
            )
        )
        final = rec.finish()
    return FollowedOutcome(
        launcher=opts.launcher,
        run_id=rec.run_id,
        status=final,
        manifest=prep.plan.script,
        returncode=code,
        timed_out=outcome.timed_out,
        log=outcome.logs[0],
    )
