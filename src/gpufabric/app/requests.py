"""Typed requests of the application services: every knob of a command declared once.

Each field is an ``exec.knobs.knob``: what the CLI needs to make it an option
(``cli/request_options.py``): ``flag`` (None: the positional argument), ``help``, ``modes``
(the modes that read it; an option given in another mode is refused, exit 2, rather than
silently ignored) and ``cap`` (the largest value the command accepts, checked before anything runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpufabric.exec.knobs import DB_HELP, GPUS_PER_NODE_HELP, NODES_HELP, SIZE_SYNTAX, knob

#: Modes of ``simulate``: a synthetic job from flags, a training spec's candidate, an inference spec's design.
SYNTHETIC, SPEC, INFERENCE = "synthetic", "spec", "inference"
_TRAINING = frozenset({SYNTHETIC, SPEC})
_ALL = frozenset({SYNTHETIC, SPEC, INFERENCE})

_DIST_HELP = (
    "const:1ms | normal:SIGMA | normal:MEAN:SIGMA | lognormal:MEDIAN:SIGMA | exp:MEAN | exp:SHIFT:MEAN | "
    "hiccup:PROB:DELAY | empirical:FILE[:UNIT]; bare numbers are ms."
)
_RANKS = 1 << 31


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    """``gpufabric plan SPEC``: every candidate design of a spec, one recommended."""

    spec_file: Path = knob(..., None, "Spec YAML (see `gpufabric init`).")
    top: int | None = knob(None, "--top", "Show only the best N candidates (default: 12 in text, all in JSON).", min=1)
    catalog_files: list[Path] = knob([], "--catalog", "Catalog override file (repeatable; later wins).")


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


_HARNESS_HELP = "per-gpu (one process per GPU, default), single-process"


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictCollectiveRequest:
    """``gpufabric predict collective``: what nccl-tests should report for one collective."""

    op: str = knob("all_reduce", "--op", "all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv.")
    size: str = knob("1G", "--bytes", "Message size (nccl-tests S): " + SIZE_SYNTAX)
    nodes: int = knob(1, "--nodes", NODES_HELP, min=1)
    gpus_per_node: int = knob(8, "--gpus-per-node", GPUS_PER_NODE_HELP)
    gpu: str = knob("h100-sxm", "--gpu", "GPU catalog id.")
    fabric: str = knob("ib-ndr", "--fabric", "Scale-out fabric catalog id.")
    algorithm: str | None = knob(
        None,
        "--algorithm",
        "Force an algorithm (like NCCL_ALGO): ring, tree, hierarchical, collnet, nvls, nvls_tree.",
    )
    timing: str = knob(
        "eager", "--timing", "eager: what nccl-tests prints without -G (default); graph: CUDA-graph capture."
    )
    protocol: str | None = knob(
        None,
        "--protocol",
        "Force a protocol (like NCCL_PROTO): LL, LL128 or Simple. Default: NCCL's tuner picks per size.",
    )
    harness: str = knob(
        "per-gpu",
        "--harness",
        "How the op is launched and timed: " + _HARNESS_HELP + " (one process drives every GPU of a node,"
        " nccl-tests -g N), torch (torch.distributed, CUDA events).",
    )
    nccl_version: str | None = knob(
        None,
        "--nccl-version",
        "NCCL release the job uses (e.g. 2.16.5): algorithms it does not have yet are not"
        " considered (NVLS needs 2.17, NVLSTree 2.18), and its rule for the p2p channels a"
        " network peer gets sets send_recv and all_to_all across nodes. Default: the newest"
        " algorithms, and the 2.20-2.28 p2p rule (2.29 gives a peer pair more of its NIC).",
    )
    sharp: bool = knob(False, "--sharp", "Allow in-network reduction (InfiniBand SHARP) where the fabric has it.")
    deterministic: bool = knob(False, "--deterministic", "Only algorithms with a fixed reduction order (bitwise runs).")
    catalog_files: list[Path] = knob([], "--catalog", "Catalog override file (repeatable).")


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrateRequest:
    """``gpufabric calibrate RUN``: fit a measured run, write a catalog override."""

    run: str = knob(..., None, "Run id (or 'latest') with collective sweeps / fio results.", metavar="RUN")
    fabric: str | None = knob(
        None, "--fabric", "Catalog fabric id the multi-node sweeps ran over (needed when the run spans nodes)."
    )
    gpu: str | None = knob(None, "--gpu", "Catalog GPU id (default: read from the nccl-tests header of the run).")
    storage: str | None = knob(None, "--storage", "Catalog storage id the run's fio results measured.")
    harness: str | None = knob(
        None,
        "--harness",
        "How the run launched its ops, for every point: per-gpu (one process per GPU), single-process"
        " (nccl-tests -g N) or torch. Its launch cost is modelled, not fitted into the GPU's. Default:"
        " what each result's nccl-tests header says (nGpus > 1: single-process), else per-gpu.",
    )
    catalog_files: list[Path] = knob([], "--catalog", "Base catalog override(s) to start from.")
    out: Path = knob(Path("calibrated.yaml"), "--out", "Override file to write.")
    db: str | None = knob(None, "--db", DB_HELP)
    dry_run: bool = knob(False, "--dry-run", "Fit and report, but do not write --out.")
    force: bool = knob(
        False,
        "--force",
        "Write the fit even when it predicts the run's own points worse than the catalog did"
        " (otherwise refused, exit 1).",
    )
