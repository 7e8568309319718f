"""Request-level simulator of an LLM serving deployment (docs/inference.md).

The engines are simulated iteration by iteration as they schedule (sim/batching.py:
token budget, chunked prefill mixed into decode iterations, admission control on the KV
cache, preemption with recompute); this module routes the load to them:

- Open loop: Poisson arrivals at ``rate_rps`` for the whole service, round-robin over the
  engines (a replica of pp stages is pp engines); one engine is simulated with its share.
- Closed loop: ``concurrency`` clients, each sending its next request when its previous
  one completes (AIPerf, genai-perf, ``vllm bench serve --max-concurrency``); the busiest
  engine gets ceil(N / engines) of them, starting with independent phases.
- Disaggregated: one prefill engine runs its share of prompts (the others' requests take
  the sojourn of its request nearest in time, adjusted to their prompt); the KV cache crosses the
  fabric (model/inference.py ``KvTransfer``: alpha-beta mean, per-message jitter and
  hiccups); one decode engine admits its share when its cache has room. In the closed
  loop the prefill pool is taken as unsaturated (each prompt prefilled on arrival).
- TTFT = arrival to the first token plus the API server's request overhead and a term
  linear in the tokens/s its replica streams (model/inference.py API_S_PER_TOKEN_RATE); a request
  waiting for KV room or a batch slot waits in TTFT. TPOT = (last token - first token) /
  (output - 1); ITL = every gap between two tokens of a stream (weighted percentiles).
- Goodput = the share of requests meeting the TTFT and TPOT SLOs times the request rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpufabric.errors import InputError
from gpufabric.model.inference import ServingConfig, Tokens
from gpufabric.sim.batching import EngineConfig, EngineResult, MissRule, run_engine

__all__ = ["ServingConfig", "ServingResult", "Tokens", "simulate_serving"]

#: Most requests one simulated engine runs: its p99 then rests on 1,000 samples beyond it,
#: and a 1e6-request run stays within seconds (the engine is a Python event loop).
MAX_ENGINE_REQUESTS = 100_000


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
    itl_p50_s: float = 0.0
    itl_p99_s: float = 0.0
    preemptions: int = 0
    request_rate_rps: float = 0.0  # completed requests per second across the service
    missed: str = ""  # stopped at this summary key's limit (ServingConfig.stop_on_miss): no figures

    def summary(self) -> dict[str, Any]:
        if self.missed:
            return {**dict.fromkeys(_SUMMARY_KEYS, math.nan), self.missed: math.inf, "missed": self.missed}
        ok = (self.ttft_s <= self.ttft_slo_s) & (np.nan_to_num(self.tpot_s) <= self.tpot_slo_s)
        tp = self.tpot_s[np.isfinite(self.tpot_s)]
        ttft50, ttft99 = percentiles(self.ttft_s, (50, 99))
        tpot50, tpot99 = percentiles(tp, (50, 99)) if tp.size else (0.0, 0.0)
        kv50, kv99 = percentiles(self.kv_transfer_s, (50, 99))
        return {
            "requests": int(self.ttft_s.size),
            "duration_s": self.duration_s,
            "ttft_p50_s": ttft50,
            "ttft_p99_s": ttft99,
            "ttft_mean_s": float(self.ttft_s.mean()),
            "tpot_p50_s": tpot50,
            "tpot_p99_s": tpot99,
            "kv_transfer_p50_s": kv50,
            "kv_transfer_p99_s": kv99,
            "slo_attainment": float(ok.mean()),
            "goodput_rps": float(ok.mean() * self.request_rate_rps),
            "mean_decode_batch": self.mean_decode_batch,
            "prefill_utilisation": self.prefill_utilisation,
            "output_tokens_per_s": self.output_tokens_per_s,
            "itl_p50_s": self.itl_p50_s,
            "itl_p99_s": self.itl_p99_s,
            "preemptions": self.preemptions,
        }


#: The figures of a summary (a stopped run's are NaN but the missed one).
_SUMMARY_KEYS = (
    "requests",
    "duration_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "ttft_mean_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "kv_transfer_p50_s",
    "kv_transfer_p99_s",
    "slo_attainment",
    "goodput_rps",
    "mean_decode_batch",
    "prefill_utilisation",
    "output_tokens_per_s",
    "itl_p50_s",
    "itl_p99_s",
    "preemptions",
)


def percentiles(values: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """``np.percentile(values, qs)`` (its default, linear method) bit for bit: numpy's index
    (n - 1) q and its two-sided interpolation, on the sorted values. np.percentile itself
    calls np.unique, whose first call imports numpy.ma: ~10 ms of every serving plan's
    start-up (issue 32). NaN (sorted last) and empty inputs go to numpy."""
    s = np.sort(values).tolist()
    n = len(s)
    if n == 0 or s[-1] != s[-1]:
        return [float(x) for x in np.percentile(values, qs).tolist()]
    out = []
    for q in qs:
        v = (n - 1) * (q / 100)
        if v >= n - 1:  # numpy takes the last value on both sides, at index -1
            a = b = s[-1]
            t = v - -1.0
        else:
            i = math.floor(v)
            a, b = s[i], s[i + 1]
            t = v - i
        diff = b - a
        out.append(b - diff * (1 - t) if t >= 0.5 else a + diff * t)
    return out


def _miss_rule(cfg: ServingConfig, origin_s: np.ndarray) -> MissRule | None:
    """The engine's stop rule for ``cfg.stop_on_miss``; TTFT counted from ``origin_s``."""
    if not cfg.stop_on_miss:
        return None
    return MissRule(
        ttft_origin_s=origin_s,
        ttft_extra_s=cfg.request_overhead_s,
        ttft=tuple(x for x in cfg.stop_on_miss if x[0].startswith("ttft_")),
        tpot=tuple(x for x in cfg.stop_on_miss if x[0].startswith("tpot_")),
    )


def _missed(cfg: ServingConfig, missed: str) -> ServingResult:
    empty = np.zeros(0)
    return ServingResult(
        ttft_s=empty,
        tpot_s=empty,
        kv_transfer_s=empty,
        duration_s=math.nan,
        mean_decode_batch=math.nan,
        prefill_utilisation=math.nan,
        output_tokens_per_s=math.nan,
        ttft_slo_s=cfg.ttft_slo_s,
        tpot_slo_s=cfg.tpot_slo_s,
        missed=missed,
    )


def _lognormal_factor(rng: np.random.Generator, cv: float, shape: tuple[int, ...]) -> np.ndarray:
    """Mean-one lognormal multipliers with coefficient of variation ``cv``."""
    if cv == 0:
        return np.ones(shape)
    sigma = np.sqrt(np.log1p(cv**2))
    return np.exp(sigma * rng.standard_normal(shape) - sigma**2 / 2)


def _percentile_weighted(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    if values.size == 0:
        return 0.0
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][min(values.size - 1, int(np.searchsorted(cum, q / 100.0 * cum[-1])))])


def _engine(cfg: ServingConfig, *, prefilled: bool = False, prefill_only: bool = False) -> EngineConfig:
    return EngineConfig(
        perf=cfg.perf,
        kv_capacity_tokens=cfg.kv_capacity_tokens,
        max_batch=cfg.max_batch,
        token_budget=max(cfg.token_budget, 1 + cfg.perf.draft_tokens),
        mixed=cfg.mixed,
        prefilled=prefilled,
        jitter_cv=cfg.jitter_cv,
        prefix_tokens=cfg.prefix_tokens,
    )


def simulate_serving(cfg: ServingConfig) -> ServingResult:
    """Simulate ``cfg.requests`` requests through the engines of one design; deterministic per seed.

    Every replica runs its own scheduler (sim/batching.py) and a round-robin router spreads
    the requests: one engine is simulated with its share (every r-th arrival of the Poisson
    stream, or its share of the clients), which the others mirror. Disaggregated: one
    prefill engine is simulated (prompt only), the KV cache crosses the fabric, and one
    decode engine takes its share of the transferred requests (admission allocates their KV;
    a full cache makes them wait, which lands in TTFT). ``cfg.stop_on_miss`` stops an open-loop
    run at its first certain miss (sim/batching.py ``MissRule``); a closed loop runs whole.

    Raises:
        InputError: no replicas, no slots, or a disaggregated design without a KV model.
    """
    if cfg.prefill_replicas < 1 or cfg.max_batch < 1 or cfg.requests < 1:
        raise InputError("a serving design needs at least one prefill replica, one decode slot and one request")
    if cfg.disaggregated and cfg.kv is None:
        raise InputError("a disaggregated design needs a KV-transfer model")
    if (cfg.rate_rps is None) == (cfg.concurrency is None):
        raise InputError("a serving load is either rate_rps or concurrency")
    rng = np.random.default_rng(cfg.seed)
    n = cfg.requests
    lanes = cfg.perf.pp  # a pipeline-parallel replica runs pp micro-batch lanes (model/inference.py)
    engines = (cfg.prefill_replicas if not cfg.disaggregated else cfg.decode_replicas) * lanes
    cap = MAX_ENGINE_REQUESTS if cfg.engine_requests is None else min(cfg.engine_requests, MAX_ENGINE_REQUESTS)
    # Enough of the stream that every simulated engine gets its share, up to its cap.
    n = min(n, cap * max(engines, cfg.prefill_replicas * lanes))
    prompt = cfg.prompt.draw(rng, n)
    out = cfg.output.draw(rng, n)
    if cfg.concurrency is not None:
        res, arrival, kv = _closed_loop(cfg, rng, prompt, out, engines, cap)
    elif cfg.disaggregated:
        res, arrival, kv = _open_loop_disaggregated(cfg, rng, prompt, out, engines, cap)
    else:
        arrival_all = _arrivals(cfg, rng, n)
        idx = np.arange(0, n, engines)
        res = run_engine(
            _engine(cfg),
            prompt=prompt[idx],
            output=out[idx],
            arrival_s=arrival_all[idx],
            seed=cfg.seed + 1,
            stop=_miss_rule(cfg, arrival_all[idx]),
        )
        arrival, kv = res.arrival_s, np.zeros(0)
    if res.missed:
        return _missed(cfg, res.missed)
    return _result(cfg, res, arrival, kv, engines)


def _arrivals(cfg: ServingConfig, rng: np.random.Generator, n: int) -> np.ndarray:
    """Poisson arrival times of the whole service's stream."""
    return np.cumsum(rng.standard_exponential(n)) / float(cfg.rate_rps or 0.0)


def _closed_loop(
    cfg: ServingConfig, rng: np.random.Generator, prompt: np.ndarray, out: np.ndarray, engines: int, cap: int
) -> tuple[EngineResult, np.ndarray, np.ndarray]:
    """The busiest engine with ceil(N / engines) clients: (its result, arrival times, KV transfer times)."""
    assert cfg.concurrency is not None
    n = prompt.size
    clients = -(-cfg.concurrency // engines)
    m = max(1, min(n, -(-n // engines), cap))
    # Clients start with independent phases spread over one request's duration: the
    # steady state the tools measure after warm-up. All at once, identical clients
    # would move in lock-step clumps that the engine's long prefill iterations keep
    # together, a start-up transient.
    ctx = cfg.prompt.mean + cfg.output.mean / 2
    cycle = float(cfg.perf.prefill_s(cfg.prompt.mean, cfg.prefix_tokens)) + (
        cfg.output.mean - 1
    ) / cfg.perf.tokens_per_step * float(cfg.perf.decode_step_s(min(clients, cfg.max_batch), ctx))
    if not cfg.disaggregated:
        res = run_engine(
            _engine(cfg),
            prompt=prompt[:m],
            output=out[:m],
            concurrency=clients,
            client_delay_s=cfg.client_delay_s,
            stagger_s=cycle,
            seed=cfg.seed + 1,
        )
        return res, res.arrival_s, np.zeros(0)
    # Decode-side closed loop; each prompt's prefill (alone on an idle share of the
    # prefill pool) and KV transfer happen before its first token.
    pre = cfg.perf.prefill_s(prompt[:m], cfg.prefix_tokens) * _lognormal_factor(rng, cfg.jitter_cv, (m,))
    assert cfg.kv is not None
    kv = cfg.kv.time_s(prompt[:m])
    res = run_engine(
        _engine(cfg, prefilled=True),
        prompt=prompt[:m],
        output=out[:m],
        concurrency=clients,
        client_delay_s=cfg.client_delay_s,
        extra_delay_s=pre + kv,
        stagger_s=cycle,
        seed=cfg.seed + 1,
    )
    return res, res.arrival_s - pre - kv, kv


def _open_loop_disaggregated(
    cfg: ServingConfig, rng: np.random.Generator, prompt: np.ndarray, out: np.ndarray, engines: int, cap: int
) -> tuple[EngineResult, np.ndarray, np.ndarray]:
    """One prefill engine, the KV transfer, one decode engine: (its result, arrival times, KV times)."""
    n = prompt.size
    arrival_all = _arrivals(cfg, rng, n)
    # One prefill engine with its round-robin share; the others are alike, so each
    # request's prefill sojourn is taken from that engine's request nearest in time.
    p_eng = cfg.prefill_replicas * cfg.perf.pp
    idx0 = np.arange(0, n, p_eng)
    sojourn = _prefill_sojourn(_engine(cfg), prompt[idx0], arrival_all[idx0], cfg.seed + 2)
    near = np.minimum(np.arange(n) // p_eng, idx0.size - 1)
    # The engine saw those prompts; scale each sojourn's prefill part to this request's prompt.
    own = cfg.perf.prefill_s(prompt, cfg.prefix_tokens) - cfg.perf.prefill_s(prompt[idx0][near], cfg.prefix_tokens)
    ready = arrival_all + np.maximum(sojourn[near] + own, 0.0)
    assert cfg.kv is not None
    kv_all = cfg.kv.time_s(prompt) + np.abs(rng.standard_normal(n)) * cfg.kv.jitter_s
    kv_all += (rng.random(n) < cfg.kv.hiccup_prob) * cfg.kv.hiccup_s
    ready = ready + kv_all
    order = np.argsort(ready, kind="stable")
    idx = order[::engines][:cap]  # the decode engine's share, its first ``cap`` in time
    res = run_engine(
        _engine(cfg, prefilled=True),
        prompt=prompt[idx],
        output=out[idx],
        arrival_s=ready[idx],
        seed=cfg.seed + 1,
        stop=_miss_rule(cfg, arrival_all[idx]),
    )
    return res, arrival_all[idx], kv_all[idx]


#: Prefill sojourns of a disaggregated design's prefill engine, by that engine's whole input:
#: a search step that changes only the decode pool (its size, or a fabric's KV transfer) draws
#: the same requests and reruns the same prefill engine, with the same result. Runs of up to
#: _MEMO_REQUESTS requests (the planner's sizing and final check), at most _MEMO_ENTRIES kept
#: (a few MB); the cached arrays are read-only.
_PREFILL_MEMO: dict[tuple[Any, ...], np.ndarray] = {}
_MEMO_REQUESTS = 4096
_MEMO_ENTRIES = 64


def _prefill_sojourn(eng: EngineConfig, prompt: np.ndarray, arrival_s: np.ndarray, seed: int) -> np.ndarray:
    """First token minus arrival of each request through one prefill engine (prompt only)."""
    key = (eng, seed, prompt.dtype.str, prompt.tobytes(), arrival_s.dtype.str, arrival_s.tobytes())
    memo = prompt.size <= _MEMO_REQUESTS
    hit = _PREFILL_MEMO.get(key) if memo else None
    if hit is not None:
        return hit
    r = run_engine(eng, prompt=prompt, output=np.ones(prompt.size), arrival_s=arrival_s, seed=seed)
    sojourn = r.first_token_s - r.arrival_s
    if memo:
        sojourn.setflags(write=False)
        if len(_PREFILL_MEMO) >= _MEMO_ENTRIES:
            _PREFILL_MEMO.clear()
        _PREFILL_MEMO[key] = sojourn
    return sojourn


def _result(cfg: ServingConfig, res: EngineResult, arrival: np.ndarray, kv: np.ndarray, engines: int) -> ServingResult:
    """Per-request latencies from the simulated engine; the API server's terms in TTFT."""
    o = res.output_tokens
    tpot = np.where(o > 1, (res.finish_s - res.first_token_s) / np.maximum(o - 1, 1), np.nan)
    start = float(np.min(arrival))
    duration = max(float(np.max(res.finish_s)) - start, 1e-12)
    # One API server per replica streams its lanes' tokens; a new request gets past that stream.
    replica_tokens_per_s = float(o.sum()) / duration * cfg.perf.pp
    ttft = res.first_token_s - arrival + cfg.request_overhead_s + cfg.api_s_per_token_rate * replica_tokens_per_s
    return ServingResult(
        ttft_s=ttft,
        tpot_s=tpot,
        kv_transfer_s=kv if kv.size else np.zeros(ttft.size),
        duration_s=duration,
        mean_decode_batch=res.mean_batch,
        prefill_utilisation=res.busy_s / duration,
        output_tokens_per_s=float(o.sum()) * engines / duration,
        request_rate_rps=ttft.size * engines / duration,
        ttft_slo_s=cfg.ttft_slo_s,
        tpot_slo_s=cfg.tpot_slo_s,
        itl_p50_s=_percentile_weighted(res.gap_s, res.gap_weight, 50),
        itl_p99_s=_percentile_weighted(res.gap_s, res.gap_weight, 99),
        preemptions=res.preemptions,
    )
