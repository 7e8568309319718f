"""Size-curve fixtures: a real nccl-tests table and copies of it made slower, as a user's second run would read."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "nccl-tests"


def slower_copy(text: str, factor: float, *, min_size: int) -> str:
    """``text`` with every size row at or above ``min_size`` bytes ``factor`` times slower: both
    times multiplied, both algbw and busbw divided, printed with nccl-tests' two decimals."""
    out = []
    for line in text.splitlines(keepends=True):
        tokens = line.split()
        if len(tokens) >= 11 and tokens[0].isdigit() and tokens[1].isdigit() and int(tokens[0]) >= min_size:
            cells = []
            for k, cell in enumerate(tokens[-8:]):
                if k % 4 == 3 or cell.upper() == "N/A":  # #wrong, or not measured
                    cells.append(cell)
                else:
                    value = float(cell)
                    cells.append(f"{value * factor if k % 4 == 0 else value / factor:.2f}")
            line = " ".join(tokens[:-8] + cells) + "\n"
        out.append(line)
    return "".join(out)
