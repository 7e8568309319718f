"""Fit the serving engine's overheads on public fixed-concurrency rows and print the table
for docs/accuracy.md (serving section).

The rows are tests/data/serving/fit_rows.json (sources inside); only those marked
``split: fit`` set the constants, the ``check`` rows are held out and compared. STEP_OVERHEAD_S
and SEQ_OVERHEAD_S enter a decode-only iteration linearly (model/inference.py
``ReplicaPerf.iteration_s``), so they are a least-squares fit of relative ITL errors.
REQUEST_OVERHEAD_S and API_S_PER_TOKEN_RATE enter the TTFT linearly (the engine's simulated
TTFT + request + rate x the replica's output tokens/s, sim/serving.py), so they are a
least-squares fit of relative TTFT errors given each row's simulated engine. Then every
row is simulated closed loop with the constants in the package and its error printed,
with the held-out rows' median and worst error.

Sources (also in docs/accuracy.md, serving section): ai.wmx.dev/benchmarks (vLLM 0.23 V1,
Qwen2.5-0.5B on 1 x L4, concurrency 1-32); johnmusgrave.com "vLLM throughput-latency
sweep on NVIDIA A100" (Llama 3.1 8B, concurrency 1). Never used: NVIDIA NIM's LLM
benchmarking pages and InferenceBench recipes (held out by issue 28).

    .venv/bin/python benchmarks/fit_serving.py
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np

from gpufabric.catalog import load_catalog
from gpufabric.model import inference as m
from gpufabric.sim.serving import ServingConfig, Tokens, simulate_serving

ROWS = Path(__file__).resolve().parents[1] / "tests" / "data" / "serving" / "fit_rows.json"


def setup(doc: dict, row: dict, step: float | None = None, seq: float | None = None) -> tuple[m.ReplicaPerf, float]:
    """The replica of one row and its KV capacity (tokens)."""
    cat = load_catalog([])
    gpu = types.SimpleNamespace(**doc["gpus"][row["gpu"]])
    md = doc["models"][row["model"]]
    shape = m.ModelShape(
        params=md["params"],
        layers=md["layers"],
        hidden=md["hidden"],
        heads=md["heads"],
        kv_heads=md["kv_heads"],
        weight_bytes_per_param=2,
        kv_bytes_per_element=2,
    )
    perf = m.replica_perf(
        shape=shape,
        gpu=gpu,
        links=m.serving_links(cat, "a100-sxm", "ib-ndr", 8),
        tp=row["tp"],
        pp=1,
        precision=row["precision"],
        mfu=0.5,
        hbm_efficiency=0.8,
        max_batch=256,
        jitter_cv=0.05,
        step_overhead_s=step,
        seq_overhead_s=seq,
    )
    cap = m.kv_capacity_tokens(shape=shape, gpu=gpu, tp=row["tp"], pp=1, memory_fraction=row["memory_fraction"])
    return perf, cap


def simulate(doc: dict, row: dict, request_s: float | None = None, api: float | None = None) -> dict:
    """Closed-loop simulation of one row with the package's constants (or the API terms given)."""
    perf, cap = setup(doc, row)
    c = row["concurrency"]
    cfg = ServingConfig(
        perf=perf,
        prefill_replicas=1,
        max_batch=256,
        kv_capacity_tokens=cap,
        token_budget=row["budget"],
        concurrency=c,
        prompt=Tokens(mean=row["prompt"]),
        output=Tokens(mean=row["output"]),
        requests=max(20 * c, 100),
        jitter_cv=0.05,
        request_overhead_s=m.REQUEST_OVERHEAD_S if request_s is None else request_s,
        api_s_per_token_rate=m.API_S_PER_TOKEN_RATE if api is None else api,
        client_delay_s=m.CLIENT_DELAY_S,
    )
    return simulate_serving(cfg).summary()


def fit(doc: dict) -> tuple[float, float]:
    """(step, seq) overheads from the fitting rows' ITLs."""
    a, y = [], []
    for row in (r for r in doc["rows"] if r["split"] == "fit"):
        perf, _ = setup(doc, row, 0.0, 0.0)
        c = row["concurrency"]
        gpu_only = float(perf.decode_step_s(c, row["prompt"] + row["output"] / 2))
        # itl = gpu_only + step + c seq, weighted by 1 / itl (relative errors)
        w = 1.0 / row["itl_p50_s"]
        a.append([w, w * c])
        y.append(w * (row["itl_p50_s"] - gpu_only))
    (step, seq), *_ = np.linalg.lstsq(np.array(a), np.array(y), rcond=None)
    return float(step), float(seq)


def fit_api(doc: dict) -> tuple[float, float]:
    """(REQUEST_OVERHEAD_S, API_S_PER_TOKEN_RATE): the published TTFT is the engine's (simulated
    without the API terms) + request + api x output tokens/s, a linear least squares of
    relative errors over the fitting rows with a TTFT."""
    a, y = [], []
    for row in doc["rows"]:
        if "ttft_p50_s" not in row or row["split"] != "fit":
            continue
        s = simulate(doc, row, 0.0, 0.0)
        w = 1.0 / row["ttft_p50_s"]
        a.append([w, w * s["output_tokens_per_s"]])
        y.append(w * (row["ttft_p50_s"] - s["ttft_p50_s"]))
    (request, api), *_ = np.linalg.lstsq(np.array(a), np.array(y), rcond=None)
    return float(request), float(api)


def errors(doc: dict) -> list[tuple[dict, float, float | None]]:
    """Every row's relative ITL and TTFT errors (TTFT None where the row has none)."""
    out = []
    for row in doc["rows"]:
        s = simulate(doc, row)
        ttft = s["ttft_p50_s"] / row["ttft_p50_s"] - 1 if "ttft_p50_s" in row else None
        out.append((row, s["itl_p50_s"] / row["itl_p50_s"] - 1, ttft))
    return out


def main() -> int:
    doc = json.loads(ROWS.read_text())
    step, seq = fit(doc)
    request, api = fit_api(doc)
    print(
        f"fit: step {step * 1e3:.3f} ms, seq {seq * 1e6:.1f} us, request {request * 1e3:.1f} ms, api {api * 1e6:.1f} us per token/s"
    )
    print(
        f"package: step {m.STEP_OVERHEAD_S * 1e3:.3f} ms, seq {m.SEQ_OVERHEAD_S * 1e6:.1f} us,"
        f" request {m.REQUEST_OVERHEAD_S * 1e3:.1f} ms, api {m.API_S_PER_TOKEN_RATE * 1e6:.1f} us per token/s"
    )
    print("| row | c | split | ITL p50 pred / pub (err %) | TTFT p50 pred / pub (err %) |")
    for row in doc["rows"]:
        s = simulate(doc, row)
        itl = f"{s['itl_p50_s'] * 1e3:.2f} / {row['itl_p50_s'] * 1e3:.2f} ({(s['itl_p50_s'] / row['itl_p50_s'] - 1) * 100:+.0f})"
        ttft = "-"
        if "ttft_p50_s" in row:
            ttft = f"{s['ttft_p50_s'] * 1e3:.1f} / {row['ttft_p50_s'] * 1e3:.1f} ({(s['ttft_p50_s'] / row['ttft_p50_s'] - 1) * 100:+.0f})"
        print(f"| {row['gpu']} {row['model']} | {row['concurrency']} | {row['split']} | {itl} | {ttft} |")
    held = sorted(abs(e) for r, i, t in errors(doc) if r["split"] == "check" for e in (i, t) if e is not None)
    print(f"held out: {len(held)} points, median |error| {held[len(held) // 2]:.1%}, worst {held[-1]:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
