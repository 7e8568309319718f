"""``gpufabric lab up|down|status|noise``: a multi-host lab of network namespaces (root).

The lab itself is ``lab/net.py`` and ``lab/slurm.py``; each command here checks for root,
calls it and renders the document it returns (``--format json`` prints it as it is).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import typer

from gpufabric.cli.options import PLAIN_HELP, format_option, gpus_per_node_option, num_hosts_option
from gpufabric.cli.output import Format, print_json, print_lines
from gpufabric.errors import InputError

NAME_HELP = "Lab name (1-6 lowercase letters/digits)."


def _need_root() -> None:
    if os.geteuid() != 0:
        raise InputError("the lab creates network namespaces and needs root; run it with sudo")


def _rates(items: list[str]) -> dict[str, str]:
    rates = {}
    for item in items:
        plane, sep, rate = item.partition("=")
        if not sep or not rate:
            raise InputError(f"--rate {item!r}: use PLANE=RATE, for example data=1gbit")
        rates[plane] = rate
    return rates


def _emit(doc: dict[str, Any], fmt: Format, text: Callable[[dict[str, Any]], list[str]]) -> None:
    """The document as JSON, or its text lines."""
    print_json(doc) if fmt is Format.json else print_lines(text(doc))


def _removed(what: str) -> Callable[[dict[str, Any]], list[str]]:
    return lambda doc: [f"{what} {doc['name']}: removed {len(doc['removed'])} namespace(s)"]


def register(app: typer.Typer) -> None:
    lab_app = typer.Typer(
        help="Rehearse a design on one machine: hosts as network namespaces with management, data and storage planes.",
        no_args_is_help=True,
        rich_markup_mode=PLAIN_HELP,
    )
    app.add_typer(lab_app, name="lab")

    @lab_app.command("up")
    def up(
        name: str = typer.Argument("lab", help=NAME_HELP),
        hosts: int = num_hosts_option(2),
        rate: list[str] = typer.Option(
            [], "--rate", help="tbf cap per plane, PLANE=RATE (e.g. data=1gbit); repeatable."
        ),
        noise: str = typer.Option("", "--noise", help="Start an iperf3 noisy neighbour on this plane."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the layout and exit."),
        fmt: Format = format_option(),
    ) -> int:
        """Create the lab (replacing an earlier one of the same name)."""
        from gpufabric.lab import net

        rates = net.validate(name, hosts=hosts, rates=_rates(rate), noise=noise)
        if dry_run:
            _emit({"dry_run": True, **net.layout(name, hosts=hosts, rates=rates, noise=noise)}, fmt, _layout_lines)
            return 0
        _need_root()
        state = net.up(name, hosts=hosts, rates=rates, noise=noise)
        _emit(net.status(state.name), fmt, _status_lines)
        return 0

    @lab_app.command("down")
    def down(name: str = typer.Argument("lab", help="Lab name."), fmt: Format = format_option()) -> int:
        """Remove the lab's namespaces and stop its noise (safe to repeat)."""
        from gpufabric.lab import net

        _need_root()
        _emit({"name": name, "removed": net.down(name)}, fmt, _removed("lab"))
        return 0

    @lab_app.command("status")
    def status(name: str = typer.Argument("lab", help="Lab name."), fmt: Format = format_option()) -> int:
        """Hosts, addresses, qdiscs and noise of a lab (exit 1 when it is not up)."""
        from gpufabric.lab import net

        _need_root()
        doc = net.status(name)
        _emit(doc, fmt, _status_lines)
        return 0 if doc["up"] else 1

    @lab_app.command("noise")
    def noise(
        name: str = typer.Argument("lab", help="Lab name."),
        plane: str = typer.Option(..., "--plane", help="mgmt, data, storage, or none to stop it."),
    ) -> int:
        """Move the noisy neighbour to another plane, or stop it."""
        from gpufabric.lab import net

        _need_root()
        if plane == "none":
            net.stop_noise(name)
        else:
            net.start_noise(name, plane)
        return 0

    _register_slurm(lab_app)


def _register_slurm(lab_app: typer.Typer) -> None:
    slurm_app = typer.Typer(
        help="A Slurm cluster on the lab: slurmctld on the login namespace, one slurmd per host.",
        no_args_is_help=True,
        rich_markup_mode=PLAIN_HELP,
    )
    lab_app.add_typer(slurm_app, name="slurm")

    @slurm_app.command("up")
    def slurm_up(
        name: str = typer.Argument("lab", help=NAME_HELP),
        hosts: int = num_hosts_option(2, "Slurm nodes"),
        gpus_per_node: int = gpus_per_node_option(0, "Placeholder gres/gpu per node (0-16)."),
        auth: str = typer.Option("auto", "--auth", help="auto (auth/none if built, else munge), none, munge."),
        fmt: Format = format_option(),
    ) -> int:
        """Create lab NAME and start Slurm on it; run srun/sbatch with `ip netns exec gfl-NAME-sw` and SLURM_CONF."""
        from gpufabric.lab import slurm

        _need_root()
        slurm.up(name, hosts=hosts, gpus_per_node=gpus_per_node, auth=auth)
        _emit(
            slurm.status(name),
            fmt,
            lambda doc: [
                f"slurm lab {name}: {', '.join(n['name'] + '=' + n['state'] for n in doc['nodes'])}",
                f"  SLURM_CONF={doc['conf']} ip netns exec {doc['login_netns']} srun -N{hosts} hostname",
            ],
        )
        return 0

    @slurm_app.command("down")
    def slurm_down(name: str = typer.Argument("lab", help="Lab name."), fmt: Format = format_option()) -> int:
        """Stop slurmctld and the slurmds, then remove the lab (safe to repeat)."""
        from gpufabric.lab import slurm

        _need_root()
        _emit({"name": name, "removed": slurm.down(name)}, fmt, _removed("slurm lab"))
        return 0

    @slurm_app.command("status")
    def slurm_status(name: str = typer.Argument("lab", help="Lab name."), fmt: Format = format_option()) -> int:
        """Slurm node states as slurmctld reports them (exit 1 when not up)."""
        from gpufabric.lab import slurm

        _need_root()
        doc = slurm.status(name)
        _emit(
            doc,
            fmt,
            lambda d: [
                f"slurm lab {name}: {'up' if d.get('up') else 'down'}",
                *(f"  {n.get('name', '?')}: {n.get('state', '?')}" for n in d.get("nodes") or []),
            ],
        )
        return 0 if doc["up"] else 1


def _status_lines(doc: dict[str, Any]) -> list[str]:
    if not doc.get("hosts"):
        return [f"lab {doc['name']}: down"]
    head = (
        f"lab {doc['name']}: {'up' if doc['up'] else 'DEGRADED'}, rates {doc['rates'] or 'none'},"
        f" noise {doc['noise']['plane'] or 'off'}"
    )
    planes = ("  ".join(f"{p}={v['ifname']} {v['addr']}" for p, v in h["planes"].items()) for h in doc["hosts"])
    return [head, *(f"  {h['netns']}: {p}" for h, p in zip(doc["hosts"], planes, strict=True))]


def _layout_lines(layout: dict[str, Any]) -> list[str]:
    """``lab up --dry-run`` as text: what would be created."""
    head = (
        f"would create switch namespace {layout['switch_netns']} with bridges {', '.join(layout['bridges'])};"
        f" rates {layout['rates'] or 'none'}, noise {layout['noise'] or 'off'}"
    )
    hosts = (f"  {h['netns']}: " + "  ".join(f"{k}={v}" for k, v in h.items() if k != "netns") for h in layout["hosts"])
    return [head, *hosts]
