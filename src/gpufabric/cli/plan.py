"""``gpufabric plan SPEC``: every candidate design costed and predicted, one recommended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpufabric.cli.options import format_option
from gpufabric.cli.output import ReportFormat, print_json

#: The pydantic model modules this command builds at start-up (cli/app.py ALL_MODEL_MODULES).
MODELS = (
    "gpufabric.catalog.schema",
    "gpufabric.spec.models",
    "gpufabric.spec.security",
    "gpufabric.spec.inference",
)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


def plan(
    spec_file: Path = typer.Argument(..., help="Spec YAML (see `gpufabric init`)."),
    fmt: ReportFormat = format_option(ReportFormat.text),
    top: int = typer.Option(
        None, "--top", min=1, help="Show only the best N candidates (default: 12 in text, all in JSON)."
    ),
    catalog_files: list[Path] = typer.Option([], "--catalog", help="Catalog override file (repeatable; later wins)."),
) -> int:
    """Cost and predict every fabric x topology x oversubscription x storage design; recommend one."""
    from gpufabric.cli.plan_inference import is_inference, plan_inference

    if is_inference(spec_file):  # workload.kind: inference -> serving designs (docs/inference.md)
        return plan_inference(spec_file, fmt, top, catalog_files)
    from gpufabric.catalog import load_catalog
    from gpufabric.plan import make_plan
    from gpufabric.plan.capacity import check_options
    from gpufabric.spec import load_spec

    catalog = load_catalog(catalog_files)
    loaded = load_spec(spec_file, known_ids=catalog.known_ids())
    spec = loaded.spec
    check_options(spec, catalog, loaded.located)  # SHARP, provider fabrics, offerings: located errors
    result = make_plan(spec, catalog)
    if fmt == ReportFormat.json:
        from gpufabric.spec.plan_file import plan_to_dict

        print_json(
            plan_to_dict(
                result,
                _shown(result, top, default=None),
                catalog_files=list(catalog.files),
                overrides=_overrides(catalog_files),
            )
        )
    elif fmt == ReportFormat.markdown:
        typer.echo(_markdown(result, _shown(result, top, default=None)))
    else:
        _text(result, _shown(result, top, default=12), spec)
        for o in _overrides(catalog_files):
            typer.echo(
                f"catalog override applied: {o['field']} = {o['value']:.4g} ({o['source']}; {o['file']})"
                if isinstance(o["value"], float)
                else f"catalog override applied: {o['field']} = {o['value']} ({o['source']}; {o['file']})"
            )
    # Nothing recommendable (no layout fits in memory) is a failed check.
    return 0 if result.recommended is not None else 1


def _overrides(files: list[Path]) -> list[dict[str, Any]]:
    if not files:  # plan.calibrate imports scipy.optimize (~1 s): only when there is something to read
        return []
    from gpufabric.plan.calibrate import overrides_in

    return overrides_in(files)


def _shown(result: Any, top: int | None, *, default: int | None) -> list[Any]:
    limit = top or default
    if limit is None:
        return list(result.candidates)
    keep = result.candidates[:limit]
    if result.recommended is None:
        return keep
    rec = result.get(result.recommended)
    return keep if rec in keep else [rec, *keep[: limit - 1]]


def _ok(c: Any) -> str:
    if c.meets_requirements:
        return "yes"
    short = {
        "step_time_cv": "cv",
        "checkpoint_stall_fraction": "stall",
        "time_to_train_days": "days",
        "capex_usd": "budget",
        "rent_commitment_usd": "budget",
        "dataset_read_gbps": "data",
        "goodput": "goodput",
        "memory": "mem",
    }
    return ",".join(short.get(v.split(" ", 1)[0], v.split(" ", 1)[0]) for v in c.violations)


def _row(c: Any, rec: str, pareto: set[str]) -> list[str]:
    mark = "*" if c.id == rec else ("p" if c.id in pareto else "")
    topo = "rail" if c.topology == "rail-optimized" else "fat"
    if c.capacity == "rent":  # the offering names the fabric (JSON: fabric); the term is short
        what, where = c.rental, "rent " + {"on_demand": "od"}.get(c.term, c.term)
    else:
        what, where = c.fabric + ("+S" if c.in_network_reduction else ""), f"{topo} {c.oversubscription:g}:1"
    return [
        mark,
        what,
        where,
        c.storage,
        f"{c.step_time_s:.3g}",
        f"{c.step_time_p99_s:.3g}",
        f"{c.step_time_cv:.2%}",
        f"{c.comm_exposed_s:.3g}",
        f"{c.checkpoint_stall_fraction:.1%}",
        f"{c.goodput:.0%}",
        f"{c.time_to_train_days:.1f}",
        f"{c.capex_usd / 1e6:,.1f}" if c.capacity != "rent" else "-",
        f"{c.rent_commitment_usd / 1e6:,.1f}" if c.capacity == "rent" else "-",
        f"{c.run_cost_usd / 1e6:,.3g}",
        f"{c.mfu:.0%}",
        f"{c.memory_gb:.0f}",
        _ok(c),
    ]


HEADERS = (
    "",
    "fabric",
    "topology",
    "storage",
    "step",
    "p99",
    "CV",
    "comm",
    "stall",
    "good",
    "days",
    "capex",
    "commit",
    "run",
    "MFU",
    "mem",
    "meets",
)


def _text(result: Any, shown: list[Any], spec: Any) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    probe = Console()
    console = Console(highlight=False, width=min(120, probe.width) if probe.is_terminal else 120)
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 0, 0, 1),
        title=f"{result.name}: {len(result.candidates)} designs"
        f" for {spec.num_gpus:,} x {spec.cluster.gpu} ({spec.cluster.nodes} nodes)",
        title_justify="left",
    )
    for i, h in enumerate(HEADERS):
        table.add_column(h, justify="left" if i < 4 or i == len(HEADERS) - 1 else "right", no_wrap=True)
    pareto = set(result.pareto)
    for c in shown:
        style = "bold green" if c.id == result.recommended else ("" if c.meets_requirements else "dim")
        table.add_row(*_row(c, result.recommended, pareto), style=style)
    console.print(table)
    console.print(
        "[dim]* recommended  p Pareto frontier (capex, days, CV)  step/p99/comm in s (mean and p99 step,"
        " exposed comm per step)\nstall: wall time blocked on checkpoints  capex (built), commit (rented: the run"
        " on demand, the whole term committed) and run (cost of the whole run) in $M\nMFU end to end  mem: GiB per"
        " GPU  dim rows miss a requirement  +S: in-network reduction (SHARP)  rent: a rented offering, od on demand"
        " or 1y/3y committed[/dim]"
    )
    for note in [*result.throughput.get("notes", []), *result.notes]:
        console.print(f"[yellow]note[/yellow]: {note}")
    if result.layout_search:
        ls = result.layout_search
        console.print(
            f"Layout search: {ls['searched']} layouts, {ls['fit_in_memory']} fit in memory,"
            f" {ls['evaluated']:,} layout x design evaluations; best layout per design:"
        )
        for c in shown[:4]:
            console.print(f"- {c.id}: {c.layout.text}")
    console.print(f"\n[bold]Recommendation[/bold]: {result.recommended or 'none'} (placement {result.placement})")
    for sentence in result.rationale.split(". "):
        console.print(sentence if sentence.endswith(".") else sentence + ".")
    console.print("\n[bold]Sensitivity[/bold]")
    for s in result.sensitivity:
        console.print(f"- {s['text']}")


def _markdown(result: Any, shown: list[Any]) -> str:
    pareto = set(result.pareto)
    lines = [
        f"# Plan: {result.name}",
        "",
        "| " + " | ".join(h or "#" for h in HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    for c in shown:
        lines.append("| " + " | ".join(_row(c, result.recommended, pareto)) + " |")
    lines += [
        "",
        f"**Recommendation:** `{result.recommended or 'none'}` (placement {result.placement})",
        "",
        result.rationale,
        "",
        "**Sensitivity**",
        "",
    ]
    lines += [f"- {s['text']}" for s in result.sensitivity]
    return "\n".join(lines)
