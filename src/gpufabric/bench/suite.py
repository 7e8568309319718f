"""Suites: plan the tests of ``quick`` or ``full``, run them through an executor, store
each result as it arrives, judge them against SLOs.

Durability: every result is written to the store (its own committed transaction) the
moment its test ends, so Ctrl-C or kill -9 keeps everything that finished. Ctrl-C ends
the current tool (process.run kills its group), marks the run ``interrupted`` and judges
what finished; kill -9 leaves the run ``running``, which ``gpufabric runs`` shows as
interrupted. A Ctrl-C whose KeyboardInterrupt Python swallows (it reports "Exception
ignored" when the signal lands in an at-fork hook such as logging's while a tool is
being spawned) still stops the suite, after the current test.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from gpufabric.bench import profiles as profiles_mod
from gpufabric.bench.documents import result_row
from gpufabric.bench.runners import Executor, PlannedTest
from gpufabric.bench.runners import fio as fio_runner
from gpufabric.bench.runners import iperf3 as iperf3_runner
from gpufabric.bench.runners import nccl_tests as nccl_runner
from gpufabric.bench.runners import perftest as perftest_runner
from gpufabric.bench.runners import sockperf as sockperf_runner
from gpufabric.errors import Terminated, raise_terminated
from gpufabric.results.document import versioned as envelope
from gpufabric.results.recorder import Recorder, judge, run_info
from gpufabric.results.records import RunStatus, Slo, TestResult, Verdict

SUITES = tuple(profiles_mod.SUITES)

#: Seconds a tool may run beyond its nominal duration (startup, warm-up, teardown):
#: sockperf adds ~2.3 s of warm-up and setup to ``-t`` (this-machine.md item 3).
GRACE_S = 15.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """One progress event: a test starts (``result`` None) or ends."""

    index: int  # 0-based position of the test
    total: int
    test: PlannedTest
    result: TestResult | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteOutcome:
    run_id: int
    results: tuple[TestResult, ...]
    verdicts: tuple[Verdict, ...]
    status: RunStatus  # passed | failed | interrupted
    wall_s: float  # whole suite, orchestration included
    tool_s: float  # time inside tool processes (servers included)
    signum: int = 0  # the signal that interrupted the run (SIGINT 2, SIGTERM 15), else 0

    @property
    def exit_code(self) -> int:
        """The status's exit code; an interrupted run exits 128 + the signal (130, 143)."""
        return 128 + self.signum if self.status is RunStatus.interrupted and self.signum else self.status.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "wall_s": self.wall_s,
            "tool_s": self.tool_s,
            "results": [result_row(r, repeat=r.params.get("repeat"), duration_s=r.duration_s) for r in self.results],
            "verdicts": self.verdicts,
        }

    def document(self) -> dict[str, Any]:
        """The ``--format json`` document: the versioned envelope around :meth:`to_dict`."""
        return envelope(self.to_dict())


def plan_suite(
    suite: str,
    *,
    scratch: Path,
    spec: Any = None,
    repeats: int | None = None,
    server_addr: str | None = None,
    timeout_s: float | None = None,
    detect: bool = True,
) -> list[PlannedTest]:
    """Every test the suite will run, in order (fio profiles in write-restore-read-commit order per repeat).

    Args:
        suite: 'quick' or 'full'.
        scratch: directory every tool writes into (and runs in).
        spec: a validated Spec to shape the storage profiles, or None for defaults.
        repeats: runs per test (default per suite); SLOs pass on k of n.
        server_addr: remote iperf3/sockperf/perftest server; None runs servers on loopback.
        timeout_s: per-test timeout override (default: the profile's duration + grace).
        detect: probe for RDMA devices with ibv_devices; False (--dry-run, which runs
            nothing) plans perftest for a placeholder device.
    """
    prof = profiles_mod.build(suite, spec)
    n = repeats or prof.repeats
    fio_timeout = timeout_s or (60.0 if suite == "quick" else 300.0)
    tests: list[PlannedTest] = []
    for repeat in range(1, n + 1):
        for fp in prof.fio:
            tests.append(fio_runner.plan(fp, scratch=scratch, timeout_s=fio_timeout, repeat=repeat))
    for ip in prof.iperf3:
        for repeat in range(1, n + 1):
            tests.append(
                iperf3_runner.plan(
                    ip,
                    scratch=scratch,
                    timeout_s=timeout_s or ip.duration_s + GRACE_S,
                    server_addr=server_addr,
                    repeat=repeat,
                )
            )
    for sp in prof.sockperf:
        for repeat in range(1, n + 1):
            tests.append(
                sockperf_runner.plan(
                    sp,
                    scratch=scratch,
                    timeout_s=timeout_s or sp.duration_s + GRACE_S,
                    server_addr=server_addr,
                    repeat=repeat,
                )
            )
    devices, no_device = perftest_runner.rdma_devices() if detect else (["<rdma-device>"], "")
    for binary in prof.perftest:
        tests += _repeated(
            partial(
                perftest_runner.plan,
                binary,
                scratch=scratch,
                timeout_s=timeout_s or 60.0,
                devices=devices,
                no_device_reason=no_device,
                server_addr=server_addr,
            ),
            n,
        )
    max_bytes = "128M" if suite == "quick" else "1G"
    for binary in prof.nccl:
        tests += _repeated(
            partial(nccl_runner.plan, binary, scratch=scratch, timeout_s=timeout_s or 600.0, max_bytes=max_bytes), n
        )
    return tests


def _repeated(plan: Callable[..., PlannedTest], repeats: int) -> list[PlannedTest]:
    """``plan(repeat=r)`` for each repeat; a test known to be skipped is listed once."""
    first = plan(repeat=1)
    return [first] if first.skip_reason else [first] + [plan(repeat=r) for r in range(2, repeats + 1)]


#: The status rules of a run live with the recorder; re-exported under the suite's old name.
run_status = judge


def record_suite(
    tests: Sequence[PlannedTest],
    *,
    db: str | Path | None,
    argv: Sequence[str],
    fingerprint: dict[str, Any],
    executor: Executor,
    spec_name: str = "",
    plan: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    slos: Sequence[Slo] = (),
    progress: Callable[[Progress], None] | None = None,
    not_planned: tuple[str, ...] = (),
) -> SuiteOutcome:
    """Open the run in the store at ``db`` (one run for the whole suite), then :func:`run_suite`."""
    from gpufabric.results.store import Store

    with (
        Store.open(db) as store,
        store.recording("bench", argv, fingerprint, spec_name=spec_name, plan=plan, meta=meta) as rec,
    ):
        rec.artifact("commands", "\n".join(line for t in tests for line in t.command_lines()) + "\n")
        return run_suite(
            tests,
            executor=executor,
            recorder=rec,
            slos=slos,
            progress=progress,
            not_planned=not_planned,
            cluster=spec_name,
        )


def run_suite(
    tests: Sequence[PlannedTest],
    *,
    executor: Executor,
    recorder: Recorder,
    slos: Sequence[Slo] = (),
    progress: Callable[[Progress], None] | None = None,
    not_planned: tuple[str, ...] = (),
    cluster: str = "",
) -> SuiteOutcome:
    """Run ``tests`` in order, recording each result as it arrives, then judge and finish the run.

    ``not_planned``: why this node is not the hardware the SLOs were derived for
    (``bench.planned.mismatches``); every verdict then says so instead of passing.
    """
    from gpufabric.results.verdicts import evaluate

    start = time.monotonic()
    results: list[TestResult] = []
    interrupted = _Signals()
    try:
        with _remember_signals(interrupted):
            for index, test in enumerate(tests):
                if progress:
                    progress(Progress(index=index, total=len(tests), test=test))
                result = executor(test)
                recorder.result(result)
                results.append(result)
                if progress:
                    progress(Progress(index=index, total=len(tests), test=test, result=result))
                if interrupted.is_set():  # the KeyboardInterrupt was swallowed
                    break
    except KeyboardInterrupt as exc:
        interrupted.set(signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
    verdicts = evaluate(results, slos) if slos else []
    if not_planned:
        from gpufabric.bench.planned import mark_not_planned

        verdicts = mark_not_planned(verdicts, not_planned)
    recorder.add_verdicts(verdicts)
    recorder.describe(run_info(hosts=(r.host for r in results), cluster=cluster))
    why = ""
    if interrupted.is_set():
        why = "interrupted by SIGTERM" if interrupted.signum == signal.SIGTERM else "interrupted by Ctrl-C (SIGINT)"
    status = recorder.finish(RunStatus.interrupted if interrupted.is_set() else None, reason=why)
    return SuiteOutcome(
        run_id=recorder.run_id,
        results=tuple(results),
        verdicts=tuple(verdicts),
        status=status,
        wall_s=time.monotonic() - start,
        tool_s=sum(r.duration_s for r in results),
        signum=interrupted.signum,
    )


class _Signals:
    """The first interrupting signal seen (0: none); set from a handler or an except clause."""

    def __init__(self) -> None:
        self.signum = 0
        self._lock = threading.Lock()

    def set(self, signum: int) -> None:
        with self._lock:
            self.signum = self.signum or int(signum)

    def is_set(self) -> bool:
        return self.signum != 0


@contextmanager
def _remember_signals(interrupted: _Signals) -> Iterator[None]:
    """Record every SIGINT and SIGTERM in ``interrupted`` before the handler raises as usual.

    Python swallows a KeyboardInterrupt (or ``Terminated``) raised inside an at-fork hook;
    the record still stops the suite after the current test. Only the handlers that raise are
    wrapped (``signal.default_int_handler``, ``errors.raise_terminated``): an ignored signal or
    one an embedding program handles is left alone, as is everything outside the main thread
    (only it may set handlers).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    for signum in (int(signal.SIGINT), int(signal.SIGTERM)):
        handler = signal.getsignal(signum)
        if handler is not (signal.default_int_handler if signum == signal.SIGINT else raise_terminated):
            continue

        def remember(num: int, frame: Any, _inner: Any = handler) -> None:
            interrupted.set(num)
            _inner(num, frame)

        previous[signum] = signal.signal(signum, remember)
    try:
        yield
    finally:
        for num, saved in previous.items():
            signal.signal(num, saved)
