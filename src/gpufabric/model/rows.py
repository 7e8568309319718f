"""Distinct rows of column arrays, fast: the vectorised models compute once per distinct input."""

from __future__ import annotations

from typing import Any

import numpy as np


def unique_rows(*columns: Any) -> tuple[np.ndarray, np.ndarray]:
    """(index of one representative row per distinct row, inverse mapping every row to its distinct row).

    Columns are 1-d and of equal length. One ``np.lexsort`` over the columns and a scan for
    changes between neighbours: at 10^5 rows several times faster than
    ``np.unique(np.stack(cols), axis=0)``, which sorts void rows.
    """
    cols = [np.asarray(c).ravel() for c in columns]
    n = len(cols[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(cols[::-1])
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for c in cols:
        s = c[order]
        change[1:] |= s[1:] != s[:-1]
    group = np.cumsum(change) - 1
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = group
    return order[change], inverse
