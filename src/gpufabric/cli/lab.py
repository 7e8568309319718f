"""``gpufabric lab up|down|status|noise``: a multi-host lab of network namespaces (root)."""

from __future__ import annotations

import os

import typer

from gpufabric.cli.options import PLAIN_HELP, format_option, gpus_per_node_option, num_hosts_option
from gpufabric.cli.output import Format, print_json, stdout_console
from gpufabric.errors import InputError


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


def register(app: typer.Typer) -> None:
    lab_app = typer.Typer(
        help="Rehearse a design on one machine: hosts as network namespaces with management, data and storage planes.",
        no_args_is_help=True,
        rich_markup_mode=PLAIN_HELP,
    )
    app.add_typer(lab_app, name="lab")

    @lab_app.command("up")
    def up(
        name: str = typer.Argument("lab", help="Lab name (1-6 lowercase letters/digits)."),
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
            layout = {
                "switch_netns": net.ns_switch(name),
                "bridges": list(net.BRIDGES.values()),
                "hosts": [
                    {"netns": net.ns_host(name, i), **{p: f"{net.IFNAMES[p]} {net.addr(p, i)}/24" for p in net.PLANES}}
                    for i in range(1, hosts + 1)
                ],
                "rates": rates,
                "noise": noise or None,
            }
            if fmt is Format.json:
                print_json({"dry_run": True, **layout})
            else:
                _print_layout(layout)
            return 0
        _need_root()
        state = net.up(name, hosts=hosts, rates=rates, noise=noise)
        doc = net.status(state.name)
        if fmt is Format.json:
            print_json(doc)
        else:
            _print_status(doc)
        return 0

    @lab_app.command("down")
    def down(name: str = typer.Argument("lab", help="Lab name."), fmt: Format = format_option()) -> int:
        """Remove the lab's namespaces and stop its noise (safe to repeat)."""
        from gpufabric.lab import net

        _need_root()
        removed = net.down(name)
        if fmt is Format.json:
            print_json({"name": name, "removed": removed})
        else:
            stdout_console().print(f"lab {name}: removed {len(removed)} namespace(s)", markup=False)
        return 0

    @lab_app.command("status")
    def status(name: str = typer.Argument("lab", help="Lab name."), fmt: Format = format_option()) -> int:
        """Hosts, addresses, qdiscs and noise of a lab (exit 1 when it is not up)."""
        from gpufabric.lab import net

        _need_root()
        doc = net.status(name)
        if fmt is Format.json:
            print_json(doc)
        else:
            _print_status(doc)
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
        name: str = typer.Argument("lab", help="Lab name (1-6 lowercase letters/digits)."),
        hosts: int = num_hosts_option(2, "Slurm nodes"),
        gpus_per_node: int = gpus_per_node_option(0, "Placeholder gres/gpu per node (0-16)."),
        auth: str = typer.Option("auto", "--auth", help="auto (auth/none if built, else munge), none, munge."),
        fmt: Format = format_option(),
    ) -> int:
        """Create lab NAME and start Slurm on it; run srun/sbatch with `ip netns exec gfl-NAME-sw` and SLURM_CONF."""
        from gpufabric.lab import slurm

        _need_root()
        slurm.up(name, hosts=hosts, gpus_per_node=gpus_per_node, auth=auth)
        doc = slurm.status(name)
        if fmt is Format.json:
            print_json(doc)
        else:
            console = stdout_console()
            console.print(
                f"slurm lab {name}: {', '.join(n['name'] + '=' + n['state'] for n in doc['nodes'])}", markup=False
            )
            console.print(
                f"  SLURM_CONF={doc['conf']} ip netns exec {doc['login_netns']} srun -N{hosts} hostname", markup=False
            )
        return 0

    @slurm_app.command("down")
    def slurm_down(name: str = typer.Argument("lab", help="Lab name."), fmt: Format = format_option()) -> int:
        """Stop slurmctld and the slurmds, then remove the lab (safe to repeat)."""
        from gpufabric.lab import slurm

        _need_root()
        removed = slurm.down(name)
        if fmt is Format.json:
            print_json({"name": name, "removed": removed})
        else:
            stdout_console().print(f"slurm lab {name}: removed {len(removed)} namespace(s)", markup=False)
        return 0

    @slurm_app.command("status")
    def slurm_status(name: str = typer.Argument("lab", help="Lab name."), fmt: Format = format_option()) -> int:
        """Slurm node states as slurmctld reports them (exit 1 when not up)."""
        from gpufabric.lab import slurm

        _need_root()
        doc = slurm.status(name)
        if fmt is Format.json:
            print_json(doc)
        else:
            _print_slurm_status(name, doc)
        return 0 if doc["up"] else 1


def _print_status(doc: dict) -> None:
    console = stdout_console()
    if not doc.get("hosts"):
        console.print(f"lab {doc['name']}: down", markup=False)
        return
    console.print(
        f"lab {doc['name']}: {'up' if doc['up'] else 'DEGRADED'}, rates {doc['rates'] or 'none'},"
        f" noise {doc['noise']['plane'] or 'off'}",
        markup=False,
    )
    for host in doc["hosts"]:
        planes = "  ".join(f"{p}={v['ifname']} {v['addr']}" for p, v in host["planes"].items())
        console.print(f"  {host['netns']}: {planes}", markup=False)


def _print_layout(layout: dict) -> None:
    """``lab up --dry-run`` as text: what would be created."""
    console = stdout_console()
    console.print(
        f"would create switch namespace {layout['switch_netns']} with bridges {', '.join(layout['bridges'])};"
        f" rates {layout['rates'] or 'none'}, noise {layout['noise'] or 'off'}",
        markup=False,
    )
    for host in layout["hosts"]:
        planes = "  ".join(f"{k}={v}" for k, v in host.items() if k != "netns")
        console.print(f"  {host['netns']}: {planes}", markup=False)


def _print_slurm_status(name: str, doc: dict) -> None:
    console = stdout_console()
    nodes = doc.get("nodes") or []
    console.print(f"slurm lab {name}: {'up' if doc.get('up') else 'down'}", markup=False)
    for node in nodes:
        console.print(f"  {node.get('name', '?')}: {node.get('state', '?')}", markup=False)
