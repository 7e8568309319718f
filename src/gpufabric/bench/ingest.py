"""Import tool outputs produced elsewhere as one run: read, parse and record (``gpufabric ingest``).

Every file is read and parsed before anything is written (one malformed file stores
nothing), with the suite's conversion (``parsers.to_result``), so an imported result gets
the verdict a measured one would. The run is recorded in one transaction through the
recorder, like every run; ``cli/ingest.py`` only renders.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpufabric.bench import parsers
from gpufabric.bench.parsers import TOOLS, detect_tool, to_result
from gpufabric.bench.runners import RAW_OUTPUT_LIMIT
from gpufabric.boundary import read_capped
from gpufabric.errors import InputError, ParseError
from gpufabric.results.recorder import run_info
from gpufabric.results.records import RunStatus, TestResult, Verdict


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
            text = read_capped(path, max_bytes, "tool output").decode("utf-8")
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
        digests.append(hashlib.sha256(text.encode()).hexdigest())
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
