"""Import tool outputs produced elsewhere as one run: read, parse and record (``gpufabric ingest``).

Every file is read and parsed before anything is written (one malformed file stores
nothing), with the suite's conversion (``parsers.to_result``), so an imported result gets
the verdict a measured one would. The run is recorded in one transaction through the
recorder, like every run. :func:`run` is the application service: an
:class:`IngestRequest` in, an :class:`IngestOutcome` out, which owns the versioned JSON
and the exit status; ``cli/ingest.py`` declares the options and renders the text.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from pathlib import Path
from typing import Any

from gpufabric.bench import parsers
from gpufabric.bench.parsers import TOOLS, detect_tool, to_result
from gpufabric.bench.runners import RAW_OUTPUT_LIMIT
from gpufabric.boundary import read_capped
from gpufabric.errors import InputError, ParseError
from gpufabric.jsonable import to_jsonable
from gpufabric.results.recorder import run_info
from gpufabric.results.records import MetricRows, RunStatus, TestResult, Verdict

#: Largest file ingest reads (docs/security.md). A 1,000-rank nccl-tests sweep is ~100 MB
#: (benchmarks/bench_ingest.py); 1 GiB leaves 10x room while /dev/zero or a disk image
#: passed by mistake ends in a one-line error instead of exhausting memory.
MAX_INGEST_BYTES = 1 << 30


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestRequest:
    """``gpufabric ingest``: the files, their tool, where to store them and what to judge them by."""

    files: tuple[Path, ...]
    tool: str  # one of parsers.TOOLS, or "auto" (detected per file)
    db: str | None = None  # the results store (None: the default store)
    host: str | None = None  # the host the results came from (None: from the file, else "unknown")
    thresholds: Path | None = None  # thresholds YAML to judge the results by
    plan: Path | None = None  # plan JSON (with spec): nccl-tests tables against the planned busbw
    spec: Path | None = None  # with plan: the spec (its GPU and reproducibility)
    dry_run: bool = False  # parse and judge, store nothing
    allow_duplicate: bool = False  # store a file even if the same content was ingested before
    argv: tuple[str, ...] = ()  # the command line, kept with the stored run


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestOutcome:
    """What was (or, with dry_run, would be) stored, and the run's status."""

    run_id: int | None
    status: RunStatus
    dry_run: bool
    results: tuple[TestResult, ...]
    verdicts: tuple[Verdict, ...]

    @property
    def exit_code(self) -> int:
        """0 passed, 1 when a result failed or an SLO did not pass (RunStatus.exit_code)."""
        return self.status.exit_code

    def to_json(self) -> str:
        """The versioned JSON document with one result per line.

        The same document as ``results.document.dumps`` (keys, order, envelope), but each
        result row goes through the json module's C encoder: indent=2 makes the module fall
        back to its pure-Python encoder, and a 100 MB nccl-tests log gives 10,617 results
        with 680,000 metrics (4 s of CPU that way; docs/performance.md).
        """
        from gpufabric.results import document

        head = json.dumps(
            to_jsonable(document.versioned({"run_id": self.run_id, "dry_run": self.dry_run, "status": self.status})),
            indent=2,
        )
        tail = json.dumps(to_jsonable({"verdicts": self.verdicts}), indent=2)
        parts = [head[:-2], ',\n  "results": [']
        if self.results:
            parts += ["\n    ", ",\n    ".join(map(_row_json, self.results)), "\n  "]
        parts += ["],\n", tail[2:], "\n"]
        return "".join(parts)  # one copy of the 21 MB of rows (a chain of + made four)


_NAME, _VALUE = attrgetter("name"), attrgetter("value")


def result_row(result: TestResult) -> dict[str, Any]:
    """A result's JSON entry (the keys and order of ``bench``'s rows, with host and file)."""
    metrics = result.metrics
    if type(metrics) is MetricRows:  # the parser's columns: no attribute look-up per metric
        names, values = metrics.columns[0], metrics.columns[1]
    else:
        names, values = list(map(_NAME, metrics)), list(map(_VALUE, metrics))
    return {
        "name": result.name,
        "host": result.host,
        "file": result.params.get("file"),
        "status": result.status.value,
        "reason": result.reason,
        "warnings": result.params.get("quality_warnings", ""),
        "metrics": dict(zip(names, values, strict=True)),
    }


#: What ``json.dumps(obj, allow_nan=False)`` encodes with (its defaults otherwise): one
#: encoder for the 10,617 rows of a 100 MB log instead of one built per call.
_STRICT_ENCODE = json.JSONEncoder(allow_nan=False).encode


def _row_json(result: TestResult) -> str:
    """One result row, compact, by the C encoder: rows hold only str, float and None, and a
    non-finite value (marked invalid) goes through to_jsonable (None), as document.dumps does."""
    row = result_row(result)
    try:
        return _STRICT_ENCODE(row)  # json.dumps(row, allow_nan=False), without a new encoder per row
    except ValueError:
        return json.dumps(to_jsonable(row))


def run(request: IngestRequest) -> IngestOutcome:
    """Read and parse every file, judge, and (unless dry_run) store the run in one transaction.

    Raises:
        InputError: a file that is not the tool's output, --plan without --spec, a duplicate.
    """
    from gpufabric.results.recorder import judge

    if (request.plan is None) != (request.spec is None):
        raise InputError("--plan and --spec go together (the plan names the fabric, the spec the GPU)")
    ingested = read_files(request.files, tool=request.tool, host=request.host, max_bytes=MAX_INGEST_BYTES)
    results = list(ingested.results)
    slos = []
    if request.thresholds is not None:
        from gpufabric.bench.slo import load_thresholds

        slos = load_thresholds(request.thresholds)
    verdicts = []
    if slos:  # imported only here: verdicts bring results.stats and numpy (~0.1 s of start-up)
        from gpufabric.results.verdicts import evaluate

        verdicts = evaluate(results, slos)
    if request.plan is not None and request.spec is not None:
        verdicts += _plan_verdicts(request.plan, request.spec, results)
    status = judge(results, verdicts)
    run_id = None
    if not request.dry_run:
        run_id, status = record(
            ingested,
            verdicts,
            db=request.db,
            argv=request.argv,
            tool=request.tool,
            allow_duplicate=request.allow_duplicate,
        )
    return IngestOutcome(
        run_id=run_id, status=status, dry_run=request.dry_run, results=ingested.results, verdicts=tuple(verdicts)
    )


def _plan_verdicts(plan: Path, spec: Path, results: list[TestResult]) -> list[Verdict]:
    from gpufabric.bench.planned import mark_not_planned
    from gpufabric.bench.slo import gpu_mismatch, ingest_slos
    from gpufabric.results.verdicts import evaluate
    from gpufabric.spec import load_spec
    from gpufabric.spec.plan_file import load_plan

    loaded = load_spec(spec).spec
    verdicts = evaluate(results, ingest_slos(load_plan(plan), loaded, results, path=str(plan)))
    return mark_not_planned(verdicts, gpu_mismatch(loaded, results))


@dataclass(frozen=True, slots=True, kw_only=True)
class Ingested:
    """The files' results, ready to store: one per parsed case, in file order."""

    files: tuple[Path, ...]
    results: tuple[TestResult, ...]
    digests: tuple[str, ...]  # SHA-256 of each file's text (duplicates are refused by it)
    tools: tuple[str, ...]  # the tool of each file (``--tool auto`` detects it)


def read_files(files: Sequence[Path], *, tool: str, host: str | None, max_bytes: int) -> Ingested:
    """Read and parse every file; InputError (exit 2) naming the first that is not ``tool``'s output."""
    if tool not in (*TOOLS, "auto"):
        raise InputError(f"--tool {tool!r}: choose one of {', '.join(TOOLS)} or auto")

    results: list[TestResult] = []
    digests: list[str] = []
    tools_seen: list[str] = []
    for path in files:
        try:
            raw_bytes = read_capped(path, max_bytes, "tool output")
            text = raw_bytes.decode("utf-8")
            # the bytes read are the text's UTF-8 (a strict decode round-trips): hashed as read,
            # not encoded again (a 100 MB copy), and let go before the parse
            digest = hashlib.sha256(raw_bytes).hexdigest()
            del raw_bytes
            mtime = path.stat().st_mtime
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not a text file (is it {tool} output?)") from None
        detected = detect_tool(text)
        file_tool = tool
        if tool == "auto":
            if not detected:
                raise InputError(f"{path}: cannot tell which tool wrote it; name it with --tool {'|'.join(TOOLS)}")
            file_tool = detected
        try:
            parsed_all = parsers.parser_for(file_tool)(text, source=str(path))  # a ParseError names the file
        except ParseError as exc:
            if detected and detected != file_tool:
                raise InputError(
                    f"{exc}; it looks like {detected} output: use --tool {detected} or --tool auto"
                ) from None
            raise
        digests.append(digest)
        tools_seen.append(file_tool)
        # The suite names nccl-tests results nccl.<op>; the other tools by their own name.
        prefix = "nccl" if file_tool == "nccl-tests" else file_tool
        raw = text[:RAW_OUTPUT_LIMIT]
        for index, parsed in enumerate(parsed_all):
            result = to_result(  # the suite's conversion: the same verdict on the same data
                parsed,
                name=f"{prefix}.{parsed.case}",
                host=host or parsed.info.get("host") or parsed.info.get("hosts") or "unknown",
                # A file's raw text is stored once, with its first result: a 100 MB log of 10,000
                # tables would otherwise store 10,000 copies of the same 200 kB.
                started_at=mtime,
                raw_output=raw if index == 0 else "",
                params={
                    "file": str(path),
                    **({"raw_output": "stored with the file's first result"} if index else {}),
                },
            )
            results.append(result if result.tool == file_tool else replace(result, tool=file_tool))
    return Ingested(files=tuple(files), results=tuple(results), digests=tuple(digests), tools=tuple(tools_seen))


def record(
    ingested: Ingested,
    verdicts: Sequence[Verdict],
    *,
    db: str | None,
    argv: Sequence[str],
    tool: str,
    allow_duplicate: bool = False,
) -> tuple[int, RunStatus]:
    """Store the run in one transaction (all or none); refuses files already ingested."""
    from gpufabric.results.store import Store

    with Store.open(db) as store:
        if not allow_duplicate:
            _refuse_duplicates(store, ingested.files, ingested.digests)
        with store.recording(
            "ingest",
            argv,
            {"source": "ingested", "files": [str(f) for f in ingested.files]},
            meta={
                "tool": tool if tool != "auto" else ",".join(sorted(set(ingested.tools))),
                "imported_at": time.time(),
                "sha256": list(ingested.digests),
            },
        ) as rec:
            rec.add_results(ingested.results)  # one transaction: all or none, and one fsync, not 10,617
            rec.add_verdicts(verdicts)
            rec.describe(run_info(hosts=(r.host for r in ingested.results), env={}))  # the files' hosts, not ours
    return rec.run_id, rec.status


def _refuse_duplicates(store: Any, files: Sequence[Path], digests: Sequence[str]) -> None:
    seen: dict[str, int] = {}
    for run in store.list_runs(limit=1_000_000):
        if run.kind == "ingest":
            for digest in run.meta.get("sha256") or ():
                seen.setdefault(digest, run.id)
    for path, digest in zip(files, digests, strict=True):
        if digest in seen:
            raise InputError(
                f"{path}: already ingested as run {seen[digest]} (same content); "
                "pass --allow-duplicate to store it again"
            )
    if len(set(digests)) < len(digests):
        dup = next(p for p, d in zip(files, digests, strict=True) if list(digests).count(d) > 1)
        raise InputError(f"{dup}: given twice (same content); pass --allow-duplicate to store both")
