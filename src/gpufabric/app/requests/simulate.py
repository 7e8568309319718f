"""The request of ``gpufabric simulate``: one record for its three modes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpufabric.app.requests import INFERENCE, SPEC, SYNTHETIC
from gpufabric.exec.knobs import knob

_TRAINING = frozenset({SYNTHETIC, SPEC})
_ALL = frozenset({SYNTHETIC, SPEC, INFERENCE})

_DIST_HELP = (
    "const:1ms | normal:SIGMA | normal:MEAN:SIGMA | lognormal:MEDIAN:SIGMA | exp:MEAN | exp:SHIFT:MEAN | "
    "hiccup:PROB:DELAY | empirical:FILE[:UNIT]; bare numbers are ms."
)
_RANKS = 1 << 31


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateRequest:
    """``gpufabric simulate``: a spec's candidate, or a synthetic job described by the flags."""

    spec: Path | None = knob(None, None, "A spec: simulate one of its plan candidates.", modes=_ALL)
    candidate: str | None = knob(
        None,
        "--candidate",
        "Candidate id (spec mode; default: the recommended one).",
        modes=frozenset({SPEC, INFERENCE}),
    )
    ranks: int | None = knob(
        None,
        "--ranks",
        "Ranks (GPUs) in the synchronous step (synthetic mode).",
        modes=frozenset({SYNTHETIC}),
        cap=_RANKS,
    )
    ranks_per_node: int = knob(
        1,
        "--gpus-per-node",
        "GPUs (ranks) per node (stragglers are whole nodes).",
        modes=frozenset({SYNTHETIC}),
        cap=_RANKS,
    )
    ranks_per_leaf: int = knob(
        0, "--ranks-per-leaf", "Ranks under one leaf switch (0: no grouping).", modes=frozenset({SYNTHETIC}), cap=_RANKS
    )
    steps: int = knob(10_000, "--steps", "Steps simulated per run.", modes=_TRAINING, cap=10**9)
    train_steps: int = knob(
        0, "--train-steps", "Steps of the whole training run (default: --steps).", modes=_TRAINING, cap=10**15
    )
    runs: int = knob(1, "--runs", "Independent runs R (run-to-run spread).", modes=_TRAINING, cap=10**6)
    seed: int = knob(
        0, "--seed", "Random seed; the same seed gives the same output bit for bit.", modes=_ALL, cap=2**63 - 1
    )
    compute_ms: float = knob(
        100.0, "--compute-ms", "Mean per-rank compute time per step, ms.", modes=frozenset({SYNTHETIC}), cap=1e9
    )
    jitter: str | None = knob(
        None, "--jitter", "Per-rank jitter added to the compute time: " + _DIST_HELP, modes=frozenset({SYNTHETIC})
    )
    compute_cv: float | None = knob(
        None,
        "--compute-cv",
        "Spec mode: per-rank compute-time CV (default: the candidate's, from the GPU's catalog estimate;"
        " use a measured value).",
        modes=frozenset({SPEC}),
        cap=1e3,
    )
    hiccup: str | None = knob(
        None,
        "--hiccup",
        "PROB:DELAY: per rank per step, probability PROB of an extra DELAY (e.g. 0.001:5ms).",
        modes=_TRAINING,
    )
    straggler: str | None = knob(
        None,
        "--straggler",
        "FRACTIONxFACTOR: each node is slow with probability FRACTION for a whole run, by FACTOR (e.g. 0.01x1.5).",
        modes=_TRAINING,
    )
    leaf_jitter: str | None = knob(
        None,
        "--leaf-jitter",
        "Per-step delay shared by all ranks of a leaf switch: " + _DIST_HELP,
        modes=frozenset({SYNTHETIC}),
    )
    fixed_ms: float = knob(
        0.0,
        "--fixed-ms",
        "Deterministic critical-path time per step (bubble, bandwidth term), ms.",
        modes=frozenset({SYNTHETIC}),
        cap=1e9,
    )
    comm_latency: str | None = knob(
        None,
        "--comm-latency",
        "Latency of one transfer in one dependent collective step: " + _DIST_HELP,
        modes=frozenset({SYNTHETIC}),
    )
    ring_steps: int = knob(
        0,
        "--ring-steps",
        "Dependent collective steps per step (2(p-1) for a flat ring all-reduce).",
        modes=frozenset({SYNTHETIC}),
        cap=10**9,
    )
    ring_width: int = knob(
        0,
        "--ring-width",
        "Transfers each dependent step waits for (default: nodes).",
        modes=frozenset({SYNTHETIC}),
        cap=_RANKS,
    )
    slow_links: str | None = knob(
        None, "--slow-links", "FRACTIONxFACTOR: persistently slow links among them.", modes=frozenset({SYNTHETIC})
    )
    checkpoint_every: str | None = knob(
        None,
        "--checkpoint-every",
        "STEPS:WRITE[:sync|async[:SNAPSHOT[:SLOWDOWN]]], e.g. 500:8s:sync or 500:8s:async:1s:0.1.",
        modes=frozenset({SYNTHETIC}),
    )
    node_mttf_h: float = knob(
        0.0,
        "--node-mttf-h",
        "Mean time to failure per node, hours (0: no failures).",
        modes=frozenset({SYNTHETIC}),
        cap=1e9,
    )
    restart_min: float = knob(
        10.0, "--restart-min", "Minutes from a failure to training again.", modes=frozenset({SYNTHETIC}), cap=1e7
    )
    tokens_per_step: float = knob(
        0.0, "--tokens-per-step", "Tokens per step, to report tokens/s.", modes=frozenset({SYNTHETIC}), cap=1e15
    )
    brute_force: bool = knob(False, "--brute-force", "Draw every rank (the slow reference path).", modes=_TRAINING)
    no_attribution: bool = knob(
        False, "--no-attribution", "Skip the straggler-free rerun used to attribute lost time.", modes=_TRAINING
    )
    requests: int | None = knob(
        None,
        "--requests",
        "Inference spec: requests to simulate (default 100,000).",
        modes=frozenset({INFERENCE}),
    )
