"""rich's layout of ``plan``'s text report, reproduced without importing rich (issue 32:
rich's import and per-cell rendering were ~0.04 s of a 0.45 s start-up budget).

Only the subset ``cli/plan.py`` uses: a ``box.SIMPLE_HEAD`` table with ``pad_edge=False``,
``padding=(0, 0, 0, 1)``, no-wrap columns and a left-justified title, and ``console.print``
of markup-free text, on a console that is not a terminal (no styles are written). Anything
outside that subset (a string rich would read as markup or an emoji code, a character that
is not printable ASCII, a word wider than the console, a stream that is not UTF-8 or may be
a terminal) returns None and the caller renders with rich itself.
tests/cli/test_plan_text.py checks the output is byte-identical to rich's for every
training example at widths 80, 120 and 200.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Sequence

#: rich's emoji code (rich/_emoji_replace.py, scanned the same way), and the characters its
#: emoji names are made of (rich/_emoji_codes.py, ASCII part): a code whose name has only
#: these may be an emoji, and the string is left to rich.
_EMOJI_CODE = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")
_EMOJI_NAME = re.compile(r"[A-Za-z0-9_!#&()*+.\-]+")
#: rich/_wrap.py's word: leading whitespace, the word, its trailing whitespace.
_WORD = re.compile(r"\s*\S+\s*")
_TRAILING = re.compile(r"\s+$")


def plain_stdout() -> bool:
    """Whether rich would write stdout without styles or box substitutions: not a terminal
    (rich's Console.is_terminal: TTY_COMPATIBLE, FORCE_COLOR, isatty; Jupyter and IDLE are
    left to rich) and a UTF-8 encoding (else rich draws ASCII boxes)."""
    if os.environ.get("TTY_COMPATIBLE", "") == "1" or os.environ.get("FORCE_COLOR") is not None:
        return False
    if "IPython" in sys.modules or "idlelib" in sys.modules:
        return False
    stream = sys.stdout
    try:
        if stream is None or stream.isatty():
            return False
    except ValueError:  # closed
        return False
    return (getattr(stream, "encoding", None) or "utf-8").lower().startswith("utf")


def safe(strings: Iterable[str]) -> bool:
    """Whether every string renders as its own characters: printable ASCII lines, no markup
    (any ``[``: rich/markup.py), nothing that may be an emoji code."""
    return all(
        s.isascii()
        and s.replace("\n", "").isprintable()
        and "[" not in s
        and not any(_EMOJI_NAME.fullmatch(m.group(2)) for m in _EMOJI_CODE.finditer(s))
        for s in strings
    )


def wrap(text: str, width: int, *, pad: bool = False) -> list[str] | None:
    """``text`` as rich's ``Text.wrap`` lays it out (justify "default", or "left" when
    ``pad``): split at newlines, each line broken before the first word that does not fit,
    trailing spaces kept up to ``width``. None where a word is wider than ``width`` (rich
    folds it)."""
    out: list[str] = []
    for line in text.split("\n"):
        breaks: list[int] = []
        offset = 0
        for match in _WORD.finditer(line):
            start, word = match.start(), match.group(0)
            length = len(word.rstrip())
            if width - offset >= length:
                offset += len(word)
            elif length > width:
                return None
            elif offset and start:
                breaks.append(start)
                offset = len(word)
        for begin, end in zip([0, *breaks], [*breaks, len(line)], strict=True):
            piece = line[begin:end]
            if len(piece) > width and (space := _TRAILING.search(piece)):
                piece = piece[: len(piece) - min(len(space.group(0)), len(piece) - width)]
            piece = piece[:width]  # rich's "fold" truncation: a crop
            out.append(piece.ljust(width) if pad else piece)
    return out


def _reduce(excess: int, widths: list[int]) -> list[int]:
    """rich/_ratio.py ``ratio_reduce(excess, [1] * n, widths, widths)``: the excess taken
    from the columns evenly, left to right, rounding as rich does."""
    ratios = [1 if w else 0 for w in widths]
    total_ratio = sum(ratios)
    remaining = excess
    out: list[int] = []
    for ratio, width in zip(ratios, widths, strict=True):
        if ratio and total_ratio > 0:
            taken = min(width, round(ratio * remaining / total_ratio))
            out.append(width - taken)
            remaining -= taken
            total_ratio -= ratio
        else:
            out.append(width)
    return out


def _cell(value: str, width: int, right: bool) -> str:
    if len(value) > width:
        value = value[: width - 1] + "…" if width > 0 else ""
    return value.rjust(width) if right else value.ljust(width)


def table(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool], width: int
) -> list[str] | None:
    """The lines of rich's ``Table(box=SIMPLE_HEAD, pad_edge=False, padding=(0, 0, 0, 1),
    title_justify="left")`` of no-wrap columns at console ``width`` (rich/table.py
    ``_calculate_column_widths``: each column as wide as its widest cell; a table wider
    than the console loses the excess evenly across the columns, cells cut with an ellipsis)."""
    n = len(headers)
    inner = width - (n + 1)  # the two edges and n - 1 dividers
    if inner < 1:
        return None
    pads = [0] + [1] * (n - 1)
    natural = [min(max(len(r[i]) for r in [headers, *rows]) + pads[i], inner) for i in range(n)]
    widths = [w or 1 for w in natural]
    if sum(widths) > inner:  # rich measures the columns again at their reduced widths
        widths = [
            min(w, r) if r >= 1 else 0 for w, r in zip(natural, _reduce(sum(widths) - inner, widths), strict=True)
        ]
    table_width = sum(widths) + n + 1
    lines = wrap(title, table_width, pad=True) if title else []  # rich: no title line for ""
    if lines is None:
        return None

    def row(cells: Sequence[str]) -> str:
        parts = [
            " " * pads[i] + _cell(v, widths[i] - pads[i], right[i]) if widths[i] else "" for i, v in enumerate(cells)
        ]
        return " " + " ".join(parts) + " "

    lines += [" " * table_width, row(headers), " " + "─".join("─" * w for w in widths) + " "]
    # The even reduction can leave the table wider than the console (columns already at 0 or
    # 1 give nothing): rich's console.print crops every line at the console's width.
    return [line[:width] for line in [*lines, *(row(r) for r in rows), " " * table_width]]
