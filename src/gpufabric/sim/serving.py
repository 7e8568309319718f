"""Request-level simulator of an LLM serving deployment (docs/inference.md).

One pass over n requests, vectorised with numpy except the FCFS dispatch of a shared
queue to c > 1 servers, which is a heap walk (the Kiefer-Wolfowitz recursion is
inherently sequential; with one server it is Lindley's recursion, done with a cumulative
minimum). What is simulated:

- Poisson arrivals at ``rate_rps``; prompt and output lengths lognormal (or fixed).
- Prefill: a central FCFS queue over the prefill replicas (DistServe's and Mooncake's
  global scheduler). Service = the model's prefill time x the slowest of tp per-rank
  lognormal draws (a TP group waits for its straggler).
- Disaggregated: the KV cache then crosses the fabric (model/inference.py
  ``KvTransfer``: mean from the alpha-beta model, plus per-message jitter and hiccups
  from the fabric's catalog entry).
- Decode: continuous batching. A request holds one of ``decode_replicas x max_batch``
  slots (pooled: the scheduler balances replicas) for (output-1) steps; the step time
  is the model's roofline at the mean batch the replica ran during that request's life,
  found by a fixed point (start from Little's law, then measure the occupancy of the
  simulated intervals). Colocated: every prefill that runs on the request's replica
  while it decodes stalls it (prefill-first scheduling as in vLLM; DistServe section 2.3).
- TTFT = arrival to prefill end (the first token comes out of prefill). TPOT = (decode
  end - prefill end) / (output - 1), so the KV transfer and any slot wait count in TPOT.
- Goodput = requests meeting both the TTFT and the TPOT SLO per second of arrivals.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpufabric.errors import InputError
from gpufabric.model.inference import ServingConfig, Tokens

__all__ = [
    "ServingConfig",
    "ServingResult",
    "Tokens",
    "fcfs_starts",
    "max_concurrency",
    "mean_active",
    "simulate_serving",
]

#: Fixed-point passes for the decode batch size; the second pass changes p99 TPOT by
#: well under 1% in the worked example (docs/inference.md), a third by nothing visible.
BATCH_PASSES = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingResult:
    """Per-request latencies (arrays) and their summary."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    kv_transfer_s: np.ndarray
    duration_s: float
    mean_decode_batch: float
    prefill_utilisation: float
    output_tokens_per_s: float
    ttft_slo_s: float
    tpot_slo_s: float

    def summary(self) -> dict[str, Any]:
        ok = (self.ttft_s <= self.ttft_slo_s) & (np.nan_to_num(self.tpot_s) <= self.tpot_slo_s)
        pct = np.percentile
        tp = self.tpot_s[np.isfinite(self.tpot_s)]
        return {
            "requests": int(self.ttft_s.size),
            "duration_s": self.duration_s,
            "ttft_p50_s": float(pct(self.ttft_s, 50)),
            "ttft_p99_s": float(pct(self.ttft_s, 99)),
            "ttft_mean_s": float(self.ttft_s.mean()),
            "tpot_p50_s": float(pct(tp, 50)) if tp.size else 0.0,
            "tpot_p99_s": float(pct(tp, 99)) if tp.size else 0.0,
            "kv_transfer_p50_s": float(pct(self.kv_transfer_s, 50)),
            "kv_transfer_p99_s": float(pct(self.kv_transfer_s, 99)),
            "slo_attainment": float(ok.mean()),
            "goodput_rps": float(ok.sum() / self.duration_s),
            "mean_decode_batch": self.mean_decode_batch,
            "prefill_utilisation": self.prefill_utilisation,
            "output_tokens_per_s": self.output_tokens_per_s,
        }


def fcfs_starts(arrival_s: np.ndarray, service_s: np.ndarray, servers: int) -> tuple[np.ndarray, np.ndarray]:
    """Start times and server index of an FCFS queue with ``servers`` identical servers.

    ``arrival_s`` must be sorted. One server: Lindley's recursion W = P - cummin(P) on the
    partial sums P of (service - interarrival). More: the earliest-free server (heap).
    """
    n = arrival_s.size
    if n == 0:
        return arrival_s.copy(), np.zeros(0, dtype=np.int64)
    if servers == 1:
        partial = np.concatenate(([0.0], np.cumsum(service_s[:-1] - np.diff(arrival_s))))
        wait = partial - np.minimum(np.minimum.accumulate(partial), 0.0)
        return arrival_s + wait, np.zeros(n, dtype=np.int64)
    free = [(0.0, k) for k in range(servers)]
    starts = [0.0] * n
    who = [0] * n
    replace = heapq.heapreplace
    for i, (a, s) in enumerate(zip(arrival_s.tolist(), service_s.tolist(), strict=True)):
        t, k = free[0]
        begin = a if a > t else t
        starts[i] = begin
        who[i] = k
        replace(free, (begin + s, k))
    return np.array(starts), np.array(who, dtype=np.int64)


def _event_order(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted event times, active count after each event, and each event's sorted position."""
    times = np.concatenate((starts, ends))
    order = np.argsort(times, kind="stable")
    count = np.cumsum(np.concatenate((np.ones(starts.size), -np.ones(ends.size)))[order])
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    return times[order], count, position


def max_concurrency(starts: np.ndarray, ends: np.ndarray) -> int:
    """Most intervals [starts, ends) active at once."""
    return int(_event_order(starts, ends)[1].max()) if starts.size else 0


def mean_active(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Time-average number of the intervals [starts, ends) active over each of them.

    The integral of the active count is known at every event (the queries are events),
    so no search is needed: a running area over the sorted events, read at each
    interval's own start and end positions.
    """
    t, count, position = _event_order(starts, ends)
    area = np.concatenate(([0.0], np.cumsum(count[:-1] * np.diff(t))))
    n = starts.size
    span = ends - starts
    inside = area[position[n:]] - area[position[:n]]
    return np.where(span > 0, inside / np.where(span > 0, span, 1.0), 1.0)


@dataclass(frozen=True, slots=True)
class BusyIndex:
    """Cumulative busy time of servers whose jobs never overlap on one server."""

    keys: np.ndarray
    durations: np.ndarray
    cumulative: np.ndarray
    offset: float

    @classmethod
    def build(cls, owner: np.ndarray, start: np.ndarray, dur: np.ndarray, horizon: float) -> BusyIndex:
        # One sorted axis for all servers: server k's time t sits at k * offset + t.
        offset = 2.0 * horizon + 1.0
        key = owner * offset + start
        order = np.argsort(key, kind="stable")
        d = dur[order]
        return cls(key[order], d, np.concatenate(([0.0], np.cumsum(d))), offset)

    def _to(self, x: np.ndarray) -> np.ndarray:
        sort = np.argsort(x, kind="stable")  # sorted needles keep searchsorted cache-friendly
        j = np.empty_like(sort)
        j[sort] = np.searchsorted(self.keys, x[sort], side="right") - 1
        jj = np.maximum(j, 0)
        return np.where(j >= 0, self.cumulative[jj] + np.minimum(x - self.keys[jj], self.durations[jj]), 0.0)

    def between(self, owner: np.ndarray, q_start: np.ndarray, q_end: np.ndarray) -> np.ndarray:
        """Busy time of server ``owner`` within [q_start, q_end] (times below the build horizon)."""
        base = owner * self.offset
        return self._to(base + q_end) - self._to(base + q_start)


def _lognormal_factor(rng: np.random.Generator, cv: float, shape: tuple[int, ...]) -> np.ndarray:
    """Mean-one lognormal multipliers with coefficient of variation ``cv``."""
    if cv == 0:
        return np.ones(shape)
    sigma = np.sqrt(np.log1p(cv**2))
    return np.exp(sigma * rng.standard_normal(shape) - sigma**2 / 2)


def simulate_serving(cfg: ServingConfig) -> ServingResult:
    """Simulate ``cfg.requests`` requests; deterministic for a given seed.

    Raises:
        InputError: no replicas, no slots, or a disaggregated design without a KV model.
    """
    if cfg.prefill_replicas < 1 or cfg.max_batch < 1 or cfg.requests < 1:
        raise InputError("a serving design needs at least one prefill replica, one decode slot and one request")
    if cfg.disaggregated and cfg.kv is None:
        raise InputError("a disaggregated design needs a KV-transfer model")
    rng = np.random.default_rng(cfg.seed)
    n = cfg.requests
    perf = cfg.perf
    # Arrivals as unit-rate exponentials scaled by the rate: coupled across rates (same seed),
    # so a higher rate compresses the same sample path.
    arrival = np.cumsum(rng.standard_exponential(n)) / cfg.rate_rps
    prompt = cfg.prompt.draw(rng, n)
    out = cfg.output.draw(rng, n)

    # Prefill: slowest of tp ranks (max of tp lognormals = lognormal of the max normal).
    if perf.tp > 1 and cfg.jitter_cv > 0:
        sigma = np.sqrt(np.log1p(cfg.jitter_cv**2))
        straggle = np.exp(sigma * rng.standard_normal((n, perf.tp)).max(axis=1) - sigma**2 / 2)
    else:
        straggle = _lognormal_factor(rng, cfg.jitter_cv, (n,))
    prefill = perf.prefill_s(prompt) * straggle
    p_start, p_server = fcfs_starts(arrival, prefill, cfg.prefill_replicas)
    p_end = p_start + prefill
    ttft = p_end - arrival

    if cfg.disaggregated:
        kv_model = cfg.kv
        assert kv_model is not None
        kv = kv_model.time_s(prompt) + np.abs(rng.standard_normal(n)) * kv_model.jitter_s
        kv += (rng.random(n) < kv_model.hiccup_prob) * kv_model.hiccup_s
        replicas = cfg.decode_replicas
    else:
        kv = np.zeros(n)
        replicas = cfg.prefill_replicas
    ready = p_end + kv
    steps = np.maximum(out - 1, 0)
    ctx = float(np.mean(prompt + out / 2))  # mean KV length a step reads per sequence
    noise = _lognormal_factor(rng, cfg.jitter_cv, (n,)) ** (1 / np.sqrt(np.maximum(steps, 1)))
    noise *= perf.straggler_factor
    slots = replicas * cfg.max_batch

    # Little's law start: batch b with b = (rate/replicas) E[steps] step(b), capped at the slots.
    b = 1.0
    for _ in range(100):
        b = min(
            cfg.max_batch, max(1.0, cfg.rate_rps / replicas * float(steps.mean()) * float(perf.decode_step_s(b, ctx)))
        )
    batch = np.full(n, b)
    order = np.argsort(ready, kind="stable")
    d_start = ready.copy()
    busy: BusyIndex | None = None
    stall: np.ndarray | None = None
    for _ in range(BATCH_PASSES):
        dur = steps * perf.decode_step_s(batch, ctx) * noise
        if not cfg.disaggregated:
            # Prefills on this replica while the request decodes stall it. The window is
            # the previous pass's total (the stall itself lengthens it): a fixed point
            # carried across the batch passes.
            window = dur if stall is None else dur + stall
            if busy is None:
                busy = BusyIndex.build(
                    p_server, p_start, prefill, 4.0 * float(max(p_end.max(), (d_start + window).max()))
                )
            stall = busy.between(p_server, d_start, d_start + window)
            dur = dur + stall
        if slots < n and max_concurrency(ready, ready + dur) > slots:
            s_sorted, _ = fcfs_starts(ready[order], dur[order], slots)
            d_start = np.empty(n)
            d_start[order] = s_sorted
        d_end = d_start + dur
        batch = np.clip(mean_active(d_start, d_end) / replicas, 1.0, cfg.max_batch)
    tpot = np.where(steps > 0, (d_end - p_end) / np.maximum(steps, 1), np.nan)
    duration = float(arrival[-1])
    return ServingResult(
        ttft_s=ttft,
        tpot_s=tpot,
        kv_transfer_s=kv,
        duration_s=duration,
        mean_decode_batch=float(np.mean(batch)),
        prefill_utilisation=float(prefill.sum() / (cfg.prefill_replicas * max(float(p_end.max()), 1e-12))),
        output_tokens_per_s=float(out.sum() / max(float(d_end.max()), 1e-12)),
        ttft_slo_s=cfg.ttft_slo_s,
        tpot_slo_s=cfg.tpot_slo_s,
    )
