"""``bench --suite`` as an application service: a typed request in, a typed outcome out.

:class:`SuiteRequest` declares the suite's knobs once (field metadata, ``exec.knobs``; the
CLI derives its options from them). :meth:`SuiteRequest.prepare` checks them and loads what
the run is judged against (the spec, the plan's SLOs, ``--thresholds``, the planned
hardware); :meth:`SuitePrepared.dry_run` lists the tests without running anything and
:meth:`SuitePrepared.run` runs them in a scratch directory, recorded as one run
(``bench.suite.record_suite``). The outcomes own their JSON documents and exit codes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpufabric.errors import InputError
from gpufabric.exec.knobs import DB_HELP, DURATION_SYNTAX, duration_s, knob
from gpufabric.results.document import versioned as envelope

if TYPE_CHECKING:  # the suite's runners and the records: loaded when a suite runs, not when the CLI starts
    from gpufabric.bench.runners import PlannedTest
    from gpufabric.bench.suite import Progress, SuiteOutcome
    from gpufabric.results.records import RunRecord, Slo
    from gpufabric.spec.plan_file import SavedPlan

#: Largest --repeats (a typo such as 10**6 would plan a million tool runs).
MAX_REPEATS = 1000


def _is_host(text: str) -> bool:
    """A host name or an IP address: it becomes a tool argument, so never an option ('-...')."""
    import ipaddress
    import re

    from gpufabric.spec.types import HOSTNAME

    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return len(text) <= 253 and re.fullmatch(HOSTNAME, text) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteRequest:
    """``bench --suite quick|full``: the validation suite, judged against SLOs."""

    suite: str | None = knob(None, "--suite", "quick (about a minute here) or full.")
    plan: Path | None = knob(
        None,
        "--plan",
        "Plan JSON (gpufabric plan SPEC --format json): SLOs for its recommended design (add --spec for the"
        " checkpoint, dataset and busbw SLOs).",
    )
    spec: Path | None = knob(None, "--spec", "Spec YAML: shapes the storage profiles and derives SLOs.")
    thresholds: Path | None = knob(
        None, "--thresholds", "Thresholds YAML for this hardware type (target/tolerance, min, max per test metric)."
    )
    target_dir: Path | None = knob(
        None, "--target-dir", "Directory on the storage to test (default: a temp dir). Must be empty unless --force."
    )
    db: str | None = knob(None, "--db", DB_HELP)
    force: bool = knob(
        False,
        "--force",
        "Use a non-empty --target-dir (files still go into a new subdirectory, removed afterwards).",
    )
    repeats: int | None = knob(
        None, "--repeats", "Runs per test (default: 3 quick, 5 full); an SLO passes on a majority.", min=1
    )
    server: str | None = knob(
        None,
        "--server",
        "Remote host running iperf3 -s / sockperf server / perftest server; default: loopback servers started here.",
    )
    timeout: str | None = knob(
        None, "--timeout", f"Per-test timeout (default: the test's duration plus a grace): {DURATION_SYNTAX}."
    )

    def prepare(self, note: Callable[[str], None]) -> SuitePrepared:
        """Check the request and load its SLOs; ``note`` gets advice that is not an error."""
        from gpufabric.bench import scratch as scratch_mod
        from gpufabric.bench.suite import SUITES

        if self.suite is None:
            raise InputError("give --suite quick|full, or a subcommand (see gpufabric bench --help)")
        if self.suite not in SUITES:
            raise InputError(f"--suite {self.suite!r}: choose quick or full")
        if self.repeats is not None and self.repeats > MAX_REPEATS:
            raise InputError(f"--repeats must be between -inf and {MAX_REPEATS:,}, got {self.repeats:,}")
        timeout_s = duration_s("--timeout", self.timeout, low_s=0.1) if self.timeout is not None else None
        if self.force and self.target_dir is None:
            raise InputError("--force has no effect without --target-dir; drop it")
        if self.server is not None and not _is_host(self.server):
            raise InputError(f"--server {self.server[:80]!r} is not a host name or IP address")
        spec, plan_doc, slos = self._slos(note)
        if self.target_dir is not None:
            scratch_mod.check_target(self.target_dir, force=self.force)
        planned = None
        if plan_doc is not None:
            from gpufabric.bench.planned import planned_hardware

            planned = planned_hardware(plan_doc, spec, path=str(self.plan))
        return SuitePrepared(
            request=self, spec=spec, plan_doc=plan_doc, slos=tuple(slos), planned=planned, timeout_s=timeout_s
        )

    def _slos(self, note: Callable[[str], None]) -> tuple[Any, SavedPlan | None, list[Slo]]:
        from gpufabric.bench import slo
        from gpufabric.spec.plan_file import load_plan

        loaded = None
        if self.spec is not None:
            from gpufabric.spec import load_spec

            loaded = load_spec(self.spec).spec
        plan_doc = None
        slos: list[Slo] = []
        if self.plan is not None:
            plan_doc = load_plan(self.plan)
            if loaded is None:
                note(
                    f"note: --plan {self.plan} without --spec: checkpoint, dataset and busbw SLOs need the"
                    " spec's sizes; only fabric and storage SLOs apply"
                )
            slos += slo.from_plan(plan_doc, loaded, path=str(self.plan))
        elif loaded is not None and self.spec is not None:  # loaded comes from spec; the test narrows spec too
            slos += slo.from_spec(loaded, source=f"spec {self.spec.name}")
        if self.thresholds is not None:
            slos += slo.load_thresholds(self.thresholds)
        return loaded, plan_doc, slos


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteDryRun:
    """The tests a suite would run and the SLOs it would judge (``--dry-run``); exit 0."""

    tests: tuple[PlannedTest, ...]
    slos: tuple[Slo, ...]
    slo_lines: tuple[str, ...]
    exit_code: int = 0

    def document(self) -> dict[str, Any]:
        tests = [
            {
                "name": t.name,
                "repeat": t.repeat,
                "argv": list(t.argv),
                "timeout_s": t.timeout_s,
                "server_argv": list(t.server.argv) if t.server else None,
                "skip_reason": t.skip_reason,
            }
            for t in self.tests
        ]
        return envelope({"dry_run": True, "tests": tests, "slos": list(self.slos)})

    def lines(self) -> list[str]:
        """The text form: each test's commands under a comment line, then the SLOs."""
        lines = []
        for t in self.tests:
            skip = f"  [{t.skip_reason}]" if t.skip_reason else ""
            lines += [f"# {t.name} (repeat {t.repeat}, timeout {t.timeout_s:g} s){skip}", *t.command_lines()]
        n = len(self.tests)
        lines.append(
            f"# {n} tests; SLOs:" if self.slos else f"# {n} tests; no SLOs (give --plan/--spec or --thresholds)"
        )
        return lines + [f"#   {line}" for line in self.slo_lines]


@dataclass(frozen=True, slots=True, kw_only=True)
class SuitePrepared:
    """A checked suite request with what it is judged against."""

    request: SuiteRequest
    spec: Any  # spec.models.Spec or None
    plan_doc: SavedPlan | None
    slos: tuple[Slo, ...]
    planned: Any  # bench.planned.PlannedHardware or None
    timeout_s: float | None
    meta: dict[str, Any] = field(default_factory=dict)

    def _tests(self, scratch: Path, *, detect: bool = True) -> list[PlannedTest]:
        from gpufabric.bench.suite import plan_suite

        r = self.request
        assert r.suite is not None  # prepare checked it
        return plan_suite(
            r.suite,
            scratch=scratch,
            spec=self.spec,
            repeats=r.repeats,
            server_addr=r.server,
            timeout_s=self.timeout_s,
            detect=detect,
        )

    def dry_run(self) -> SuiteDryRun:
        from gpufabric.bench import scratch as scratch_mod
        from gpufabric.bench.slo import describe

        tests = self._tests(scratch_mod.plan_path(self.request.target_dir), detect=False)
        return SuiteDryRun(tests=tuple(tests), slos=self.slos, slo_lines=tuple(describe(self.slos)))

    def run(
        self,
        argv: list[str],
        *,
        start: Callable[[list[PlannedTest], tuple[str, ...]], Callable[[Progress], None] | None],
    ) -> SuiteOutcome:
        """Run the suite in a scratch directory (removed afterwards), recorded as one run.

        ``start(tests, not_planned)`` is called once the tests are planned (``not_planned``:
        why this node is not the planned hardware) and returns the progress callback.
        """
        from gpufabric.bench import scratch as scratch_mod
        from gpufabric.bench.fingerprint import collect as collect_fingerprint
        from gpufabric.bench.runners import LocalExecutor
        from gpufabric.bench.suite import record_suite

        r = self.request
        scratch = scratch_mod.prepare(r.target_dir, force=r.force)
        try:
            tests = self._tests(scratch.path)
            fingerprint = collect_fingerprint()
            not_planned: tuple[str, ...] = ()
            if self.planned is not None:
                from gpufabric.bench.planned import mismatches

                not_planned = mismatches(self.planned, fingerprint)
            progress = start(tests, not_planned)
            meta = {"suite": r.suite, "tests": len(tests), "server": r.server or "loopback", "slos": len(self.slos)}
            return record_suite(
                tests,
                db=r.db,
                argv=argv,
                fingerprint=fingerprint,
                spec_name=self.spec.name if self.spec is not None else "",
                plan=self.plan_doc.document if self.plan_doc is not None else None,
                meta=meta,
                executor=LocalExecutor(),
                slos=self.slos,
                progress=progress,
                not_planned=not_planned,
            )
        finally:
            scratch.cleanup()


def write_thresholds(run_ref: str, out: Path, *, hardware: str = "", db: str | None = None) -> RunRecord:
    """``bench thresholds``: write a thresholds file whose targets are a good run's medians; the run.

    ``hardware`` names what they are for (default: the run's host).
    """
    from gpufabric.bench.slo import thresholds_from_run
    from gpufabric.results.store import Store

    with Store.open(db) as store:
        run = store.get_run(run_ref)
    text = thresholds_from_run(run, hardware=hardware or str(run.fingerprint.get("host", "")))
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{out}: cannot write: {exc.strerror}") from exc
    return run
