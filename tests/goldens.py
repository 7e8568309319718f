"""Golden-file comparison: normalise, compare, show a short unified diff, or rewrite.

``pytest --update-golden`` rewrites the files under tests/golden/ from the current output
instead of comparing (review the git diff before committing it). See tests/golden/README.md.
"""

from __future__ import annotations

import difflib
import json
import math
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gpufabric import __version__

GOLDEN = Path(__file__).resolve().parent / "golden"

# JSON floats are compared at this many significant digits: enough to catch any real model
# change (the models' inputs carry 2-4 digits), few enough that last-bit noise from another
# numpy/libm build (a few ulps, ~1e-15 relative) never shows.
SIG_DIGITS = 9
# The version string changes with every release, not with behaviour.
VOLATILE_KEYS = {"gpufabric_version": "<version>"}
DIFF_LINES = 40  # a failing comparison shows at most this many diff lines


def updating(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def _round(value: object) -> object:
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0.0:
            return value
        return float(f"{value:.{SIG_DIGITS - 1}e}")
    if isinstance(value, dict):
        return {k: VOLATILE_KEYS[k] if k in VOLATILE_KEYS else _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def normalise_json(text: str) -> str:
    """``text`` (a JSON document) with floats rounded and volatile fields masked, one key a line."""
    return json.dumps(_round(json.loads(text)), indent=2, ensure_ascii=True) + "\n"


def mask_version(text: str) -> str:
    """``text`` with "gpufabric X.Y.Z" written as "gpufabric <version>" (a release is no behaviour change)."""
    return text.replace(f"gpufabric {__version__}", "gpufabric <version>")


def short_diff(expected: str, actual: str, name: str) -> str:
    """The first DIFF_LINES lines of a unified diff, and how many were left out."""
    lines = list(
        difflib.unified_diff(
            expected.splitlines(), actual.splitlines(), f"golden/{name}", f"actual/{name}", lineterm="", n=2
        )
    )
    shown = "\n".join(lines[:DIFF_LINES])
    more = len(lines) - DIFF_LINES
    return shown + (f"\n... {more} more diff lines" if more > 0 else "")


def check(request: pytest.FixtureRequest, name: str, actual: str) -> None:
    """Compare ``actual`` with tests/golden/``name`` (or rewrite it under --update-golden)."""
    path = GOLDEN / name
    if updating(request):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    if not path.is_file():
        pytest.fail(f"no golden file tests/golden/{name}; create it with `pytest --update-golden`", pytrace=False)
    expected = path.read_text()
    if expected != actual:
        pytest.fail(
            f"output differs from tests/golden/{name} (if intended: `pytest --update-golden`, review "
            f"the git diff):\n{short_diff(expected, actual, name)}",
            pytrace=False,
        )


def reset_dir(request: pytest.FixtureRequest, name: str) -> None:
    """Under --update-golden, empty tests/golden/``name`` so files no longer produced go away."""
    if updating(request):
        shutil.rmtree(GOLDEN / name, ignore_errors=True)


class _Structure(HTMLParser):
    """Headings, chart titles and table header rows of an HTML report; SVG content is skipped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._svg = 0
        self._text: list[str] | None = None
        self._tag = ""
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "svg":
            self._svg += 1
        if self._svg:
            return
        if tag in ("title", "h1", "h2", "h3", "h4", "h5", "h6", "th", "caption", "figcaption"):
            self._tag, self._text = tag, []
        elif tag == "figure":
            self.lines.append(f"figure: {dict(attrs).get('aria-label') or '(no title)'}")
        elif tag == "tr":
            self._row = []
        elif tag == "table":
            self.lines.append("table")

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._svg -= 1
            return
        if self._svg:
            return
        if self._text is not None and tag == self._tag:
            text = " ".join("".join(self._text).split())
            self._text = None
            if tag == "th" and self._row is not None:
                self._row.append(text)
            else:
                self.lines.append(f"{tag}: {text}")
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.lines.append("  header: " + " | ".join(self._row))
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._text is not None and not self._svg:
            self._text.append(data)


def html_structure(html: str) -> str:
    parser = _Structure()
    parser.feed(html)
    parser.close()
    return "\n".join(parser.lines) + "\n"
