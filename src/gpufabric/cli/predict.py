"""``gpufabric predict collective``: what busbw and latency nccl-tests should report."""

from __future__ import annotations

from pathlib import Path

import typer

from gpufabric.cli.limits import check_range
from gpufabric.cli.options import PLAIN_HELP, bytes_option, format_option, gpus_per_node_option, nodes_option
from gpufabric.cli.output import Format, print_json
from gpufabric.errors import InputError

#: Largest message size predicted: 1 PiB, far above any single collective (HBM is ~1e11 B per GPU).
_MAX_BYTES = 1 << 50


#: The pydantic model modules this command builds at start-up (cli/app.py ALL_MODEL_MODULES):
#: the catalog's alone.
MODELS = ("gpufabric.catalog.schema",)


def register(app: typer.Typer) -> None:
    predict_app = typer.Typer(
        help="Predict expected performance from the analytic models.", no_args_is_help=True, rich_markup_mode=PLAIN_HELP
    )
    predict_app.command("collective")(collective)
    app.add_typer(predict_app, name="predict")


def collective(
    op: str = typer.Option(
        "all_reduce", "--op", help="all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv."
    ),
    size: str = bytes_option("1G", "Message size (nccl-tests S)"),
    nodes: int = nodes_option(1),
    gpus_per_node: int = gpus_per_node_option(8),
    gpu: str = typer.Option("h100-sxm", "--gpu", help="GPU catalog id."),
    fabric: str = typer.Option("ib-ndr", "--fabric", help="Scale-out fabric catalog id."),
    algorithm: str = typer.Option(
        None,
        "--algorithm",
        help="Force an algorithm (like NCCL_ALGO): ring, tree, hierarchical, collnet, nvls, nvls_tree.",
    ),
    timing: str = typer.Option(
        "eager", "--timing", help="eager: what nccl-tests prints without -G (default); graph: CUDA-graph capture."
    ),
    protocol: str = typer.Option(
        None,
        "--protocol",
        help="Force a protocol (like NCCL_PROTO): LL, LL128 or Simple. Default: NCCL's tuner picks per size.",
    ),
    harness: str = typer.Option(
        "per-gpu",
        "--harness",
        help="How the op is launched and timed: per-gpu (one process per GPU, default), single-process"
        " (one process drives every GPU of a node, nccl-tests -g N), torch (torch.distributed, CUDA events).",
    ),
    nccl_version: str = typer.Option(
        None,
        "--nccl-version",
        help="NCCL release the job uses (e.g. 2.16.5): algorithms it does not have yet are not"
        " considered (NVLS needs 2.17, NVLSTree 2.18). Default: the newest.",
    ),
    sharp: bool = typer.Option(
        False, "--sharp", help="Allow in-network reduction (InfiniBand SHARP) where the fabric has it."
    ),
    deterministic: bool = typer.Option(
        False, "--deterministic", help="Only algorithms with a fixed reduction order (bitwise runs)."
    ),
    catalog_files: list[Path] = typer.Option([], "--catalog", help="Catalog override file (repeatable)."),
    fmt: Format = format_option(),
) -> int:
    """Predict time, algbw and busbw of one collective (nccl-tests definitions, GB/s = 1e9 B/s)."""
    from gpufabric.catalog import load_catalog
    from gpufabric.model.collectives import predict_collective
    from gpufabric.units import format_size, parse_size

    check_range("--nodes", nodes, 1, 1 << 24)
    check_range("--gpus-per-node", gpus_per_node, 1, 1024)
    size_bytes = parse_size(size)
    if size_bytes > _MAX_BYTES:
        raise InputError(f"--bytes {size} is beyond any collective message (at most {format_size(_MAX_BYTES)})")
    catalog = load_catalog(catalog_files)
    pred = predict_collective(
        op=op,
        size_bytes=size_bytes,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        gpu=gpu,
        fabric=fabric,
        catalog=catalog,
        algorithm=algorithm,
        deterministic=deterministic,
        sharp=sharp,
        timing=timing,
        protocol=protocol,
        harness=harness,
        nccl_version=nccl_version,
    )
    if fmt == Format.json:
        print_json(
            {
                "op": pred.op,
                "bytes": pred.size_bytes,
                "ranks": pred.num_ranks,
                "algorithm": pred.algorithm,
                "protocol": pred.protocol,
                "time_us": pred.time_us,
                "algbw_gbps": pred.algbw_gbps,
                "busbw_gbps": pred.busbw_gbps,
                "gpu": gpu,
                "fabric": fabric,
                "switch_hops": pred.switch_hops,
                "timing": pred.timing,
                "sharp": pred.sharp,
                "harness": pred.harness,
                "ceiling_algbw_gbps": pred.ceiling_algbw_gbps,
                "breakdown": {
                    "launch_us": pred.launch_us,
                    "latency_us": pred.latency_us,
                    "bandwidth_us": pred.bandwidth_us,
                },
            }
        )
        return 0
    typer.echo(
        f"{pred.op} {format_size(pred.size_bytes)} on {nodes} x {gpus_per_node} {gpu} over {fabric}"
        f" ({pred.num_ranks} ranks, {pred.switch_hops} switch hop{'' if pred.switch_hops == 1 else 's'})\n"
        f"  algorithm {pred.algorithm}/{pred.protocol}{' (forced)' if protocol else ''}"
        f" ({pred.timing} timing, {pred.harness} harness{', SHARP allowed' if sharp else ''})\n"
        f"  time      {pred.time_us:,.1f} us = launch {pred.launch_us:,.1f} + latency {pred.latency_us:,.1f}"
        f" + bandwidth {pred.bandwidth_us:,.1f}\n"
        f"  algbw     {pred.algbw_gbps:,.2f} GB/s\n"
        f"  busbw     {pred.busbw_gbps:,.2f} GB/s\n"
        f"  ceiling   {pred.ceiling_algbw_gbps:,.2f} GB/s algbw (what the NICs, NVLink and PCIe can carry)"
    )
    return 0
