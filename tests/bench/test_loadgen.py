"""Serving load generator: closed and open loop against a real local HTTP server that
streams like an OpenAI-compatible engine (one SSE event per token, fixed per-token delay)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpufabric.bench.loadgen import LoadSpec, openai_stream, run_load
from gpufabric.errors import InputError

TOKEN_S = 0.004  # the stand-in engine's time per token
FIRST_S = 0.02  # and to its first token


class _Engine(BaseHTTPRequestHandler):
    active = 0
    most = 0
    lock = threading.Lock()

    def do_POST(self) -> None:  # http.server calls it by this name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["stream"] is True and body["ignore_eos"] is True
        with _Engine.lock:
            _Engine.active += 1
            _Engine.most = max(_Engine.most, _Engine.active)
        done = False
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            time.sleep(FIRST_S)
            for i in range(body["max_tokens"]):
                if i:
                    time.sleep(TOKEN_S)
                self.wfile.write(b"data: " + json.dumps({"choices": [{"text": "x"}]}).encode() + b"\n\n")
                self.wfile.flush()
            # Out of the count before [DONE]: a closed-loop client sends its next request the
            # moment it reads [DONE], possibly before this thread runs again (it saw 4 of 3).
            with _Engine.lock:
                _Engine.active -= 1
            done = True
            self.wfile.write(b"data: [DONE]\n\n")
        finally:
            if not done:
                with _Engine.lock:
                    _Engine.active -= 1

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serve_engine() -> Iterator[str]:
    """The stand-in engine on a free local port; yields its URL."""
    _Engine.most = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture()
def server():
    with serve_engine() as url:
        yield url


def test_closed_loop_keeps_exactly_n_in_flight_and_measures_the_stream(server):
    res = run_load(LoadSpec(requests=12, prompt_tokens=20, output_tokens=10, concurrency=3), openai_stream(server, "m"))
    s = res.summary()
    assert s["requests"] == 12 and s["failed"] == 0
    assert res.max_in_flight == 3 and _Engine.most == 3
    assert s["ttft_p50_s"] == pytest.approx(FIRST_S, abs=0.015)
    assert s["tpot_p50_s"] == pytest.approx(TOKEN_S, rel=0.5, abs=0.003)
    assert s["output_tokens_per_s"] > 0 and s["itl_p99_s"] >= s["itl_p50_s"]
    # Each client waits for its previous request: 4 rounds of ~(first + 9 tokens).
    assert s["duration_s"] > 4 * (FIRST_S + 9 * TOKEN_S) * 0.9


def test_open_loop_and_failures_are_recorded(server):
    res = run_load(LoadSpec(requests=6, prompt_tokens=5, output_tokens=3, rate_rps=200.0), openai_stream(server, "m"))
    assert res.summary()["failed"] == 0 and len(res.timings) == 6
    dead = run_load(
        LoadSpec(requests=2, prompt_tokens=5, output_tokens=3, concurrency=1), openai_stream("http://127.0.0.1:9", "m")
    )
    assert dead.summary()["failed"] == 2 and "Error" in dead.timings[0].error


def test_bad_loads_are_input_errors():
    with pytest.raises(InputError):
        LoadSpec(requests=1, prompt_tokens=1, output_tokens=1)
    with pytest.raises(InputError):
        LoadSpec(requests=1, prompt_tokens=1, output_tokens=1, concurrency=2, rate_rps=1.0)
    with pytest.raises(InputError, match="http"):
        openai_stream("file:///etc/passwd", "m")


def test_load_of_a_spec_follows_its_traffic():
    from gpufabric.bench.loadgen import load_for
    from gpufabric.spec.inference import load_inference_spec, read_located
    from tests.conftest import EXAMPLES

    spec = load_inference_spec(read_located(EXAMPLES / "serving" / "llama3-70b-serving.yaml"))
    load = load_for(spec)
    assert load.rate_rps == 10 and load.concurrency is None and load.requests == 600
    assert (load.prompt_tokens, load.output_tokens) == (2048, 256)


def test_ctrl_c_returns_what_finished_and_says_so(server):
    import signal

    timer = threading.Timer(0.3, signal.raise_signal, args=(signal.SIGINT,))
    timer.start()
    res = run_load(LoadSpec(requests=200, prompt_tokens=5, output_tokens=40, concurrency=2), openai_stream(server, "m"))
    timer.join()
    assert res.interrupted and isinstance(res.interruption, KeyboardInterrupt)
    assert 0 < len(res.timings) < 200 and res.summary()["failed"] == 0
