"""Serving load generator: open loop (Poisson) or closed loop (N clients) against an
OpenAI-compatible streaming endpoint, reporting what ``vllm bench serve``, AIPerf and
genai-perf report.

Semantics (vllm ``benchmarks/serve.py``; AIPerf/genai-perf concurrency mode):

- **Closed loop** (``concurrency``): N clients; each sends its next request as soon as its
  previous one completes, so exactly N requests are in flight (``vllm bench serve
  --max-concurrency N --request-rate inf``).
- **Open loop** (``rate_rps``): requests start at Poisson times whatever is in flight.
- Per request: TTFT = first streamed token - send; TPOT = (last - first) / (output - 1);
  ITL = every gap between two streamed chunks. Output tokens/s = tokens / wall time.

The transport is a function ``send(prompt, max_tokens) -> iterator of arrival times of
streamed tokens`` (``openai_stream`` posts ``/v1/completions`` with ``stream: true``), so
the scheduling here is tested against any server and the HTTP client against a real one.
``gpufabric bench inference --url`` runs it as a part of its recorded run
(``bench.inference_service``).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpufabric.errors import InputError

__all__ = ["LoadResult", "LoadSpec", "RequestTiming", "load_for", "openai_stream", "run_load"]

Send = Callable[[str, int], Iterator[float]]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadSpec:
    """What to send: how many requests, their sizes, and the load shape."""

    requests: int
    prompt_tokens: int
    output_tokens: int
    concurrency: int | None = None
    rate_rps: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate_rps is None):
            raise InputError("a load is either concurrency (closed loop) or rate_rps (open loop)")
        if self.requests < 1 or self.prompt_tokens < 1 or self.output_tokens < 1:
            raise InputError("requests, prompt_tokens and output_tokens must be at least 1")
        if self.concurrency is not None and not 1 <= self.concurrency <= 10_000:
            raise InputError(f"concurrency must be between 1 and 10,000, got {self.concurrency}")
        if self.rate_rps is not None and not (0 < self.rate_rps <= 1e6 and np.isfinite(self.rate_rps)):
            raise InputError(f"rate_rps must be positive and finite, got {self.rate_rps}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestTiming:
    """One request as the client saw it (times in seconds from the run's start)."""

    sent_s: float
    token_s: tuple[float, ...]
    error: str = ""

    @property
    def ttft_s(self) -> float:
        return self.token_s[0] - self.sent_s if self.token_s else float("nan")


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadResult:
    """Every request's timing and the summary the serving benchmarks print."""

    spec: LoadSpec
    timings: list[RequestTiming] = field(default_factory=list)
    duration_s: float = 0.0
    max_in_flight: int = 0
    interrupted: bool = False  # Ctrl-C stopped the run; the timings are what finished
    interruption: KeyboardInterrupt | None = None  # what stopped it (SIGTERM arrives as a subclass)

    def summary(self) -> dict[str, float | int]:
        ok = [t for t in self.timings if not t.error and t.token_s]
        ttft = np.array([t.ttft_s for t in ok])
        tpot = np.array([(t.token_s[-1] - t.token_s[0]) / (len(t.token_s) - 1) for t in ok if len(t.token_s) > 1])
        itl = np.concatenate([np.diff(t.token_s) for t in ok if len(t.token_s) > 1] or [np.zeros(0)])
        tokens = sum(len(t.token_s) for t in ok)

        def pct(x: np.ndarray, q: float) -> float:
            return float(np.percentile(x, q)) if x.size else float("nan")

        return {
            "requests": len(self.timings),
            "failed": len(self.timings) - len(ok),
            "duration_s": self.duration_s,
            "max_in_flight": self.max_in_flight,
            "request_throughput_rps": len(ok) / self.duration_s if self.duration_s else 0.0,
            "output_tokens_per_s": tokens / self.duration_s if self.duration_s else 0.0,
            "ttft_p50_s": pct(ttft, 50),
            "ttft_p99_s": pct(ttft, 99),
            "tpot_p50_s": pct(tpot, 50),
            "tpot_p99_s": pct(tpot, 99),
            "itl_p50_s": pct(itl, 50),
            "itl_p99_s": pct(itl, 99),
        }


def load_for(spec: Any, *, requests: int | None = None, concurrency: int | None = None, seed: int = 0) -> LoadSpec:
    """The load of an inference spec's traffic (its concurrency or rate, mean token counts);
    ``concurrency`` replaces the spec's load with a closed loop of that many clients.

    ``requests`` defaults to 20 per client in a closed loop (``vllm bench serve`` sweeps use
    ``--num-prompts 20 x concurrency``) and to 60 s of arrivals in an open loop.
    """
    t = spec.workload.traffic
    clients = concurrency if concurrency is not None else t.concurrency
    rate = None if clients is not None else t.rate_rps
    if requests is None:
        requests = 20 * clients if clients is not None else max(1, round(60 * (rate or 1.0)))
    return LoadSpec(
        requests=requests,
        prompt_tokens=max(1, round(t.prompt_tokens.mean)),
        output_tokens=max(1, round(t.output_tokens.mean)),
        concurrency=clients,
        rate_rps=rate,
        seed=seed,
    )


def synthetic_prompt(tokens: int, seed: int) -> str:
    """About ``tokens`` tokens of text: common short words are one token in Llama-style tokenizers."""
    words = ("the", "of", "and", "to", "in", "is", "for", "on", "with", "as", "at", "by")
    rng = np.random.default_rng(seed)
    return " ".join(words[i] for i in rng.integers(0, len(words), tokens))


def run_load(spec: LoadSpec, send: Send) -> LoadResult:
    """Drive ``send`` with the load of ``spec``; a failed request is recorded, not raised.

    Ctrl-C stops sending and returns what finished with ``interrupted`` set (the caller
    records the run as interrupted and exits 130).
    """
    lock = threading.Lock()
    timings: list[RequestTiming] = []
    in_flight = [0, 0]  # now, most
    t0 = time.perf_counter()
    prompts = [synthetic_prompt(spec.prompt_tokens, spec.seed + i) for i in range(min(spec.requests, 64))]
    stop = threading.Event()

    def one(i: int) -> None:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        sent = time.perf_counter() - t0
        tokens: list[float] = []
        error = ""
        try:
            for arrived in send(prompts[i % len(prompts)], spec.output_tokens):
                tokens.append(arrived - t0)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"[:200]
        with lock:
            in_flight[0] -= 1
            timings.append(RequestTiming(sent_s=sent, token_s=tuple(tokens), error=error))

    threads: list[threading.Thread] = []
    caught: KeyboardInterrupt | None = None
    try:
        if spec.concurrency is not None:
            counter = iter(range(spec.requests))

            def client() -> None:
                while not stop.is_set():
                    with lock:
                        i = next(counter, None)
                    if i is None:
                        return
                    one(i)

            threads = [threading.Thread(target=client, daemon=True) for _ in range(spec.concurrency)]
            for th in threads:
                th.start()
        else:
            rng = np.random.default_rng(spec.seed)
            at = np.cumsum(rng.standard_exponential(spec.requests)) / float(spec.rate_rps or 1.0)
            for i, when in enumerate(at):
                delay = float(when) - (time.perf_counter() - t0)
                if delay > 0 and stop.wait(delay):
                    break
                th = threading.Thread(target=one, args=(i,), daemon=True)
                th.start()
                threads.append(th)
        for th in threads:
            while th.is_alive():
                th.join(0.1)
    except KeyboardInterrupt as exc:
        stop.set()
        caught = exc
    with lock:  # requests still streaming after Ctrl-C are left out
        done = list(timings)
    return LoadResult(
        spec=spec,
        timings=sorted(done, key=lambda t: t.sent_s),
        duration_s=time.perf_counter() - t0,
        max_in_flight=in_flight[1],
        interrupted=stop.is_set(),
        interruption=caught,
    )


def openai_stream(url: str, model: str, *, timeout_s: float = 600.0) -> Send:
    """A ``send`` posting to ``url`` (``http://host:port``) ``/v1/completions`` with streaming.

    Each SSE ``data:`` event with text counts as one token (vLLM streams one event per
    token); ``ignore_eos`` and ``min_tokens`` pin the output length as ``vllm bench serve``
    does with ``--ignore-eos``.

    Raises:
        InputError: the URL is not http(s)://host[:port].
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"serving URL {url!r} is not http(s)://host[:port]")
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    host, port = parts.hostname, parts.port

    def send(prompt: str, max_tokens: int) -> Iterator[float]:
        body = json.dumps(
            {
                "model": model,
                "prompt": prompt,
                "max_tokens": max_tokens,
                "min_tokens": max_tokens,
                "ignore_eos": True,
                "stream": True,
            }
        )
        conn = conn_cls(host, port, timeout=timeout_s)
        try:
            conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise ValueError(f"HTTP {resp.status} {resp.reason}")
            for raw in resp:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                event = json.loads(data)
                choices = event.get("choices") or [{}]
                if choices[0].get("text"):
                    yield time.perf_counter()
        finally:
            conn.close()

    return send
