"""Iteration-level simulation of one continuous-batching engine (vLLM V1 / SGLang scheduling).

What one engine does each iteration (vLLM V1 ``Scheduler.schedule``, docs.vllm.ai "Optimization
and Tuning: chunked prefill"; SGLang ``--chunked-prefill-size``, ``--enable-mixed-chunk``):

- **Token budget.** An iteration computes at most ``token_budget`` tokens
  (``max_num_batched_tokens``). Running requests are scheduled first: every decoding
  sequence takes its ``1 + draft_tokens`` tokens, then partly prefilled prompts continue,
  then waiting requests are admitted in arrival order, each prompt cut into a chunk that
  fits what is left of the budget (chunked prefill, Sarathi-Serve, OSDI'24).
- **Admission control.** A waiting request is admitted only while fewer than
  ``max_batch`` requests run (``max_num_seqs``) and the KV cache has room for its prompt
  above a 1% watermark;
  otherwise it waits, so a full cache shows up in TTFT, not in TPOT.
- **Preemption.** When a decode step needs KV blocks that are not free, the most recently
  admitted running request is preempted (its blocks freed; recomputed later from its prompt
  and the tokens it had produced: vLLM V1's recompute mode) and goes back to the head of
  the queue. Its first token was already sent, so the recompute stretches its TPOT.
- **Mixed or separate.** ``mixed`` (vLLM V1, SGLang with mixed chunks): prefill chunks ride
  in decode iterations. Otherwise (SGLang's default) a prefill batch runs alone and every
  decoding sequence stalls behind it.
- **Prefilled arrivals** (the decode pool of a disaggregated design): the KV cache arrives
  over the fabric, admission allocates it, and the first token comes from the first decode
  iteration.

The simulation jumps over runs of identical decode iterations (the batch only changes when
a request joins, leaves or is preempted, and each iteration's time is affine in the summed
context), so its cost is a few Python steps per request, not per token. Iteration times get
a mean-one lognormal jitter (coefficient of variation shrunk by the square root of a jump's
length: independent per-iteration noise averaged over it).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from gpufabric.errors import InputError
from gpufabric.model.inference import KV_WATERMARK, ReplicaPerf

__all__ = ["EngineConfig", "EngineResult", "run_engine"]

#: Longest stretch of decode iterations simulated as one jump (a simulation parameter, not
#: a physical one): long enough to keep the cost per request small, short enough that the
#: per-jump jitter still varies along a long output.
MAX_JUMP = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """One engine (one replica, or one pipeline lane of it)."""

    perf: ReplicaPerf
    kv_capacity_tokens: float
    max_batch: int
    token_budget: int
    mixed: bool = True
    prefilled: bool = False  # requests arrive with their KV cache (disaggregated decode pool)
    jitter_cv: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineResult:
    """Per-request times and the inter-token gaps (value, how many token gaps had it)."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    output_tokens: np.ndarray
    gap_s: np.ndarray
    gap_weight: np.ndarray
    preemptions: int
    iterations: int
    mean_batch: float
    busy_s: float


class _Jitter:
    """Mean-one lognormal factors of coefficient of variation cv / sqrt(k), from pre-drawn normals."""

    def __init__(self, rng: np.random.Generator, cv: float) -> None:
        self.cv2 = cv * cv
        self.rng = rng
        self.normals: list[float] = []
        self.i = 0

    def __call__(self, k: int) -> float:
        if self.cv2 <= 0:
            return 1.0
        if self.i >= len(self.normals):
            self.normals = self.rng.standard_normal(4096).tolist()
            self.i = 0
        z = self.normals[self.i]
        self.i += 1
        s2 = math.log1p(self.cv2 / k)
        return math.exp(math.sqrt(s2) * z - s2 / 2)


def run_engine(
    cfg: EngineConfig,
    *,
    prompt: np.ndarray,
    output: np.ndarray,
    arrival_s: np.ndarray | None = None,
    concurrency: int | None = None,
    client_delay_s: float = 0.0,
    extra_delay_s: np.ndarray | None = None,
    stagger_s: float = 0.0,
    seed: int = 0,
) -> EngineResult:
    """Simulate the requests ``prompt[i], output[i]``: open loop at ``arrival_s`` (sorted) or
    closed loop with ``concurrency`` clients (all start at 0, each sends its next request when
    its previous one completes, as ``vllm bench serve --max-concurrency`` does). In the
    closed loop a client's next request reaches the engine after an exponential delay of
    mean ``client_delay_s`` (the client's and API server's handling: response parsing, HTTP,
    tokenisation); without it N identical clients would stay in lock-step forever, which
    real ones do not. ``extra_delay_s[i]`` is added to request i's way to the engine (the
    prefill and KV transfer in front of a disaggregated decode pool). ``stagger_s``: the
    clients' first requests go out at uniform random times in [0, stagger_s) (independent
    phases, as in a steady state) instead of all at once.

    Raises:
        InputError: neither or both of arrival_s and concurrency, no KV room, or a budget below the batch.
    """
    n = int(prompt.size)
    if (arrival_s is None) == (concurrency is None) or n == 0:
        raise InputError("an engine run needs requests and exactly one of arrival times and a concurrency")
    if cfg.max_batch < 1 or cfg.token_budget < 1:
        raise InputError("an engine needs max_batch >= 1 and a token budget >= 1")
    perf = cfg.perf
    q = 1 + perf.draft_tokens  # query tokens per decoding sequence per iteration
    g = perf.tokens_per_step  # tokens it emits per iteration (speculative decoding: > 1)
    if cfg.token_budget < q:
        raise InputError(f"token budget {cfg.token_budget} is below one decode step's {q} tokens")
    cap = float(cfg.kv_capacity_tokens)
    prompt_l = [int(x) for x in prompt.tolist()]
    out_l = [max(1, int(x)) for x in output.tolist()]
    longest = max(p + o for p, o in zip(prompt_l, out_l, strict=True))
    if cap * (1.0 - KV_WATERMARK) < longest:
        raise InputError(
            f"the KV cache ({cap:,.0f} tokens, {KV_WATERMARK:.0%} kept free) cannot hold the longest request"
            f" ({longest:,} tokens); raise tp or pp"
        )
    rng = np.random.default_rng(seed)
    it_s = perf.iteration_scalar_s
    # d(iteration time)/d(context token): the KV read, the only term that grows within a jump.
    ctx_slope = perf.kv_read_bytes_per_token / perf.hbm_bytes_per_s * perf.straggler_factor
    jitter = _Jitter(rng, cfg.jitter_cv)
    arr = [0.0] * n
    first = [math.nan] * n
    finish = [math.nan] * n
    todo = list(prompt_l)  # tokens still to prefill (the prompt; after a preemption, prompt + produced)
    done = [0] * n  # tokens prefilled so far (KV held while prefilling)
    produced = [0.0] * n  # tokens emitted so far (kept over a preemption)
    join_it = [0] * n  # decode iteration at which the request joined the decode batch
    join_ctx = [0.0] * n  # its context then
    fin_it = [0] * n  # decode iteration at which it finishes
    state = [0] * n  # 0 waiting, 1 prefilling, 2 decoding, 3 finished
    waiting: deque[int] = deque()
    prefilling: list[int] = []
    heap: list[tuple[int, int]] = []  # (finish iteration, request), lazily deleted on preemption
    order: list[int] = []  # admission order of running requests: preemption victims from the end
    b = 0  # decoding sequences
    s_ctx = 0.0  # sum over decoding of (join_ctx - g join_it): their context is s_ctx + b g it
    kv_prefill = 0.0  # KV tokens held by partly prefilled requests
    it = 0  # decode iterations so far
    t = 0.0
    issued = 0
    # Requests not yet at the engine: (time, request), earliest first.
    pending: list[tuple[float, int]] = []
    if arrival_s is not None:
        pending = [(float(x), i) for i, x in enumerate(arrival_s.tolist())]
        heapq.heapify(pending)
        issued = n
    else:
        issued = min(int(concurrency or 1), n)
        starts = np.sort(rng.uniform(0.0, stagger_s, issued)) if stagger_s > 0 else np.zeros(issued)
        pending = [(float(starts[i]), i) for i in range(issued)]
    delays = rng.exponential(client_delay_s, n) if client_delay_s > 0 else np.zeros(n)
    if extra_delay_s is not None:
        delays = delays + extra_delay_s
        if arrival_s is None:
            pending = [(a + float(delays[i]), i) for a, i in pending]
    finished = 0
    preemptions = 0
    iterations = 0
    busy = 0.0
    batch_area = 0.0
    gaps: list[float] = []
    weights: list[float] = []
    stall = 0.0  # time the decoding sequences spent stalled behind prefill-only iterations

    def complete(r: int) -> None:
        nonlocal finished, issued
        state[r] = 3
        finish[r] = t
        finished += 1
        if issued < n:  # closed loop: the client sends its next request
            heapq.heappush(pending, (t + float(delays[issued]), issued))
            issued += 1

    def join(r: int) -> None:
        nonlocal b, s_ctx
        steps = max(0, math.ceil((out_l[r] - produced[r]) / g - 1e-9))
        if steps == 0:
            complete(r)
            return
        state[r] = 2
        join_it[r] = it
        join_ctx[r] = prompt_l[r] + produced[r]
        fin_it[r] = it + steps
        b += 1
        s_ctx += join_ctx[r] - g * it
        heapq.heappush(heap, (it + steps, r))

    def finish_ready() -> None:
        nonlocal b, s_ctx
        while heap and heap[0][0] <= it:
            f, r = heapq.heappop(heap)
            if state[r] != 2 or fin_it[r] != f:
                continue  # a preempted request's old entry
            b -= 1
            s_ctx -= join_ctx[r] - g * join_it[r]
            complete(r)

    def preempt() -> bool:
        """Free the most recently admitted running request; False when none is running."""
        nonlocal b, s_ctx, kv_prefill, preemptions
        while order:
            r = order.pop()
            if state[r] == 2:
                produced[r] = min(float(out_l[r]), produced[r] + g * (it - join_it[r]))
                b -= 1
                s_ctx -= join_ctx[r] - g * join_it[r]
            elif state[r] == 1:
                kv_prefill -= done[r]
                prefilling.remove(r)
            else:
                continue
            state[r] = 0
            # Recompute: the prompt and every token produced so far are prefilled again.
            todo[r] = prompt_l[r] + int(produced[r])
            done[r] = 0
            waiting.appendleft(r)
            preemptions += 1
            return True
        return False

    def record(dt: float, k: int) -> None:
        nonlocal t, busy, batch_area, iterations, stall
        gaps.append(dt / k + stall)
        weights.append(float(b))
        if k > 1:
            gaps.append(dt / k)
            weights.append(float(b * (k - 1)))
        stall = 0.0
        t += dt
        busy += dt
        batch_area += b * dt
        iterations += k

    while finished < n:
        while pending and pending[0][0] <= t:
            a, r = heapq.heappop(pending)
            arr[r] = a
            waiting.append(r)
        if b + len(prefilling) == 0 and not waiting:
            t = pending[0][0]  # idle until the next arrival
            continue
        kv_used = s_ctx + b * g * it + kv_prefill
        # Decodes need room for this iteration's tokens first (vLLM V1 allocates, else preempts).
        while b and kv_used + b * g > cap and preempt():
            kv_used = s_ctx + b * g * it + kv_prefill
        if cfg.prefilled:
            # Decode pool: admission allocates the transferred KV; no prefill compute.
            admitted = []
            while waiting and b < cfg.max_batch and kv_used + prompt_l[waiting[0]] + (b + 1) * g <= cap:
                r = waiting.popleft()
                order.append(r)
                kv_used += prompt_l[r]
                join(r)
                admitted.append(r)
            if b == 0:
                if not waiting:
                    continue
                raise InputError("the KV cache cannot admit a transferred request; raise tp or pp")
            if admitted:
                ctx = s_ctx + b * g * it
                record(it_s(b, ctx, 0.0, 0.0) * jitter(1), 1)
                it += 1
                for r in admitted:
                    if math.isnan(first[r]):
                        first[r] = t
                finish_ready()
                continue
        running = b + len(prefilling)
        room = cap - kv_used - b * g
        admissible = not cfg.prefilled and bool(waiting) and running < cfg.max_batch and room >= 1
        prefill_pending = bool(prefilling) or admissible
        run_decodes = b > 0 and (cfg.mixed or not prefill_pending)
        if run_decodes and not prefill_pending:
            # A run of identical decode iterations until a request finishes, the cache fills,
            # or (open loop) an arrival could be admitted.
            k = min(MAX_JUMP, heap[0][0] - it)
            k = max(1, min(k, int((cap - kv_used) // (b * g))))
            ctx0 = s_ctx + b * g * it
            t0 = it_s(b, ctx0, 0.0, 0.0)
            if pending and running < cfg.max_batch:
                dt = ctx_slope * b * g
                gap = max(0.0, pending[0][0] - t)
                if dt > 1e-15:  # smallest k with k t0 + dt k (k - 1) / 2 >= gap
                    half = t0 - dt / 2
                    k_arr = math.ceil((-half + math.sqrt(half * half + 2 * dt * gap)) / dt)
                else:
                    k_arr = math.ceil(gap / t0)
                k = max(1, min(k, k_arr))
            t_last = t0 + ctx_slope * b * g * (k - 1)
            record(k * (t0 + t_last) / 2 * jitter(k), k)
            it += k
            finish_ready()
            continue
        # One explicit iteration: the decodes (when they run) and prefill chunks in the budget.
        budget = cfg.token_budget - (b * q if run_decodes else 0)
        room = cap - kv_used - (b * g if run_decodes else 0)
        chunks: list[tuple[int, int]] = []
        for r in prefilling:
            c = int(min(todo[r], budget, room))
            if c <= 0:
                break
            chunks.append((r, c))
            budget -= c
            room -= c
        while waiting and budget > 0 and b + len(prefilling) < cfg.max_batch:
            r = waiting[0]
            # Admit only with room for the whole prompt above a watermark (vLLM keeps 1% of the
            # blocks back), so new prompts do not evict running decodes at once.
            if room < todo[r] + KV_WATERMARK * cap:
                break
            waiting.popleft()
            c = int(min(todo[r], budget, room))
            state[r] = 1
            prefilling.append(r)
            order.append(r)
            chunks.append((r, c))
            budget -= c
            room -= c
        if not chunks:
            if b:
                run_decodes = True  # nothing fits the cache this iteration: decode on
            elif not preempt():
                raise InputError("the KV cache cannot make progress; raise tp, pp or kv_memory_fraction")
            else:
                continue
        tokens = float(sum(c for _, c in chunks))
        attn = float(sum(c * (done[r] + c / 2.0) for r, c in chunks))
        dec = b if run_decodes else 0
        ctx = s_ctx + b * g * it if run_decodes else 0.0
        dt_iter = it_s(dec, ctx, tokens, attn) * jitter(1)
        if run_decodes:
            record(dt_iter, 1)
            it += 1
        else:
            t += dt_iter
            busy += dt_iter
            batch_area += len(chunks) * dt_iter
            iterations += 1
            if b:
                stall += dt_iter
        for r, c in chunks:
            todo[r] -= c
            done[r] += c
            kv_prefill += c
        for r, _c in chunks:
            if todo[r] == 0:
                prefilling.remove(r)
                kv_prefill -= done[r]
                done[r] = 0
                if math.isnan(first[r]):
                    first[r] = t  # the last chunk's iteration samples the first token
                    produced[r] = 1.0
                join(r)
        finish_ready()
    first_a = np.array(first)
    finish_a = np.array(finish)
    return EngineResult(
        arrival_s=np.array(arr),
        # A one-token request of the decode pool completes at admission: its token is its last.
        first_token_s=np.where(np.isnan(first_a), finish_a, first_a),
        finish_s=finish_a,
        output_tokens=np.array(out_l, dtype=float),
        gap_s=np.array(gaps),
        gap_weight=np.array(weights),
        preemptions=preemptions,
        iterations=iterations,
        mean_batch=batch_area / busy if busy > 0 else 0.0,
        busy_s=busy,
    )
