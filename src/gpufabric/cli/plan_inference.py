"""``gpufabric plan SPEC`` on a ``workload.kind: inference`` spec: serving designs."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from gpufabric.cli.output import ReportFormat, print_json


def is_inference(spec_file: Path) -> bool:
    """Whether the spec's ``workload.kind`` is inference (errors are located SpecErrors)."""
    from gpufabric.spec.inference import read_located, workload_kind

    return workload_kind(read_located(spec_file)) == "inference"


def plan_inference(spec_file: Path, fmt: ReportFormat, top: int | None, catalog_files: list[Path]) -> int:
    """Plan, print; exit 1 when no design meets the SLOs on the cluster."""
    from gpufabric.catalog import load_catalog
    from gpufabric.plan.inference import make_serving_plan
    from gpufabric.sim.serving import simulate_serving
    from gpufabric.spec.inference import load_inference_spec, read_located

    catalog = load_catalog(catalog_files)
    known = catalog.known_ids()
    spec = load_inference_spec(read_located(spec_file), known_ids=known)
    result = make_serving_plan(spec, catalog, simulate=simulate_serving)
    shown = result.candidates[:top] if top else result.candidates
    if fmt == ReportFormat.json:
        print_json(
            {
                "name": result.name,
                "kind": "inference",
                "rate_rps": result.rate_rps,
                "concurrency": result.concurrency,
                "candidates": [asdict(c) for c in shown],
                "search": [asdict(r) for r in result.search],
                "recommended": result.recommended,
                "rationale": result.rationale,
                "catalog": list(catalog.files),
            }
        )
    elif fmt == ReportFormat.markdown:
        typer.echo("\n".join(_markdown(result, shown)))
    else:
        typer.echo("\n".join(_text(result, shown if top else shown[:12])))
    return 0 if result.recommended else 1


HEADERS = (
    "",
    "mode",
    "fabric",
    "storage",
    "layout",
    "P+D",
    "GPUs",
    "TTFT p99",
    "TPOT p99",
    "ITL p99",
    "KV p99",
    "cold",
    "$/M tok",
    "meets",
)
SEARCH_HEADERS = ("mode", "layout", "P+D", "GPUs", "$/M tok", "TTFT p99", "TPOT p99", "status", "why")


def _row(c: Any, rec: str | None) -> list[str]:
    return [
        "*" if c.id == rec else "",
        "disagg" if c.mode == "disaggregated" else "coloc",
        c.fabric,
        c.storage,
        f"tp{c.tp} pp{c.pp} b{c.max_batch} t{c.token_budget}",
        f"{c.prefill_replicas}+{c.decode_replicas}",
        str(c.gpus),
        f"{c.ttft_p99_s:.3g}s",
        f"{c.tpot_p99_s * 1e3:.3g}ms",
        f"{c.itl_p99_s * 1e3:.3g}ms",
        f"{c.kv_transfer_p99_s * 1e3:.3g}ms",
        f"{c.cold_start_s:.3g}s",
        f"{c.usd_per_million_output_tokens:.3g}",
        "yes" if c.meets_slo else ";".join(v.split(" ", 1)[0] for v in c.violations),
    ]


def _load(result: Any) -> str:
    if result.rate_rps is not None:
        return f"{result.rate_rps:g} requests/s"
    return f"{result.concurrency} concurrent clients"


def _search_row(r: Any) -> list[str]:
    sized = r.gpus and r.status in ("winner", "meets")
    return [
        "disagg" if r.mode == "disaggregated" else "coloc",
        r.layout,
        f"{r.prefill_replicas}+{r.decode_replicas}" if sized else "-",
        str(r.gpus) if sized else "-",
        f"{r.usd_per_million_output_tokens:.3g}" if sized else "-",
        f"{r.ttft_p99_s:.3g}s" if sized else "-",
        f"{r.tpot_p99_s * 1e3:.3g}ms" if sized else "-",
        r.status,
        r.reason,
    ]


def _table(headers: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    rows = [list(headers)] + rows
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    return ["  ".join(v.ljust(widths[i]) for i, v in enumerate(r)).rstrip() for r in rows]


def _text(result: Any, shown: list[Any]) -> list[str]:
    lines = [f"{result.name}: searched {len(result.search)} layouts x modes at {_load(result)}"]
    lines += _table(SEARCH_HEADERS, [_search_row(r) for r in result.search])
    lines += [
        "search: each point sized by simulation (costs at the first fabric's owned price); the winner"
        " rechecked on a larger sample",
    ]
    lines += ["", f"{len(result.candidates)} serving designs (each mode's best layout x fabric x storage):"]
    lines += _table(HEADERS, [_row(c, result.recommended) for c in shown])
    lines += [
        "* recommended  layout: tp, pp, max batch (b), token budget (t)  P+D: prefill + decode replicas"
        " (colocated: replicas + 0)  KV: KV-cache transfer  cold: cold start of one replica",
        "",
        f"Recommendation: {result.recommended or 'none'}",
        result.rationale,
    ]
    return lines


def _markdown(result: Any, shown: list[Any]) -> list[str]:
    lines = [
        f"# Serving plan: {result.name}",
        "",
        f"Searched at {_load(result)}:",
        "",
        "| " + " | ".join(SEARCH_HEADERS) + " |",
        "|" + "---|" * len(SEARCH_HEADERS),
    ]
    lines += ["| " + " | ".join(_search_row(r)) + " |" for r in result.search]
    lines += [
        "",
        "| " + " | ".join(h or "#" for h in HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(_row(c, result.recommended)) + " |" for c in shown]
    return lines + ["", f"**Recommendation:** `{result.recommended}`", "", result.rationale]
