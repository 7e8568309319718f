"""Size-curve fixtures: a real nccl-tests table and copies of it made slower, as a user's second run would read."""

from __future__ import annotations

import re
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "nccl-tests"


#: A size row, after whatever launcher prefix the line has: size count type [redop [root]], 8 cells.
_ROW = re.compile(
    r"(?P<head>(?P<size>\d+)\s+\d+\s+[A-Za-z]\w*(?:\s+[A-Za-z]\w*)?(?:\s+-?\d+)?)(?P<cells>(?:\s+\S+){8})\s*$"
)


def slower_copy(text: str, factor: float, *, min_size: int) -> str:
    """``text`` with every size row at or above ``min_size`` bytes ``factor`` times slower: both
    times multiplied, both algbw and busbw divided, printed with nccl-tests' two decimals.
    Launcher prefixes (``srun -l``, ``--tag-output``) and indentation are kept."""
    out = []
    for line in text.splitlines(keepends=True):
        m = _ROW.search(line.rstrip("\n"))
        if m and int(m.group("size")) >= min_size:
            cells = []
            for k, cell in enumerate(m.group("cells").split()):
                if k % 4 == 3 or cell.upper() == "N/A":  # #wrong, or not measured
                    cells.append(cell)
                else:
                    value = float(cell)
                    cells.append(f"{value * factor if k % 4 == 0 else value / factor:.2f}")
            line = line[: m.start("cells")] + "  " + "  ".join(cells) + "\n"
        out.append(line)
    return "".join(out)
