"""``gpufabric runs`` as an application service: the run history, newest first.

The outcome owns the versioned JSON and the text lines; ``cli/runs.py`` declares the options.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufabric.errors import InputError
from gpufabric.results import document
from gpufabric.results.records import RunRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class RunsRequest:
    db: str | None = None  # the results store
    limit: int = 50  # at most this many runs, newest first


@dataclass(frozen=True, slots=True, kw_only=True)
class RunsOutcome:
    path: Path | str  # the store, as it names itself
    records: tuple[RunRecord, ...]
    exit_code: int = 0

    def payload(self) -> dict[str, Any]:
        from gpufabric.report.common import run_context, run_seconds

        return {
            "db": str(self.path),
            "runs": [
                {
                    "id": r.id,
                    "kind": r.kind,
                    "status": r.status,
                    "started_at": r.started_at,
                    "finished_at": r.finished_at,
                    "argv": list(r.argv),
                    "spec_name": r.spec_name,
                    "host": r.fingerprint.get("host"),
                    "gpufabric_version": r.gpufabric_version,
                    "result_count": r.result_count,
                    "verdict_counts": r.verdict_counts,
                    "duration_s": run_seconds(r),
                    **{label.replace(" ", "_"): text for label, text in run_context(r)},
                }
                for r in self.records
            ],
        }

    def to_json(self) -> str:
        """The versioned JSON document (``schema_version`` first)."""
        return document.dumps(self.payload())

    def text_lines(self) -> list[str]:
        """A header and one line per run; names from the store made printable."""
        from gpufabric.report.common import printable, run_context, run_seconds, seconds

        if not self.records:
            return [f"no runs in {self.path}"]
        lines = [
            f"{'id':>5}  {'started (UTC)':16}  {'kind':8} {'status':11} {'took':>8} {'tests':>5}  {'verdicts':28} "
            "spec / command [cluster, job]"
        ]
        for r in self.records:
            verdicts = " ".join(f"{n} {k}" for k, n in sorted(r.verdict_counts.items())) or "-"
            what = r.spec_name or " ".join(r.argv)[:60]
            where = ", ".join(f"{label} {text}"[:60] for label, text in run_context(r) if label != "hosts")
            line = (
                f"{r.id:>5}  {_when(r.started_at):16}  {r.kind:8} {r.status:11} {seconds(run_seconds(r)):>8} "
                f"{r.result_count:>5}  {verdicts:28} {what}" + (f" [{where}]" if where else "")
            )
            lines.append(printable(line))
        return lines


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M") if ts else "-"


def run(request: RunsRequest) -> RunsOutcome:
    """The stored runs, newest first. InputError for a limit below 1."""
    from gpufabric.results.store import Store

    if request.limit < 1:
        raise InputError(f"--limit must be >= 1, got {request.limit}")
    with Store.open(request.db, create=False) as store:
        return RunsOutcome(path=store.path, records=tuple(store.list_runs(limit=request.limit)))
