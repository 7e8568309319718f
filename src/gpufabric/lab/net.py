"""A multi-host lab on one machine: network namespaces joined by one bridge per plane.

Layout for lab NAME with N hosts (root needed)::

    netns gfl-NAME-sw   bridges br-mgmt, br-data, br-stor (one per plane)
    netns gfl-NAME-hI   mgmt0 10.210.0.I/24, data0 10.210.1.I/24, stor0 10.210.2.I/24
                        each a veth whose peer hI-<plane> is a port of that plane's bridge

A tbf qdisc on a plane caps every host's egress on that plane (tbf shapes egress only,
reference/this-machine.md item 2, so capping each sender caps both directions). The noisy
neighbour is an iperf3 --bidir stream between the first and last host on one plane; it
competes with the probes' traffic only where they share a capped plane.

State (host count, planes, rates, the noise's process tickets) is kept in
STATE_DIR/NAME.json so that ``down`` finds everything, and ``down`` also works without it
(idempotent). A state file is input like any other: one of another version, damaged or
edited is read field by field, and only a process that a ticket still matches
(``exec.process.Started``: pid, start time, boot, command) is ever signalled, so a reused
pid or an edited ``noise_pids: [0]`` never kills anything gpufabric did not start.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpufabric.errors import CommandFailed, InputError
from gpufabric.exec.launch import Host
from gpufabric.exec.process import Started, not_ours, run, spawn_detached, stop_started

PREFIX = "gfl-"
PLANES = {"mgmt": 0, "data": 1, "storage": 2}
IFNAMES = {"mgmt": "mgmt0", "data": "data0", "storage": "stor0"}
BRIDGES = {"mgmt": "br-mgmt", "data": "br-data", "storage": "br-stor"}
STATE_DIR = Path(os.environ.get("GPUFABRIC_LAB_STATE", "/run/gpufabric-lab"))
#: iperf3 ports for the noisy neighbour (this project's allotment is 5300-5399).
NOISE_PORT = 5300
_NAME = re.compile(r"[a-z0-9]{1,6}")
_CMD_TIMEOUT_S = 10.0


#: Version of the state file this code writes. v1 (no key) kept bare noise pids, which are
#: never signalled now; v2 keeps a ticket per noise process.
STATE_VERSION = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class LabState:
    name: str
    hosts: int
    rates: dict[str, str] = field(default_factory=dict)  # plane -> tbf rate
    noise_plane: str = ""
    noise: tuple[Started, ...] = ()  # the noisy neighbour's processes
    created_at: float = 0.0

    @property
    def noise_pids(self) -> tuple[int, ...]:
        return tuple(t.pid for t in self.noise)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "name": self.name,
            "hosts": self.hosts,
            "rates": self.rates,
            "noise_plane": self.noise_plane,
            "noise": [t.to_dict() for t in self.noise],
            "created_at": self.created_at,
        }

    @classmethod
    def from_dict(cls, name: str, data: Any) -> LabState | None:
        """What a state file of any version says that is usable; None when it is not a lab state."""
        if not isinstance(data, dict) or data.get("name") != name:
            return None
        hosts = data.get("hosts")
        if not isinstance(hosts, int) or isinstance(hosts, bool) or not 2 <= hosts <= 16:
            return None
        rates = data.get("rates")
        plane = data.get("noise_plane")
        created = data.get("created_at")
        noise = data.get("noise")
        return cls(
            name=name,
            hosts=hosts,
            rates={str(k): str(v) for k, v in rates.items()} if isinstance(rates, dict) else {},
            noise_plane=plane if isinstance(plane, str) and plane in PLANES else "",
            noise=tuple(t for t in map(Started.from_dict, noise if isinstance(noise, list) else []) if t),
            created_at=float(created) if isinstance(created, int | float) and not isinstance(created, bool) else 0.0,
        )


def ns_host(name: str, i: int) -> str:
    return f"{PREFIX}{name}-h{i}"


def ns_switch(name: str) -> str:
    return f"{PREFIX}{name}-sw"


def addr(plane: str, i: int) -> str:
    return f"10.210.{PLANES[plane]}.{i}"


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise InputError(f"lab name {name!r}: use 1-6 lowercase letters or digits")


def _check_plane(plane: str) -> None:
    if plane not in PLANES:
        raise InputError(f"unknown plane {plane!r}; use one of {', '.join(PLANES)}")


def _ip(*args: str) -> None:
    run(["ip", *args], timeout_s=_CMD_TIMEOUT_S, check=True)


def _state_path(name: str) -> Path:
    check_name(name)  # never a path: `lab noise ../x` must not read or write outside STATE_DIR
    return STATE_DIR / f"{name}.json"


#: Largest state file read (ours are ~1 kB): an edited or replaced one cannot exhaust memory.
_MAX_STATE_BYTES = 1 << 20


def load_state(name: str) -> LabState | None:
    """The lab's state, or None when there is none usable (missing, damaged, not a lab's)."""
    path = _state_path(name)
    try:
        if not path.is_file() or path.stat().st_size > _MAX_STATE_BYTES:  # a FIFO would block
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None
    return LabState.from_dict(name, data)


def _save_state(state: LabState) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    _state_path(state.name).write_text(json.dumps(state.to_dict(), indent=1), encoding="utf-8")


def existing_namespaces(name: str | None = None) -> list[str]:
    out = run(["ip", "netns", "list"], timeout_s=_CMD_TIMEOUT_S, check=True).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    prefix = f"{PREFIX}{name}-" if name else PREFIX
    return sorted(n for n in names if n.startswith(prefix))


#: A tc rate: a number and one of tc's units (tc(8) "RATES"); anything else fails in tc
#: after namespaces were already created.
_RATE = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,6})?(?:bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)")


def validate(name: str, *, hosts: int = 2, rates: dict[str, str] | None = None, noise: str = "") -> dict[str, str]:
    """Every check ``up`` makes before touching the system (``lab up --dry-run`` runs exactly these)."""
    check_name(name)
    if not 2 <= hosts <= 16:
        raise InputError(f"--hosts {hosts}: a lab has 2 to 16 hosts")
    rates = dict(rates or {})
    for plane, rate in rates.items():
        _check_plane(plane)
        if not _RATE.fullmatch(rate):
            raise InputError(f"--rate {plane}={rate[:40]!r}: use a tc rate such as 100mbit or 1gbit")
    if noise:
        _check_plane(noise)
    return rates


def layout(name: str, *, hosts: int, rates: dict[str, str], noise: str) -> dict[str, Any]:
    """What ``up`` would create (``lab up --dry-run``): namespaces, bridges, addresses, caps, noise."""
    return {
        "switch_netns": ns_switch(name),
        "bridges": list(BRIDGES.values()),
        "hosts": [
            {"netns": ns_host(name, i), **{p: f"{IFNAMES[p]} {addr(p, i)}/24" for p in PLANES}}
            for i in range(1, hosts + 1)
        ],
        "rates": rates,
        "noise": noise or None,
    }


def up(name: str, *, hosts: int = 2, rates: dict[str, str] | None = None, noise: str = "") -> LabState:
    """Create the lab (first removing any earlier lab of the same name)."""
    rates = validate(name, hosts=hosts, rates=rates, noise=noise)
    down(name)
    sw = ns_switch(name)
    try:
        _ip("netns", "add", sw)
        _ip("-n", sw, "link", "set", "lo", "up")
        for bridge in BRIDGES.values():
            _ip("-n", sw, "link", "add", bridge, "type", "bridge")
            _ip("-n", sw, "link", "set", bridge, "up")
        for i in range(1, hosts + 1):
            ns = ns_host(name, i)
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            for plane, ifname in IFNAMES.items():
                port = f"h{i}-{plane[:4]}"
                _ip("-n", sw, "link", "add", port, "type", "veth", "peer", "name", ifname, "netns", ns)
                _ip("-n", sw, "link", "set", port, "master", BRIDGES[plane])
                _ip("-n", sw, "link", "set", port, "up")
                _ip("-n", ns, "addr", "add", f"{addr(plane, i)}/24", "dev", ifname)
                _ip("-n", ns, "link", "set", ifname, "up")
                if plane in rates:
                    # burst 32kbit / latency 50ms as measured working here (this-machine.md item 2).
                    run(
                        [
                            "tc",
                            "-n",
                            ns,
                            "qdisc",
                            "add",
                            "dev",
                            ifname,
                            "root",
                            "tbf",
                            "rate",
                            rates[plane],
                            "burst",
                            "32kbit",
                            "latency",
                            "50ms",
                        ],
                        timeout_s=_CMD_TIMEOUT_S,
                        check=True,
                    )
        state = LabState(name=name, hosts=hosts, rates=rates, created_at=time.time())
        _save_state(state)
        if noise:
            state = start_noise(name, noise)
    except BaseException:
        down(name)
        raise
    return state


def start_noise(name: str, plane: str) -> LabState:
    """Start (or move) the noisy neighbour: iperf3 --bidir from host 1 to the last host on ``plane``."""
    _check_plane(plane)
    state = _require(name)
    stop_noise(name)
    last = state.hosts
    log = STATE_DIR / f"{name}-noise.log"
    pids = [
        spawn_detached(
            [
                "ip",
                "netns",
                "exec",
                ns_host(name, last),
                "iperf3",
                "-s",
                "-B",
                addr(plane, last),
                "-p",
                str(NOISE_PORT),
            ],
            log=log,
        )
    ]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not _listening(ns_host(name, last), NOISE_PORT):
        time.sleep(0.05)
    pids.append(
        spawn_detached(
            [
                "ip",
                "netns",
                "exec",
                ns_host(name, 1),
                "iperf3",
                "-c",
                addr(plane, last),
                "-p",
                str(NOISE_PORT),
                "-t",
                "86400",
                "--bidir",
            ],
            log=log,
        )
    )
    state = replace(state, noise_plane=plane, noise=tuple(pids))
    _save_state(state)
    return state


def _listening(ns: str, port: int) -> bool:
    out = run(["ip", "netns", "exec", ns, "cat", "/proc/net/tcp"], timeout_s=_CMD_TIMEOUT_S).stdout
    return any(
        line.split()[1].endswith(f":{port:04X}") and line.split()[3] == "0A"
        for line in out.splitlines()[1:]
        if len(line.split()) > 3
    )


def stop_noise(name: str) -> list[str]:
    """Stop the noisy neighbour; returns why any process the state names was left alone."""
    state = load_state(name)
    if state is None:
        return []
    left = [why for why in map(stop_started, state.noise) if why]
    _save_state(replace(state, noise_plane="", noise=()))
    return left


def down(name: str) -> list[str]:
    """Remove the lab's namespaces and processes; returns the namespaces removed. Idempotent."""
    check_name(name)
    stop_noise(name)
    removed = []
    for ns in existing_namespaces(name):
        # Anything still running inside our namespaces was started by us (a probe rank or noise).
        pids = run(["ip", "netns", "pids", ns], timeout_s=_CMD_TIMEOUT_S).stdout.split()
        for pid in (int(p) for p in pids if p.isdigit()):
            if pid > 1 and pid != os.getpid():  # never init, never ourselves (run from inside the lab)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        try:
            _ip("netns", "del", ns)
        except CommandFailed:
            continue
        removed.append(ns)
    for path in (_state_path(name), STATE_DIR / f"{name}-noise.log"):
        path.unlink(missing_ok=True)
    return removed


def _require(name: str) -> LabState:
    state = load_state(name)
    if state is None or not existing_namespaces(name):
        raise InputError(f"lab {name!r} is not up; run `gpufabric lab up {name}` first")
    return state


def status(name: str) -> dict[str, Any]:
    """JSON-able description of the lab: hosts, addresses, qdiscs, noise."""
    check_name(name)
    state = load_state(name)
    namespaces = existing_namespaces(name)
    if state is None:
        return {"name": name, "up": False, "namespaces": namespaces}
    hosts = []
    for i in range(1, state.hosts + 1):
        ns = ns_host(name, i)
        planes = {}
        for plane, ifname in IFNAMES.items():
            qdisc = run(["tc", "-n", ns, "qdisc", "show", "dev", ifname], timeout_s=_CMD_TIMEOUT_S).stdout.strip()
            planes[plane] = {"ifname": ifname, "addr": addr(plane, i), "qdisc": qdisc.split("\n")[0]}
        hosts.append({"name": f"h{i}", "netns": ns, "up": ns in namespaces, "planes": planes})
    alive = [t.pid for t in state.noise if not not_ours(t)]
    return {
        "name": name,
        "up": all(h["up"] for h in hosts),
        "switch_netns": ns_switch(name),
        "hosts": hosts,
        "rates": state.rates,
        "noise": {"plane": state.noise_plane or None, "pids": list(state.noise_pids), "alive": alive},
    }


def lab_hosts(name: str, *, plane: str = "data") -> list[Host]:
    """Launcher hosts for the lab: rendezvous on the management plane, data on ``plane``."""
    _check_plane(plane)
    state = _require(name)
    return [
        Host(name=f"h{i}", netns=ns_host(name, i), control_addr=addr("mgmt", i), data_ifname=IFNAMES[plane])
        for i in range(1, state.hosts + 1)
    ]
