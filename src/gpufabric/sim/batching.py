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

import functools
import heapq
import itertools
import math
import operator
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from gpufabric.errors import InputError
from gpufabric.model.inference import KV_WATERMARK, ReplicaPerf

__all__ = ["EngineConfig", "EngineResult", "MissRule", "run_engine"]

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
    # Prompt tokens every request shares (a system prompt) that the prefix cache holds once per
    # engine (vLLM automatic prefix caching, SGLang RadixAttention): prefill computes the rest.
    prefix_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class MissRule:
    """Stop a run as soon as a percentile limit is missed whatever the rest of the run does.

    ``ttft`` and ``tpot`` hold (summary key, quantile, limit) triples. A request's TTFT is
    counted from ``ttft_origin_s[i]`` plus ``ttft_extra_s``: a lower bound of the TTFT the
    caller computes afterwards (sim/serving.py adds the API server's term, >= 0, to exactly
    this sum), and its TPOT is ``(finish - first) / (output - 1)``, the caller's formula.
    The q-quantile of n values (numpy's linear interpolation) is at least the j-th smallest,
    j = floor(q (n - 1)), so once n - j values exceed the limit it does too: the verdict of
    a stopped run is the one the whole run would give, exactly (tests/sim/test_miss_rule.py).
    """

    ttft_origin_s: np.ndarray
    ttft_extra_s: float = 0.0
    ttft: tuple[tuple[str, float, float], ...] = ()
    tpot: tuple[tuple[str, float, float], ...] = ()


def _needed(q: float, n: int) -> int:
    """Values above a limit that put the q-quantile of n values above it: n - floor(q (n - 1)),
    the index taken a hair low so that rounding in numpy's index never makes it larger."""
    return n - max(0, math.floor(q * (n - 1) - 1e-9))


class _Missed(Exception):  # not an error: how a stopped run leaves the event loop
    """A MissRule limit is missed (args[0]: its summary key)."""


class _Counter:
    """Running counts of requests beyond each limit of a MissRule (one check per request)."""

    __slots__ = ("extra", "origin", "tpot", "ttft")

    def __init__(self, rule: MissRule, out_l: list[int]) -> None:
        n = len(out_l)
        multi = n - out_l.count(1)  # requests with a TPOT (out_l >= 1; the caller drops the others)
        self.origin = [float(x) for x in rule.ttft_origin_s.tolist()]
        self.extra = rule.ttft_extra_s
        # (key, limit, [values still allowed beyond it before the limit is missed])
        self.ttft = [(key, limit, [_needed(q, n)]) for key, q, limit in rule.ttft]
        self.tpot = [(key, limit, [_needed(q, multi)]) for key, q, limit in rule.tpot]

    def first_token(self, r: int, t: float) -> None:
        x = t - self.origin[r] + self.extra
        for key, limit, left in self.ttft:
            if x > limit:
                left[0] -= 1
                if left[0] <= 0:
                    raise _Missed(key)

    def finished(self, first: float, finish: float, out: int) -> None:
        if out <= 1:
            return
        x = (finish - first) / (out - 1.0)
        for key, limit, left in self.tpot:
            if x > limit:
                left[0] -= 1
                if left[0] <= 0:
                    raise _Missed(key)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineResult:
    """Per-request times and the inter-token gaps (value, how many token gaps had it); a run
    stopped by a MissRule has ``missed`` (the summary key of the missed limit) and no figures."""

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
    missed: str = ""


class _Sigmas(dict[int, tuple[float, float]]):
    """k -> (sigma, sigma^2 / 2) of the mean-one lognormal factor of coefficient of variation
    cv / sqrt(k) (a jump of k iterations averages k independent ones), each computed once."""

    __slots__ = ("cv2",)

    def __init__(self, cv: float) -> None:
        super().__init__()
        self.cv2 = cv * cv

    def __missing__(self, k: int) -> tuple[float, float]:
        s2 = math.log1p(self.cv2 / k)
        v = self[k] = (math.sqrt(s2), s2 / 2)
        return v


def _normals(rng: np.random.Generator, cv: float) -> Callable[[], float]:
    """The next standard normal of the jitter, drawn 4096 at a time as the run needs them (a
    C-level iterator: the engine draws one per iteration); zeros without jitter, whose factor
    exp(0 z - 0) is then exactly 1."""
    if cv * cv <= 0:
        return itertools.repeat(0.0).__next__

    def blocks() -> Iterator[list[float]]:
        # Blocks of 256 doubling to 4096: a short run draws few. The stream is the same at any
        # block size (numpy draws normals one after another; tests/sim/test_batching_speed.py).
        size = 256
        while True:
            yield rng.standard_normal(size).tolist()
            size = min(2 * size, 4096)

    return itertools.chain.from_iterable(blocks()).__next__


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
    stop: MissRule | None = None,
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
    phases, as in a steady state) instead of all at once. ``stop``: end the run as soon as
    one of its limits is missed (open loop only; the result then has ``missed`` set).

    Raises:
        InputError: neither or both of arrival_s and concurrency, no KV room, or a budget below the batch.
    """
    n = int(prompt.size)
    if (arrival_s is None) == (concurrency is None) or n == 0:
        raise InputError("an engine run needs requests and exactly one of arrival times and a concurrency")
    if cfg.max_batch < 1 or cfg.token_budget < 1:
        raise InputError("an engine needs max_batch >= 1 and a token budget >= 1")
    q = 1 + cfg.perf.draft_tokens  # query tokens per decoding sequence per iteration
    if cfg.token_budget < q:
        raise InputError(f"token budget {cfg.token_budget} is below one decode step's {q} tokens")
    prompt_l = list(map(int, prompt.tolist()))
    out_l = list(map(int, output.tolist()))
    if min(out_l) < 1:
        out_l = [max(1, o) for o in out_l]
    longest = max(map(operator.add, prompt_l, out_l))
    cap = float(cfg.kv_capacity_tokens)
    if cap * (1.0 - KV_WATERMARK) < longest:
        raise InputError(
            f"the KV cache ({cap:,.0f} tokens, {KV_WATERMARK:.0%} kept free) cannot hold the longest request"
            f" ({longest:,} tokens); raise tp or pp"
        )
    sim = _Engine(cfg, prompt_l, out_l, np.random.default_rng(seed))
    sim.load(arrival_s, concurrency, client_delay_s, extra_delay_s, stagger_s)
    if stop is not None:
        if arrival_s is None:
            raise InputError("a miss rule needs an open loop (arrival times)")
        sim.counter = _Counter(stop, out_l)
    try:
        sim.run()
    except _Missed as missed:
        return sim.result(missed=str(missed.args[0]))
    return sim.result()


class _Engine:
    """The state of one engine run and its scheduling steps (``run_engine`` drives it).

    Decoding sequences are kept as sums, not lists: with ``g`` tokens per iteration, the
    summed context of the decode batch at decode iteration ``it`` is ``s_ctx + b g it``.
    """

    __slots__ = (
        "arr", "b", "batch_area", "busy", "cached", "cap", "cfg", "counter", "ctx_slope", "decode_s", "delays", "done", "finish", "finished",
        "first", "fin_it", "g", "gaps", "heap", "issued", "it", "iterations", "it_s", "join_ctx",
        "join_it", "kv_prefill", "n", "order", "out_l", "pending", "preemptions", "prefilling", "produced",
        "prompt_l", "q", "rng", "s_cached", "s_ctx", "reserve", "s1", "h1", "max_batch", "token_budget", "shared", "sigmas", "stall", "state", "t", "todo", "waiting", "weights", "znext",
    )  # fmt: skip

    def __init__(self, cfg: EngineConfig, prompt_l: list[int], out_l: list[int], rng: np.random.Generator) -> None:
        perf = cfg.perf
        n = len(prompt_l)
        self.cfg, self.n, self.rng = cfg, n, rng
        self.prompt_l, self.out_l = prompt_l, out_l
        self.q = 1 + perf.draft_tokens
        self.g = perf.tokens_per_step  # tokens it emits per iteration (speculative decoding: > 1)
        self.cap = float(cfg.kv_capacity_tokens)
        self.it_s = perf.iteration_scalar_fn()
        self.decode_s = perf.decode_scalar_fn()  # it_s(b, ctx, 0.0, 0.0), tabulated per batch size
        # d(iteration time)/d(context token): the KV read, the only term that grows within a jump.
        self.ctx_slope = perf.kv_read_bytes_per_token / perf.hbm_bytes_per_s * perf.straggler_factor
        # Iteration time jitter: a factor exp(sigma z - sigma^2 / 2), (sigma, sigma^2 / 2) = sigmas[k].
        self.znext = _normals(rng, cfg.jitter_cv)
        self.sigmas = _Sigmas(cfg.jitter_cv)
        self.s1, self.h1 = self.sigmas[1]  # an explicit iteration's
        self.token_budget, self.max_batch = cfg.token_budget, cfg.max_batch
        # Admit only with room for the whole prompt above a watermark (vLLM keeps 1% of the
        # blocks back), so new prompts do not evict running decodes at once.
        self.reserve = KV_WATERMARK * self.cap
        self.arr = [0.0] * n
        self.first = [math.nan] * n
        self.finish = [math.nan] * n
        prefix = 0 if cfg.prefilled else cfg.prefix_tokens
        # Prompt tokens served from the prefix cache (vLLM computes at least the last one).
        self.cached = [min(prefix, p - 1) for p in prompt_l] if prefix > 0 else [0] * n
        self.shared = float(prefix)  # the cached prefix's KV, held once
        self.s_cached = 0.0  # sum of ``cached`` over the decoding requests (their context counts it)
        # Tokens still to prefill (the prompt; after a preemption, prompt + produced), less the cached prefix.
        self.todo = [p - c for p, c in zip(prompt_l, self.cached, strict=True)]
        self.done = list(self.cached)  # tokens prefilled so far, the cached prefix included
        self.produced = [0.0] * n  # tokens emitted so far (kept over a preemption)
        self.join_it = [0] * n  # decode iteration at which the request joined the decode batch
        self.join_ctx = [0.0] * n  # its context then
        self.fin_it = [0] * n  # decode iteration at which it finishes
        self.state = [0] * n  # 0 waiting, 1 prefilling, 2 decoding, 3 finished
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []
        self.heap: list[tuple[int, int]] = []  # (finish iteration, request), lazily deleted on preemption
        self.order: list[int] = []  # admission order of running requests: preemption victims from the end
        self.b = 0  # decoding sequences
        self.s_ctx = 0.0  # sum over decoding of (join_ctx - g join_it)
        self.kv_prefill = 0.0  # KV tokens held by partly prefilled requests
        self.it = 0  # decode iterations so far
        self.t = 0.0
        self.issued = 0
        # Requests not yet at the engine, (time, request): a heap, or a queue when they come sorted.
        self.pending: list[tuple[float, int]] | deque[tuple[float, int]] = []
        self.delays: list[float] = []  # each request's way to the engine (Python floats: read per request)
        self.finished = self.preemptions = self.iterations = 0
        self.busy = self.batch_area = 0.0
        self.gaps: list[float] = []
        self.weights: list[float] = []
        self.stall = 0.0  # time the decoding sequences spent stalled behind prefill-only iterations
        self.counter: _Counter | None = None  # a MissRule's counts, when the run has one

    def load(
        self,
        arrival_s: np.ndarray | None,
        concurrency: int | None,
        client_delay_s: float,
        extra_delay_s: np.ndarray | None,
        stagger_s: float,
    ) -> None:
        """The requests' way to the engine: arrival times, or the closed loop's first requests."""
        n = self.n
        if arrival_s is not None:
            self.pending = list(zip(arrival_s.tolist(), range(n), strict=True))
            if n > 1 and bool(np.all(arrival_s[1:] >= arrival_s[:-1])):
                # Sorted (the callers' case): the heap would pop them in this order, (time, index).
                self.pending = deque(self.pending)
            else:
                heapq.heapify(self.pending)
            self.issued = n
        else:
            self.issued = min(int(concurrency or 1), n)
            starts = np.sort(self.rng.uniform(0.0, stagger_s, self.issued)) if stagger_s > 0 else np.zeros(self.issued)
            self.pending = [(float(starts[i]), i) for i in range(self.issued)]
        delays = self.rng.exponential(client_delay_s, n) if client_delay_s > 0 else np.zeros(n)
        if extra_delay_s is not None:
            delays = delays + extra_delay_s
            if arrival_s is None:
                self.pending = [(a + float(delays[i]), i) for a, i in self.pending]
        self.delays = delays.tolist()

    # -- bookkeeping of one request -------------------------------------------------------

    def complete(self, r: int) -> None:
        self.state[r] = 3
        self.finish[r] = self.t
        self.finished += 1
        if self.counter is not None:
            first = self.first[r]
            if math.isnan(first):  # a one-token request of the decode pool: its token is its first
                self.counter.first_token(r, self.t)
            else:
                self.counter.finished(first, self.t, self.out_l[r])
        if self.issued < self.n:  # closed loop (its pending requests are a heap): the client's next request
            assert isinstance(self.pending, list)
            heapq.heappush(self.pending, (self.t + self.delays[self.issued], self.issued))
            self.issued += 1

    def join(self, r: int) -> None:
        """Request ``r`` (prefilled) joins the decode batch, or completes if it has no token left."""
        steps = math.ceil((self.out_l[r] - self.produced[r]) / self.g - 1e-9)
        if steps <= 0:
            self.complete(r)
            return
        it = self.it
        self.state[r] = 2
        self.join_it[r] = it
        ctx = self.join_ctx[r] = self.prompt_l[r] + self.produced[r]
        self.fin_it[r] = it + steps
        self.b += 1
        self.s_ctx += ctx - self.g * it
        self.s_cached += self.cached[r]
        heapq.heappush(self.heap, (it + steps, r))

    def finish_ready(self) -> None:
        heap, state, fin_it = self.heap, self.state, self.fin_it
        while heap and heap[0][0] <= self.it:
            f, r = heapq.heappop(heap)
            if state[r] != 2 or fin_it[r] != f:
                continue  # a preempted request's old entry
            self.b -= 1
            self.s_ctx -= self.join_ctx[r] - self.g * self.join_it[r]
            self.s_cached -= self.cached[r]
            self.complete(r)

    def preempt(self) -> bool:
        """Free the most recently admitted running request; False when none is running."""
        while self.order:
            r = self.order.pop()
            if self.state[r] == 2:
                self.produced[r] = min(float(self.out_l[r]), self.produced[r] + self.g * (self.it - self.join_it[r]))
                self.b -= 1
                self.s_ctx -= self.join_ctx[r] - self.g * self.join_it[r]
                self.s_cached -= self.cached[r]
            elif self.state[r] == 1:
                self.kv_prefill -= self.done[r] - self.cached[r]
                self.prefilling.remove(r)
            else:
                continue
            self.state[r] = 0
            # Recompute: the prompt and every token produced so far are prefilled again.
            self.todo[r] = self.prompt_l[r] + int(self.produced[r]) - self.cached[r]
            self.done[r] = self.cached[r]
            self.waiting.appendleft(r)
            self.preemptions += 1
            return True
        return False

    def record(self, dt: float, k: int) -> None:
        """``k`` decode iterations of ``dt`` in all: the gaps the decoding streams saw."""
        b = self.b
        self.gaps.append(dt / k + self.stall)
        self.weights.append(float(b))
        if k > 1:
            self.gaps.append(dt / k)
            self.weights.append(float(b * (k - 1)))
        self.stall = 0.0
        self.t += dt
        self.busy += dt
        self.batch_area += b * dt
        self.iterations += k

    def kv_used(self) -> float:
        """KV tokens held: the decoding contexts (the shared prefix once), partly prefilled prompts."""
        return self.s_ctx + self.b * self.g * self.it + self.kv_prefill - self.s_cached + self.shared

    # -- one scheduling step --------------------------------------------------------------

    def run(self) -> None:
        # The hot loop: attributes read once into locals (the engine's cost is Python steps per
        # request); kv_used(), the decode jump, record() and finish_ready()'s test inlined with
        # the same arithmetic in the same order (results bit-identical to the method versions).
        cfg, n, g, cap, slope = self.cfg, self.n, self.g, self.cap, self.ctx_slope
        prefilled, mixed, max_batch = cfg.prefilled, cfg.mixed, cfg.max_batch
        pending, waiting, prefilling, arr, heap = self.pending, self.waiting, self.prefilling, self.arr, self.heap
        one_token = not prefilled and self.counter is None and max(self.out_l) == 1
        if one_token and isinstance(pending, deque):
            self.run_prefill_only()
            return
        gaps, weights, decode_s, znext, sigmas = self.gaps, self.weights, self.decode_s, self.znext, self.sigmas
        ceil, sqrt, exp = math.ceil, math.sqrt, math.exp
        popnext = pending.popleft if isinstance(pending, deque) else functools.partial(heapq.heappop, pending)
        while self.finished < n:
            t = self.t
            while pending and pending[0][0] <= t:
                a, r = popnext()
                arr[r] = a
                waiting.append(r)
            b = self.b
            if b + len(prefilling) == 0 and not waiting:
                self.t = pending[0][0]  # idle until the next arrival
                continue
            it = self.it
            # b g: the decode batch's tokens per iteration, once per pass (int x float is a slow
            # Python multiply; b * g * it is (b * g) * it, the same float).
            bg = b * g
            kv_used = self.s_ctx + bg * it + self.kv_prefill - self.s_cached + self.shared
            # Decodes need room for this iteration's tokens first (vLLM V1 allocates, else preempts).
            while b and kv_used + bg > cap and self.preempt():
                kv_used = self.kv_used()
                b = self.b
                bg = b * g
            if waiting or prefilling or not b:  # (else: decodes only, the common case, tested once)
                if prefilled and self.decode_pool_step(kv_used):
                    continue
                running = b + len(prefilling)
                room = cap - kv_used - bg
                admissible = not prefilled and bool(waiting) and running < max_batch and room >= 1
                prefill_pending = bool(prefilling) or admissible
                run_decodes = b > 0 and (mixed or not prefill_pending)
                jump = run_decodes and not prefill_pending
            else:
                running = b
                jump = True
            if not jump:
                self.chunked_step(kv_used, run_decodes)
            else:
                # A run of identical decode iterations until a request finishes, the cache
                # fills, or (open loop) an arrival could be admitted.
                # (Comparisons, not min()/max() calls: the same integers, a third fewer calls.)
                k = heap[0][0] - it
                if k > MAX_JUMP:
                    k = MAX_JUMP
                free = cap - kv_used
                if free < (k + 1) * bg:  # else the cache holds k more iterations (fit >= k; a float
                    fit = int(free // bg)  # division: not the last unit of margin), skip the division
                    if fit < k:
                        k = fit
                if k < 1:
                    k = 1
                t0 = decode_s(b, self.s_ctx + bg * it)
                dt = slope * b * g
                if pending and running < max_batch:
                    gap = pending[0][0] - t
                    if not gap > 0.0:
                        gap = 0.0
                    if dt > 1e-15:  # smallest k with k t0 + dt k (k - 1) / 2 >= gap
                        half = t0 - dt / 2
                        k_arr = ceil((-half + sqrt(half * half + 2 * dt * gap)) / dt)
                    else:
                        k_arr = ceil(gap / t0)
                    if k_arr < k:
                        k = k_arr if k_arr > 1 else 1
                sig, half_s2 = sigmas[k]
                span = k * (t0 + (t0 + dt * (k - 1))) / 2 * exp(sig * znext() - half_s2)
                gaps.append(span / k + self.stall)
                weights.append(float(b))
                if k > 1:
                    gaps.append(span / k)
                    weights.append(float(b * (k - 1)))
                self.stall = 0.0
                self.t = t + span
                self.busy += span
                self.batch_area += b * span
                self.iterations += k
                self.it = it + k
            if heap and heap[0][0] <= self.it:
                self.finish_ready()

    def run_prefill_only(self) -> None:
        """:meth:`run` for requests that all end at their first token, arriving sorted (a
        disaggregated design's prefill engine): no decode batch ever forms, so every pass is a
        prefill iteration of :meth:`chunked_step` and each finished prompt completes. The same
        arithmetic in the same order (with no decodes, kv_used() is kv_prefill + shared exactly);
        about half the Python steps."""
        n, cap, shared, budget0 = self.n, self.cap, self.shared, self.token_budget
        pending, waiting, prefilling, arr = self.pending, self.waiting, self.prefilling, self.arr
        assert isinstance(pending, deque)
        todo, done, cached, first, finish = self.todo, self.done, self.cached, self.first, self.finish
        state, produced = self.state, self.produced
        it_s, znext, s1, h1, exp = self.it_s, self.znext, self.s1, self.h1, math.exp
        slots = self.max_batch - self.b  # b = 0 throughout
        t, kv_prefill, finished = self.t, self.kv_prefill, self.finished
        busy, area, iterations = self.busy, self.batch_area, self.iterations
        while finished < n:
            while pending and pending[0][0] <= t:
                a, r = pending.popleft()
                arr[r] = a
                waiting.append(r)
            if not prefilling and not waiting:
                t = pending[0][0]  # idle until the next arrival
                continue
            chunks, sizes, tokens, attn = self.pick_chunks(budget0, cap - (kv_prefill + shared), slots)
            if not chunks:  # partial prompts fill the cache: chunked_step's preemption, b = 0
                self.kv_prefill = kv_prefill
                if not self.preempt():
                    raise InputError("the KV cache cannot make progress; raise tp, pp or kv_memory_fraction")
                kv_prefill = self.kv_prefill
                continue
            dt_iter = it_s(0, 0.0, float(tokens), attn) * exp(s1 * znext() - h1)
            t += dt_iter
            busy += dt_iter
            iterations += 1
            area += len(chunks) * dt_iter
            for r, c in zip(chunks, sizes, strict=True):
                todo[r] -= c
                done[r] += c
                kv_prefill += c
                if todo[r] == 0:  # first token, which is the last: join() completes it at once
                    prefilling.remove(r)
                    kv_prefill -= done[r] - cached[r]
                    done[r] = cached[r]
                    first[r] = finish[r] = t
                    produced[r] = 1.0
                    state[r] = 3
                    finished += 1
        self.t, self.kv_prefill, self.finished = t, kv_prefill, finished
        self.busy, self.batch_area, self.iterations = busy, area, iterations

    def decode_pool_step(self, kv_used: float) -> bool:
        """Decode pool: admission allocates the transferred KV (no prefill compute); True when
        this step ran an iteration (or found nothing to do)."""
        cfg, waiting, prompt_l, g = self.cfg, self.waiting, self.prompt_l, self.g
        admitted = []
        while waiting and self.b < cfg.max_batch and kv_used + prompt_l[waiting[0]] + (self.b + 1) * g <= self.cap:
            r = waiting.popleft()
            self.order.append(r)
            kv_used += prompt_l[r]
            self.join(r)
            admitted.append(r)
        if self.b == 0:
            if not waiting:
                return True
            raise InputError("the KV cache cannot admit a transferred request; raise tp or pp")
        if not admitted:
            return False
        b = self.b
        dt = self.decode_s(b, self.s_ctx + b * g * self.it) * math.exp(self.s1 * self.znext() - self.h1)
        self.gaps.append(dt + self.stall)  # record(dt, 1), inlined (dt / 1 is dt)
        self.weights.append(float(b))
        self.stall = 0.0
        self.t += dt
        self.busy += dt
        self.batch_area += b * dt
        self.iterations += 1
        self.it += 1
        first, t = self.first, self.t
        for r in admitted:
            if first[r] != first[r]:  # NaN: no token yet
                first[r] = t
                if self.counter is not None:
                    self.counter.first_token(r, t)
        if self.heap[0][0] <= self.it:
            self.finish_ready()
        return True

    def pick_chunks(self, budget: int, room: float, slots: int) -> tuple[list[int], list[int], int, float]:
        """This iteration's prefill chunks within ``budget`` tokens and ``room`` KV: partly
        prefilled prompts first, then waiting requests admitted in order while fewer than
        ``slots`` prefill; (requests, chunk sizes, tokens, summed attention), a chunk of c
        tokens adding ``c (done + c / 2)`` in chunk order. Admission marks the request
        prefilling."""
        todo, done, waiting, prefilling = self.todo, self.done, self.waiting, self.prefilling
        chunks: list[int] = []  # requests with a chunk this iteration, in order
        sizes: list[int] = []
        tokens = 0
        attn = 0.0
        for r in prefilling:
            c = todo[r]  # int(min(todo, budget, room)), as comparisons (the hot path)
            if budget < c:
                c = budget
            if room < c:
                c = int(room)
            if c <= 0:
                break
            chunks.append(r)
            sizes.append(c)
            tokens += c
            attn += c * (done[r] + c / 2.0)
            budget -= c
            room -= c
        reserve = self.reserve
        while waiting and budget > 0 and len(prefilling) < slots:
            r = waiting[0]
            if room < todo[r] + reserve:
                break
            waiting.popleft()
            c = todo[r]
            if budget < c:
                c = budget
            if room < c:
                c = int(room)
            self.state[r] = 1
            prefilling.append(r)
            self.order.append(r)
            chunks.append(r)
            sizes.append(c)
            tokens += c
            attn += c * (done[r] + c / 2.0)
            budget -= c
            room -= c
        return chunks, sizes, tokens, attn

    def chunked_step(self, kv_used: float, run_decodes: bool) -> None:
        """One explicit iteration: the decodes (when they run) and the prefill chunks
        :meth:`pick_chunks` fits in what the decodes leave of the token budget and KV room."""
        b, g = self.b, self.g
        budget = self.token_budget - (b * self.q if run_decodes else 0)
        room = self.cap - kv_used - (b * g if run_decodes else 0)
        todo, done, prefilling = self.todo, self.done, self.prefilling
        chunks, sizes, tokens, attn = self.pick_chunks(budget, room, self.max_batch - b)
        if not chunks:
            if b:
                run_decodes = True  # nothing fits the cache this iteration: decode on
            elif not self.preempt():
                raise InputError("the KV cache cannot make progress; raise tp, pp or kv_memory_fraction")
            else:
                return
        dec = b if run_decodes else 0
        ctx = self.s_ctx + b * g * self.it if run_decodes else 0.0
        dt_iter = self.it_s(dec, ctx, float(tokens), attn) * math.exp(self.s1 * self.znext() - self.h1)
        self.t += dt_iter
        self.busy += dt_iter
        self.iterations += 1
        if run_decodes:  # record(dt_iter, 1), inlined (dt / 1 is dt)
            self.gaps.append(dt_iter + self.stall)
            self.weights.append(float(b))
            self.stall = 0.0
            self.batch_area += b * dt_iter
            self.it += 1
        else:
            self.batch_area += len(chunks) * dt_iter
            if b:
                self.stall += dt_iter
        # KV held by partial prompts: integer token counts, exact in a float in any order.
        kv = self.kv_prefill
        first, cached = self.first, self.cached
        for r, c in zip(chunks, sizes, strict=True):
            todo[r] -= c
            done[r] += c
            kv += c
            if todo[r] == 0:  # its last chunk ran: this iteration samples its first token
                prefilling.remove(r)
                kv -= done[r] - cached[r]
                done[r] = cached[r]
                if first[r] != first[r]:  # NaN: no token yet (a recomputed request has one)
                    first[r] = self.t
                    self.produced[r] = 1.0
                    if self.counter is not None:
                        self.counter.first_token(r, self.t)
                self.join(r)
        self.kv_prefill = kv

    def result(self, missed: str = "") -> EngineResult:
        first_a = np.array(self.first)
        finish_a = np.array(self.finish)
        return EngineResult(
            arrival_s=np.array(self.arr),
            # A one-token request of the decode pool completes at admission: its token is its last.
            first_token_s=np.where(np.isnan(first_a), finish_a, first_a),
            finish_s=finish_a,
            output_tokens=np.array(self.out_l, dtype=float),
            gap_s=np.array(self.gaps),
            gap_weight=np.array(self.weights),
            preemptions=self.preemptions,
            iterations=self.iterations,
            mean_batch=self.batch_area / self.busy if self.busy > 0 else 0.0,
            busy_s=self.busy,
            missed=missed,
        )
