"""Per-rank data (``RankStats``) <-> the ``test_result.params`` keys that store it.

The SQLite schema keeps per-rank data where results stored before ``RankStats`` existed
put it: JSON texts in ``params`` (``rank_hosts``, ``rank_time_p50_us``, ``rank_step_*``,
``stragglers``, ``oversubscribed``). This module is the only place those keys are written
(``to_params``, by the store) or read (``from_params``, by the store and by readers of
records built without the typed field), so everything else sees typed fields and stored
files of every version read the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpufabric.results.records import RankStat, RankStats, TestResult

#: params key of each figure, per quantity; and how many decimals a stored figure keeps.
_KEYS = {
    "time_us": {"p50": ("rank_time_p50_us", 3)},
    "step_s": {"p50": ("rank_step_p50_s", 6), "p99": ("rank_step_p99_s", 6), "cv": ("rank_step_cv", 4)},
}
#: Every params key that holds per-rank data.
RANK_KEYS = frozenset(
    {"rank_hosts", "stragglers", "oversubscribed"} | {key for figures in _KEYS.values() for key, _ in figures.values()}
)


def to_params(stats: RankStats | None) -> dict[str, str]:
    """The params entries that store ``stats`` ({} for None)."""
    if stats is None:
        return {}
    out: dict[str, str] = {}
    for figure, (key, digits) in _KEYS.get(stats.quantity, {}).items():
        out[key] = json.dumps(
            {str(r.rank): round(v, digits) for r in stats.ranks if (v := getattr(r, figure)) is not None}
        )
    out["rank_hosts"] = json.dumps({str(r.rank): r.host for r in stats.ranks})
    if stats.quantity:
        out["stragglers"] = json.dumps(list(stats.stragglers))
        out["oversubscribed"] = stats.oversubscribed
    return out


def _loads(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return default


def from_params(params: Mapping[str, str]) -> tuple[RankStats | None, dict[str, str]]:
    """``(stats, other params)``; stats is None when ``params`` holds no per-rank data.

    Malformed texts (a hand-edited export) read as missing rather than failing a report.
    """
    rest = {k: v for k, v in params.items() if k not in RANK_KEYS}
    if "rank_hosts" not in params:
        return None, dict(params)
    hosts = _loads(params.get("rank_hosts"), {})
    quantity = next((q for q, figures in _KEYS.items() if figures["p50"][0] in params), "")
    figures = {figure: _loads(params.get(key), {}) for figure, (key, _) in _KEYS.get(quantity, {}).items()}
    ranks = sorted(
        {int(k) for k in hosts if str(k).lstrip("-").isdigit()}
        | {int(k) for f in figures.values() for k in f if str(k).lstrip("-").isdigit()}
    )
    stats = RankStats(
        quantity=quantity,
        ranks=tuple(
            RankStat(
                rank=r,
                host=str(hosts.get(str(r), "")),
                **{
                    figure: (None if values.get(str(r)) is None else float(values[str(r)]))
                    for figure, values in figures.items()
                },
            )
            for r in ranks
        ),
        stragglers=tuple(int(x) for x in _loads(params.get("stragglers"), [])),
        oversubscribed=params.get("oversubscribed", ""),
    )
    return stats, rest


def rank_stats(result: TestResult) -> RankStats | None:
    """The result's per-rank data: the typed field, else what older records kept in params."""
    return result.ranks if result.ranks is not None else from_params(result.params)[0]


def from_dict(data: Mapping[str, Any]) -> RankStats:
    """The inverse of ``to_jsonable(RankStats)`` (the run export)."""
    return RankStats(
        quantity=str(data.get("quantity", "")),
        ranks=tuple(
            RankStat(rank=int(r["rank"]), host=str(r["host"]), p50=r.get("p50"), p99=r.get("p99"), cv=r.get("cv"))
            for r in data.get("ranks", ())
        ),
        stragglers=tuple(int(x) for x in data.get("stragglers", ())),
        oversubscribed=str(data.get("oversubscribed", "")),
    )
