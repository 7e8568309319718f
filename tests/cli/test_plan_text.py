"""The plain renderer of ``plan``'s text report (cli/plain_text.py) against rich itself:
byte-identical on every training example at widths 80, 120 and 200, and on random tables
and paragraphs; strings rich would read differently (markup, emoji codes) go to rich."""

from __future__ import annotations

import io
import random
import string

import pytest
from rich import box
from rich.console import Console
from rich.table import Table

from gpufabric.app.requests import PlanRequest
from gpufabric.app.services import plan as run_plan
from gpufabric.cli import plain_text
from gpufabric.cli.plan import _plain_report, _report_parts, _rich_report
from tests.conftest import EXAMPLES

WIDTHS = (80, 120, 200)


def _console(width: int) -> Console:
    return Console(file=io.StringIO(), width=width, highlight=False, force_terminal=False)


@pytest.fixture(scope="module", params=sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def outcome(request):
    return run_plan(PlanRequest(spec_file=request.param))


@pytest.mark.parametrize("top", [12, 3, None])
def test_training_report_is_rich_byte_for_byte(outcome, top):
    shown = outcome.shown(top, default=None)
    title, right, prints = _report_parts(outcome, shown)
    for width in WIDTHS:
        console = _console(width)
        _rich_report(outcome, shown, title, right, [markup for markup, _ in prints], console=console)
        plain = _plain_report(title, outcome.table(shown), right, [text for _, text in prints], width=width)
        assert plain is not None, f"the plain renderer declined at width {width}"
        assert "\n".join(plain) + "\n" == console.file.getvalue(), width


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + ".%$-/") for _ in range(rng.randint(0, 12)))


def test_random_tables_and_paragraphs_match_rich():
    rng = random.Random(32)
    for _ in range(400):
        n = rng.randint(1, 12)
        headers = [_word(rng) for _ in range(n)]
        rows = [[_word(rng) for _ in range(n)] for _ in range(rng.randint(0, 5))]
        right = [rng.random() < 0.5 for _ in range(n)]
        title = " ".join(_word(rng) for _ in range(rng.randint(1, 20)))
        width = rng.randint(n + 2, 200)
        expected = plain_text.table(title, headers, rows, right, width)
        console = _console(width)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0, 0, 1), title=title, title_justify="left")
        for h, r in zip(headers, right, strict=True):
            table.add_column(h, justify="right" if r else "left", no_wrap=True)
        for row in rows:
            table.add_row(*row)
        console.print(table)
        if expected is not None:
            assert "\n".join(expected) + "\n" == console.file.getvalue(), (headers, rows, width)
        text = "\n".join(
            " ".join(_word(rng) + " " * rng.randint(0, 2) for _ in range(rng.randint(0, 40))) for _ in range(3)
        )
        console = _console(width)
        console.print(text)
        if (lines := plain_text.wrap(text, width)) is not None:
            assert "\n".join(lines) + "\n" == console.file.getvalue(), (text, width)


def test_markup_and_emoji_codes_are_left_to_rich():
    assert plain_text.safe(["rail 1:1/nvmeof-rdma: costs $7", "two\nlines", "a::b"])
    assert not plain_text.safe(["see [bold]this[/bold]"])
    assert not plain_text.safe(["a :smile: here"])
    assert not plain_text.safe(["a :thumbs_up-text: here"])
    assert not plain_text.safe(["caf\u00e9"])
    assert not plain_text.safe(["tab\there"])


def test_a_terminal_or_forced_colour_goes_to_rich(monkeypatch):
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert plain_text.plain_stdout()
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not plain_text.plain_stdout()
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    assert not plain_text.plain_stdout()


def test_plan_builds_the_inference_models_only_where_a_file_may_be_an_inference_spec(tmp_path):
    """cli/plan.py models_for: the training examples skip spec.inference's models at start-up;
    a serving spec, a file with an escape, an unreadable or missing file build them all."""
    from gpufabric.cli.plan import MODELS, models_for

    inference = "gpufabric.spec.inference"
    for path in EXAMPLES.glob("*.yaml"):
        assert models_for(["plan", str(path), "--top", "3"]) == tuple(m for m in MODELS if m != inference)
    for path in (EXAMPLES / "serving").glob("*.yaml"):
        assert models_for(["plan", str(path)]) == MODELS
    escaped = tmp_path / "escaped.yaml"
    escaped.write_text('name: x\nworkload:\n  kind: "infer\\x65nce"\n')
    assert models_for(["plan", str(escaped)]) == MODELS
    assert models_for(["plan", str(tmp_path / "missing.yaml")]) == MODELS
    assert models_for(["plan", "-"]) == MODELS
