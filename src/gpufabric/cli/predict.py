"""``gpufabric predict collective``: what busbw and latency nccl-tests should report."""

from __future__ import annotations

import typer

from gpufabric.app.requests import PredictCollectiveRequest
from gpufabric.cli.options import PLAIN_HELP, format_option
from gpufabric.cli.output import Format, print_json
from gpufabric.cli.request_options import request_options

#: The pydantic model modules this command builds at start-up (cli/app.py ALL_MODEL_MODULES):
#: the catalog's alone.
MODELS = ("gpufabric.catalog.schema",)


def register(app: typer.Typer) -> None:
    predict_app = typer.Typer(
        help="Predict expected performance from the analytic models.", no_args_is_help=True, rich_markup_mode=PLAIN_HELP
    )
    predict_app.command("collective")(collective)
    app.add_typer(predict_app, name="predict")


@request_options(PredictCollectiveRequest)
def collective(request: PredictCollectiveRequest, fmt: Format = format_option()) -> int:
    """Predict time, algbw and busbw of one collective (nccl-tests definitions, GB/s = 1e9 B/s)."""
    from gpufabric.app.services import predict_collective
    from gpufabric.units import format_size

    outcome = predict_collective(request)
    if fmt == Format.json:
        print_json(outcome.to_json())
        return outcome.exit_code
    r, p = outcome.request, outcome.prediction
    typer.echo(
        f"{p.op} {format_size(p.size_bytes)} on {r.nodes} x {r.gpus_per_node} {r.gpu} over {r.fabric}"
        f" ({p.num_ranks} ranks, {p.switch_hops} switch hop{'' if p.switch_hops == 1 else 's'})\n"
        f"  algorithm {p.algorithm}/{p.protocol}{' (forced)' if r.protocol else ''}"
        f" ({p.timing} timing, {p.harness} harness{', SHARP allowed' if r.sharp else ''})\n"
        f"  time      {p.time_us:,.1f} us = launch {p.launch_us:,.1f} + latency {p.latency_us:,.1f}"
        f" + bandwidth {p.bandwidth_us:,.1f}\n"
        f"  algbw     {p.algbw_gbps:,.2f} GB/s\n"
        f"  busbw     {p.busbw_gbps:,.2f} GB/s\n"
        f"  ceiling   {p.ceiling_algbw_gbps:,.2f} GB/s algbw (what the NICs, NVLink and PCIe can carry)"
    )
    return outcome.exit_code
