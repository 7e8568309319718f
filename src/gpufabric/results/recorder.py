"""One way to record a run: ``with store.recording(kind, argv, fingerprint) as rec:``.

The suite, the probes and ingest all store runs through this. Results, verdicts and
artifacts are written the moment they arrive (each its own committed transaction, see
``store``), so Ctrl-C or kill -9 keeps everything that finished. Ingest, whose results
all exist before anything is stored, writes them with ``add_results`` in one transaction
(all or none). The run ends with a ``RunStatus``, and the exit code follows from it
(``RunStatus.exit_code``):

* the block ends normally: the status given to ``rec.finish``, else the one its results
  and verdicts imply (``judge``);
* KeyboardInterrupt: ``interrupted`` (finished results kept), then re-raised;
* any other exception: ``error``, then re-raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from gpufabric.results.records import Outcome, RunStatus, Status, TestResult, Verdict


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
    def finish_run(self, run_id: int, status: RunStatus) -> None: ...


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

    def __init__(self, store: RunSink, run_id: int) -> None:
        self._store = store
        self.run_id = run_id
        self.results: list[TestResult] = []
        self.verdicts: list[Verdict] = []
        self.status: RunStatus = RunStatus.running

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

    def finish(self, status: RunStatus | None = None) -> RunStatus:
        """End the run with ``status`` (default: ``judge`` of what was recorded); once only."""
        if self.status is not RunStatus.running:
            raise RuntimeError(f"run {self.run_id} already finished as {self.status}")
        final = judge(self.results, self.verdicts) if status is None else RunStatus(status)
        self._store.finish_run(self.run_id, final)
        self.status = final
        return final


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
    rec = Recorder(store, run_id)
    try:
        yield rec
    except KeyboardInterrupt:
        if rec.status is RunStatus.running:
            rec.finish(RunStatus.interrupted)
        raise
    except BaseException:
        if rec.status is RunStatus.running:
            rec.finish(RunStatus.error)
        raise
    if rec.status is RunStatus.running:
        rec.finish()
