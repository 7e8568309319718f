"""The request of ``gpufabric predict collective``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpufabric.exec.knobs import GPUS_PER_NODE_HELP, NODES_HELP, SIZE_SYNTAX, knob

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
