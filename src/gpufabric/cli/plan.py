"""``gpufabric plan SPEC``: every candidate design costed and predicted, one recommended."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import typer

from gpufabric.app.requests import PlanRequest
from gpufabric.cli.options import SPEC_MODELS, format_option
from gpufabric.cli.output import ReportFormat, print_json
from gpufabric.cli.request_options import request_options

if TYPE_CHECKING:
    from rich.console import Console

    from gpufabric.app.inference import ServingPlanOutcome
    from gpufabric.app.training import TrainingPlan

#: The pydantic model modules this command builds at start-up (cli/app.py ALL_MODEL_MODULES).
MODELS = SPEC_MODELS
#: numpy's OpenBLAS on one thread: the planner's arrays are element-wise (cli/app.py _import_numpy_serial).
SERIAL_BLAS = True


#: Files larger than this are not read at start-up to choose the models (the whole set is built).
_PEEK_LIMIT_BYTES = 1 << 20


def models_for(args: Sequence[str]) -> tuple[str, ...]:
    """``MODELS`` without the inference spec's (~0.02 s to define and build, issue 32) when
    no file on the command line can be an inference spec: each is a regular file of at most
    1 MiB whose text has neither the word ``inference`` (``workload.kind: inference``) nor a
    backslash (a YAML escape could spell it). Anything else builds them all at start-up, as
    before; a model left out is built by pydantic on first use (spec/types.py defer_build)."""
    from pathlib import Path

    files = [Path(a) for a in args[1:] if not a.startswith("-")]
    texts: list[bytes] = []
    for path in files:
        try:
            if path.is_file():
                if path.stat().st_size > _PEEK_LIMIT_BYTES:
                    return MODELS
                texts.append(path.read_bytes())
        except (OSError, ValueError):  # unreadable, a NUL in the name: the command reports it
            return MODELS
    if not texts or any(b"inference" in t or b"\\" in t for t in texts):
        return MODELS
    return tuple(m for m in MODELS if m != "gpufabric.spec.inference")


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


@request_options(PlanRequest, place={"fmt": "spec_file"})
def plan(request: PlanRequest, fmt: ReportFormat = format_option(ReportFormat.text)) -> int:
    """Cost and predict every fabric x topology x oversubscription x storage design; recommend one."""
    from gpufabric.app.services import plan as run

    outcome = run(request)
    if fmt == ReportFormat.json:
        print_json(outcome.to_json(outcome.shown(request.top, default=None)))
    elif fmt == ReportFormat.markdown:
        typer.echo("\n".join(_MARKDOWN[outcome.kind](outcome, outcome.shown(request.top, default=None))))
    elif lines := _TEXT[outcome.kind](outcome, outcome.shown(request.top, default=12)):
        typer.echo("\n".join(lines))
    return outcome.exit_code


def _md_table(table: tuple[Sequence[str], list[list[str]]]) -> list[str]:
    headers, rows = table
    lines = ["| " + " | ".join(h or "#" for h in headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def _plain_table(table: tuple[Sequence[str], list[list[str]]]) -> list[str]:
    headers, rows = table
    rows = [list(headers), *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    return ["  ".join(v.ljust(widths[i]) for i, v in enumerate(r)).rstrip() for r in rows]


#: The legend under the training table (rich markup: dim).
_LEGEND = (
    "* recommended  p Pareto frontier (capex, days, CV)  step/p99/comm in s (mean and p99 step,"
    " exposed comm per step)\nstall: wall time blocked on checkpoints  capex (built), commit (rented: the run"
    " on demand, the whole term committed) and run (cost of the whole run) in $M\nMFU end to end  mem: GiB per"
    " GPU  dim rows miss a requirement  +S: in-network reduction (SHARP)  rent: a rented offering, od on demand"
    " or 1y/3y committed"
)


def _training_text(outcome: TrainingPlan, shown: Sequence[Any]) -> list[str]:
    from gpufabric.cli import plain_text

    title, right, prints = _report_parts(outcome, shown)
    lines = None
    if plain_text.plain_stdout():
        lines = _plain_report(title, outcome.table(shown), right, [text for _, text in prints], width=120)
    if lines is None:
        _rich_report(outcome, shown, title, right, [markup for markup, _ in prints])
    else:
        typer.echo("\n".join(lines))
    values = [f"{o['value']:.4g}" if isinstance(o["value"], float) else o["value"] for o in outcome.overrides]
    return [
        f"catalog override applied: {o['field']} = {v} ({o['source']}; {o['file']})"
        for o, v in zip(outcome.overrides, values, strict=True)
    ]


def _report_parts(outcome: TrainingPlan, shown: Sequence[Any]) -> tuple[str, list[bool], list[tuple[str, str]]]:
    """The table's title, which columns are right-justified, and each console.print after
    the table as (rich markup, the text it shows): only the fixed strings here carry markup."""
    result, spec = outcome.result, outcome.spec
    title = (
        f"{result.name}: {len(result.candidates)} designs"
        f" for {spec.num_gpus:,} x {spec.cluster.gpu} ({spec.cluster.nodes} nodes)"
    )
    notes = [*result.throughput.get("notes", []), *result.notes]
    prints = [(f"[dim]{_LEGEND}[/dim]", _LEGEND), *((f"[yellow]note[/yellow]: {n}", f"note: {n}") for n in notes)]
    if ls := result.layout_search:
        line = (
            f"Layout search: {ls['searched']} layouts, {ls['fit_in_memory']} fit in memory,"
            f" {ls['evaluated']:,} layout x design evaluations; best layout per design:"
        )
        prints += [(line, line), *((f"- {c.id}: {c.layout.text}",) * 2 for c in shown[:4])]
    line = f"Recommendation: {result.recommended or 'none'} (placement {result.placement})"
    prints.append((f"\n[bold]{line[:14]}[/bold]{line[14:]}", "\n" + line))
    prints += [(s if s.endswith(".") else s + ".",) * 2 for s in result.rationale.split(". ")]
    prints += [("\n[bold]Sensitivity[/bold]", "\nSensitivity"), *((f"- {s['text']}",) * 2 for s in result.sensitivity)]
    headers, _ = outcome.table(shown[:0])
    return title, [not (i < 4 or i == len(headers) - 1) for i in range(len(headers))], prints


def _plain_report(
    title: str, table: tuple[Sequence[str], list[list[str]]], right: Sequence[bool], prints: list[str], *, width: int
) -> list[str] | None:
    """The report as rich would print it on a plain console ``width`` wide (cli/plain_text.py),
    or None where rich is needed."""
    from gpufabric.cli import plain_text

    headers, rows = table
    if not plain_text.safe([title, *headers, *(v for r in rows for v in r), *prints]):
        return None
    lines = plain_text.table(title, *table, right, width)
    for text in prints:
        if lines is None or (wrapped := plain_text.wrap(text, width)) is None:
            return None
        lines += wrapped
    return lines


def _rich_report(
    outcome: TrainingPlan,
    shown: Sequence[Any],
    title: str,
    right: Sequence[bool],
    prints: list[str],
    console: Console | None = None,
) -> None:
    """The report through rich: on a terminal (styles, its width up to 120) or for text the
    plain renderer leaves to rich; ``console`` for tests."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    result = outcome.result
    if console is None:
        probe = Console()
        console = Console(highlight=False, width=min(120, probe.width) if probe.is_terminal else 120)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0, 0, 1), title=title, title_justify="left")
    headers, rows = outcome.table(shown)
    for h, r in zip(headers, right, strict=True):
        table.add_column(h, justify="right" if r else "left", no_wrap=True)
    for c, row in zip(shown, rows, strict=True):
        table.add_row(
            *row, style="bold green" if c.id == result.recommended else ("" if c.meets_requirements else "dim")
        )
    console.print(table)
    for markup in prints:
        console.print(markup)


def _training_markdown(outcome: TrainingPlan, shown: Sequence[Any]) -> list[str]:
    r = outcome.result
    lines = [f"# Plan: {r.name}", "", *_md_table(outcome.table(shown)), ""]
    lines += [f"**Recommendation:** `{r.recommended or 'none'}` (placement {r.placement})", "", r.rationale, ""]
    return lines + ["**Sensitivity**", "", *(f"- {s['text']}" for s in r.sensitivity)]


def _serving_text(outcome: ServingPlanOutcome, shown: Sequence[Any]) -> list[str]:
    r = outcome.result
    lines = [
        f"{r.name}: searched {len(r.search)} layouts x modes at {outcome.load}",
        *_plain_table(outcome.search_table()),
    ]
    lines += [
        "search: each point sized by simulation (costs at the first fabric's owned price); the winner"
        " rechecked on a larger sample",
        "",
        f"{len(r.candidates)} serving designs (each mode's best layout x fabric x storage):",
        *_plain_table(outcome.table(shown)),
        "* recommended  layout: tp, pp, max batch (b), token budget (t)  P+D: prefill + decode replicas"
        " (colocated: replicas + 0)  KV: KV-cache transfer  cold: cold start of one replica",
    ]
    return [*lines, "", f"Recommendation: {r.recommended or 'none'}", r.rationale]


def _serving_markdown(outcome: ServingPlanOutcome, shown: Sequence[Any]) -> list[str]:
    r = outcome.result
    lines = [f"# Serving plan: {r.name}", "", f"Searched at {outcome.load}:", "", *_md_table(outcome.search_table())]
    lines += ["", *_md_table(outcome.table(shown))]
    return [*lines, "", f"**Recommendation:** `{r.recommended}`", "", r.rationale]


#: Renderers per workload kind (``app.workloads.KINDS``): text, Markdown.
_Renderer = Callable[[Any, Sequence[Any]], list[str]]
_TEXT: dict[str, _Renderer] = {"training": _training_text, "inference": _serving_text}
_MARKDOWN: dict[str, _Renderer] = {"training": _training_markdown, "inference": _serving_markdown}
