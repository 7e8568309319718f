"""How much memory a simulation needs, and refusing one that cannot fit.

A simulation's arrays are known before it starts: the pooled step times (runs x steps),
the per-run layout (one entry per node), the chunk of draws (``engine.chunk_steps`` x
draws per step) and the checkpoint segments. Estimating them up front turns ``--ranks
1e12`` or ``--brute-force`` at 1e9 ranks into an error naming the estimate, instead of a
MemoryError, an OOM kill or a numpy "maximum dimension exceeded" traceback.
"""

from __future__ import annotations

import os

from gpufabric.errors import InputError
from gpufabric.sim.config import SimConfig
from gpufabric.units import format_size

#: Bytes per float64.
_F8 = 8
#: Temporaries per pooled step time: the pool, the per-run array, the straggler-free
#: rerun, and the ms copy and sort the percentiles make.
_POOL_COPIES = 5
#: Temporaries per drawn random number in a chunk (uniforms, samples, sums, the max).
_DRAW_COPIES = 4
#: Fraction of available memory a simulation may plan to use; the rest is headroom for
#: the interpreter and allocator overhead.
_USABLE = 0.8


def estimate_bytes(cfg: SimConfig, *, brute_force: bool) -> int:
    """Peak bytes the simulation's arrays take (an estimate within a small factor)."""
    from gpufabric.sim.engine import _CHUNK_DRAWS

    nodes = cfg.num_ranks // cfg.ranks_per_node
    pool = cfg.runs * cfg.steps * _F8 * _POOL_COPIES
    layout = nodes * (_F8 + 1) + (cfg.num_ranks * (1 + _F8) if brute_force else 0)
    per_step = cfg.num_ranks if brute_force else (nodes if cfg.leaf_jitter else 4)
    if cfg.comm is not None:
        per_step += cfg.comm.dependent_steps * cfg.comm.width if brute_force else cfg.comm.dependent_steps
    draws = max(_CHUNK_DRAWS, per_step) * _F8 * _DRAW_COPIES
    segments = 0
    if cfg.checkpoint is not None:
        segments = (cfg.total_steps // max(1, cfg.checkpoint.every_steps) + 1) * _F8 * 8
    return int(pool + layout + draws + segments)


def available_bytes() -> int:
    """MemAvailable from /proc/meminfo, else half the physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (OSError, ValueError):
        return 4 << 30


def check_fits(cfg: SimConfig, *, brute_force: bool, available: int | None = None) -> int:
    """The estimate in bytes; InputError naming it when it exceeds the usable memory."""
    need = estimate_bytes(cfg, brute_force=brute_force)
    have = available_bytes() if available is None else available
    if need > have * _USABLE:
        method = "--brute-force draws every rank" if brute_force else "this simulation"
        raise InputError(
            f"{method} needs about {format_size(need)} of memory but {format_size(have)} is available"
            f" ({cfg.num_ranks:,} ranks, {cfg.steps:,} steps x {cfg.runs} runs):"
            " lower --ranks, --steps or --runs" + ("" if not brute_force else ", or drop --brute-force")
        )
    return need
