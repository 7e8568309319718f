"""One way to record a run: ``with store.recording(kind, argv, fingerprint) as rec:``.

The suite, the probes and ingest all store runs through this. Results, verdicts and
artifacts are written the moment they arrive (each its own committed transaction, see
``store``), so Ctrl-C or kill -9 keeps everything that finished. Ingest, whose results
all exist before anything is stored, writes them with ``add_results`` in one transaction
(all or none). The run ends with a ``RunStatus``, and the exit code follows from it
(``RunStatus.exit_code``):

* the block ends normally: the status given to ``rec.finish``, else the one its results
  and verdicts imply (``judge``);
* KeyboardInterrupt (Ctrl-C, and SIGTERM as ``errors.Terminated``): ``interrupted``
  (finished results kept), then re-raised;
* any other exception: ``error``, then re-raised.

One status everywhere: a run that ends ``error`` or ``interrupted`` without a failing
verdict gets one saying why (test = the run's kind, metric ``run``), so every renderer
that counts verdicts (JUnit failures, HTML, Markdown, ``runs``) fails it as the exit code
does, and no CI gate reads a broken run as green. Where it ran (``RunInfo``: hosts,
cluster, job id) is given with ``rec.describe`` and stored when the run finishes, with
its ``duration_s``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from gpufabric.errors import Terminated
from gpufabric.results.records import Direction, Outcome, RunInfo, RunStatus, Status, TestResult, Verdict


class RunSink(Protocol):
    """The write side of ``results.store.Store`` (tests give an in-memory one)."""

    def begin_run(
        self,
        *,
        kind: str,
        argv: Sequence[str],
        fingerprint: Mapping[str, Any],
        spec_name: str = "",
        plan: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        started_at: float | None = None,
    ) -> int: ...
    def add_result(self, run_id: int, result: TestResult) -> int: ...
    def add_results(self, run_id: int, results: Iterable[TestResult]) -> list[int]: ...
    def add_verdicts(self, run_id: int, verdicts: Sequence[Verdict]) -> None: ...
    def add_artifact(self, run_id: int, name: str, content: str) -> None: ...
    def update_fingerprint(self, run_id: int, fingerprint: Mapping[str, Any]) -> None: ...
    def finish_run(self, run_id: int, status: RunStatus, info: RunInfo | None = None) -> None: ...


def judge(results: Sequence[TestResult], verdicts: Sequence[Verdict]) -> RunStatus:
    """failed when an SLO failed, the hardware is not the planned one, or a tool failed or hung;
    skipped tests and noisy verdicts do not fail a run."""
    if any(v.outcome in (Outcome.failed, Outcome.not_planned) for v in verdicts):
        return RunStatus.failed
    if any(r.status in (Status.failed, Status.timeout) for r in results):
        return RunStatus.failed
    return RunStatus.passed


class Recorder:
    """A run being recorded; ``run_id`` is its id in the store from the start."""

    def __init__(self, store: RunSink, run_id: int, kind: str = "run") -> None:
        self._store = store
        self.run_id = run_id
        self.kind = kind
        self.results: list[TestResult] = []
        self.verdicts: list[Verdict] = []
        self.status: RunStatus = RunStatus.running
        self.info: RunInfo | None = None

    def result(self, result: TestResult) -> None:
        """Store one result now (committed before this returns)."""
        self._store.add_result(self.run_id, result)
        self.results.append(result)

    def add_results(self, results: Sequence[TestResult]) -> None:
        """Store ``results`` now, in one committed transaction (all or none)."""
        if results:
            self._store.add_results(self.run_id, results)
            self.results.extend(results)

    def add_verdicts(self, verdicts: Sequence[Verdict]) -> None:
        if verdicts:
            self._store.add_verdicts(self.run_id, list(verdicts))
            self.verdicts.extend(verdicts)

    def artifact(self, name: str, content: str) -> None:
        self._store.add_artifact(self.run_id, name, content)

    def describe(self, info: RunInfo) -> None:
        """Where the run ran (hosts, cluster, job id); stored when it finishes."""
        self.info = info

    def update_fingerprint(self, fingerprint: Mapping[str, Any]) -> None:
        """Replace the run's fingerprint (a probe adds its rank map once the ranks have run)."""
        self._store.update_fingerprint(self.run_id, fingerprint)

    def finish(self, status: RunStatus | None = None, *, reason: str = "") -> RunStatus:
        """End the run with ``status`` (default: ``judge`` of what was recorded); once only.

        ``reason``: why a run ends ``error`` or ``interrupted`` (module docstring: the
        verdict that carries it when no verdict failed already).
        """
        if self.status is not RunStatus.running:
            raise RuntimeError(f"run {self.run_id} already finished as {self.status}")
        final = judge(self.results, self.verdicts) if status is None else RunStatus(status)
        if final in (RunStatus.error, RunStatus.interrupted, RunStatus.failed) and not _fails(
            self.verdicts, self.results if final is RunStatus.failed else ()
        ):
            self.add_verdicts([_run_verdict(self.kind, final, reason, self.results)])
        self._store.finish_run(self.run_id, final, self.info)
        self.status = final
        return final


def _fails(verdicts: Sequence[Verdict], results: Sequence[TestResult] = ()) -> bool:
    """Whether a verdict (or a failed or hung tool, which JUnit reports as an error) fails the run."""
    return any(v.outcome in (Outcome.failed, Outcome.not_planned) for v in verdicts) or any(
        r.status in (Status.failed, Status.timeout) for r in results
    )


def _run_verdict(kind: str, status: RunStatus, reason: str, results: Sequence[TestResult]) -> Verdict:
    """The failing verdict of a run that failed, broke or was interrupted with none of its own."""
    bad = [r for r in results if r.status in (Status.failed, Status.timeout)]
    if not reason:
        if bad:
            reason = "; ".join(f"{r.name} {r.status.value}: {r.reason}".rstrip(": ") for r in bad[:3])
        else:
            reason = f"run {status.value}"
    if status is RunStatus.interrupted:
        reason = f"{reason}; {len(results)} finished result(s) kept"
    return Verdict(
        test=kind,
        metric="run",
        host="",
        outcome=Outcome.failed,
        measured=None,
        expected=None,
        direction=Direction.higher,
        margin=None,
        reason=reason[:500],
        source="recorder",
    )


def run_info(
    *,
    hosts: Iterable[str] = (),
    job_ids: Sequence[str] = (),
    cluster: str = "",
    env: Mapping[str, str] | None = None,
) -> RunInfo:
    """Where a run ran: its hosts (each once, in order), and the Slurm job and cluster it ran
    under (``SLURM_JOB_ID``, ``SLURM_CLUSTER_NAME`` of an allocation, or ``job_ids`` a launcher
    printed); ``cluster`` (the spec's name) when no scheduler names one."""
    import os

    env = os.environ if env is None else env
    job_id = ",".join(job_ids) or env.get("SLURM_JOB_ID", "")
    slurm_cluster = env.get("SLURM_CLUSTER_NAME", "") if job_id else ""
    seen = dict.fromkeys(h for h in hosts if h and h not in ("?", "unknown"))
    return RunInfo(cluster=slurm_cluster or cluster, hosts=tuple(seen), job_id=job_id)


def interruption(exc: BaseException) -> str:
    """What interrupted a run, for its verdict."""
    return "interrupted by SIGTERM" if isinstance(exc, Terminated) else "interrupted by Ctrl-C (SIGINT)"


@contextmanager
def recording(
    store: RunSink,
    kind: str,
    argv: Sequence[str],
    fingerprint: Mapping[str, Any],
    *,
    spec_name: str = "",
    plan: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    started_at: float | None = None,
) -> Iterator[Recorder]:
    """Begin a run, yield its recorder, and finish it however the block ends (module docstring)."""
    run_id = store.begin_run(
        kind=kind, argv=argv, fingerprint=fingerprint, spec_name=spec_name, plan=plan, meta=meta, started_at=started_at
    )
    rec = Recorder(store, run_id, kind)
    try:
        yield rec
    except KeyboardInterrupt as exc:
        if rec.status is RunStatus.running:
            rec.finish(RunStatus.interrupted, reason=interruption(exc))
        raise
    except BaseException as exc:
        if rec.status is RunStatus.running:
            rec.finish(RunStatus.error, reason=f"{type(exc).__name__}: {exc}")
        raise
    if rec.status is RunStatus.running:
        rec.finish()
