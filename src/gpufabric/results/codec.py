"""Records <-> JSON-able dicts: the run export (``gpufabric report --format json``), baseline files.

The run export is ``export_to_dict``'s document, ``{"schema_version", "gpufabric_version",
"run": run_to_dict(run)}``; ``export_from_dict`` reads it back, so a saved report works as
a ``compare`` baseline. This module is the only one that writes or reads that format.

Versions (``schema_version``):
    0, 1  per-rank data of probe results as JSON texts inside ``results[].params``
          (``rank_hosts``, ``rank_time_p50_us``, ``stragglers``, ...); 0 is a document
          without the key.
    2     per-rank data as a typed ``results[].ranks`` object (``RankStats``).
Older versions read as the current one; a newer one is refused (exit 2).
"""

from __future__ import annotations

from typing import Any

from gpufabric import __version__
from gpufabric.errors import InputError
from gpufabric.jsonable import schema_version, to_jsonable
from gpufabric.results import ranks
from gpufabric.results.records import Direction, Metric, Outcome, RunRecord, RunStatus, Status, TestResult, Verdict

#: The run-export version ``export_to_dict`` writes.
RUN_EXPORT_VERSION = 2


def export_to_dict(run: RunRecord) -> dict[str, Any]:
    """The run export: the run with results, samples, verdicts and fingerprint, versioned."""
    return {"schema_version": RUN_EXPORT_VERSION, "gpufabric_version": __version__, "run": run_to_dict(run)}


def export_from_dict(data: Any, *, source: str = "run JSON") -> RunRecord:
    """The run of an export of any version up to RUN_EXPORT_VERSION; InputError naming ``source`` otherwise."""
    if not isinstance(data, dict) or not isinstance(data.get("run"), dict):
        raise InputError(f"{source}: not a gpufabric JSON report (no 'run' object)")
    schema_version(data, current=RUN_EXPORT_VERSION, what="run export", source=source)
    # v0/v1 differ from v2 only in where per-rank data sits; run_from_dict reads both.
    return run_from_dict(data["run"], source=source)


def run_to_dict(run: RunRecord, *, samples: bool = True, raw_output: bool = True) -> dict[str, Any]:
    """A run as a JSON-able dict; ``samples``/``raw_output`` False keep it small."""
    data = to_jsonable(run)
    for result in data["results"]:
        if not raw_output:
            result["raw_output"] = ""
        if not samples:
            for metric in result["metrics"]:
                metric["samples"] = []
    return data


def _f(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _ranks_and_params(result: dict[str, Any]) -> dict[str, Any]:
    """Typed per-rank data from ``ranks``, or (exports written before it existed) from ``params``."""
    params = dict(result.get("params") or {})
    if result.get("ranks") is not None:
        return {"ranks": ranks.from_dict(result["ranks"]), "params": params}
    per_rank, rest = ranks.from_params(params)
    return {"ranks": per_rank, "params": rest}


def run_from_dict(data: dict[str, Any], *, source: str = "") -> RunRecord:
    """The inverse of ``run_to_dict``. Raises InputError naming ``source`` on a wrong shape."""
    try:
        results = tuple(
            TestResult(
                name=r["name"],
                tool=r["tool"],
                host=r["host"],
                status=Status(r["status"]),
                reason=r.get("reason", ""),
                argv=tuple(r.get("argv", ())),
                started_at=r.get("started_at", 0.0),
                duration_s=r.get("duration_s", 0.0),
                raw_output=r.get("raw_output", ""),
                **_ranks_and_params(r),
                metrics=tuple(
                    Metric(
                        name=m["name"],
                        value=_f(m["value"]),
                        unit=m["unit"],
                        direction=Direction(m["direction"]),
                        samples=tuple(_f(x) for x in m.get("samples", ())),
                    )
                    for m in r.get("metrics", ())
                ),
            )
            for r in data.get("results", ())
        )
        verdicts = tuple(
            Verdict(
                test=v["test"],
                metric=v["metric"],
                host=v["host"],
                outcome=Outcome(v["outcome"]),
                measured=v.get("measured"),
                expected=v.get("expected"),
                direction=Direction(v["direction"]),
                margin=v.get("margin"),
                reason=v.get("reason", ""),
                warnings=tuple(v.get("warnings", ())),
                unit=v.get("unit", ""),
                passed_repeats=v.get("passed_repeats", 0),
                total_repeats=v.get("total_repeats", 0),
                source=v.get("source", ""),
            )
            for v in data.get("verdicts", ())
        )
        return RunRecord(
            id=int(data["id"]),
            kind=data["kind"],
            status=RunStatus(data["status"]),
            started_at=data["started_at"],
            finished_at=data.get("finished_at"),
            argv=tuple(data.get("argv", ())),
            fingerprint=dict(data.get("fingerprint") or {}),
            spec_name=data.get("spec_name", ""),
            plan=data.get("plan"),
            meta=dict(data.get("meta") or {}),
            gpufabric_version=data.get("gpufabric_version", ""),
            results=results,
            verdicts=verdicts,
            artifacts=dict(data.get("artifacts") or {}),
            result_count=len(results),
            verdict_counts=dict(data.get("verdict_counts") or {}),
            duration_s=data.get("duration_s"),
            cluster=str(data.get("cluster") or ""),
            hosts=tuple(str(h) for h in data.get("hosts") or ()),
            job_id=str(data.get("job_id") or ""),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{source or 'run JSON'}: not a gpufabric run report ({type(exc).__name__}: {exc})") from exc
