"""iperf3 runner: a loopback (or ``--server``) TCP/UDP throughput test with ``-J``.

Without ``--server`` a local ``iperf3 -s`` is started for each test and always stopped
(process.start_server); with it, the client connects to a server the user runs there.
"""

from __future__ import annotations

from pathlib import Path

from gpufabric.bench.profiles import Iperf3Profile
from gpufabric.bench.runners import PlannedTest, ServerSpec


def plan(
    profile: Iperf3Profile, *, scratch: Path, timeout_s: float, server_addr: str | None = None, repeat: int = 1
) -> PlannedTest:
    server = None if server_addr else ServerSpec(argv=tuple(profile.server_argv()), port=profile.port)
    return PlannedTest(
        name=f"iperf3.{profile.name}",
        tool="iperf3",
        argv=tuple(profile.argv(server_addr or "127.0.0.1")),
        timeout_s=timeout_s,
        server=server,
        cwd=str(scratch),
        params={
            "streams": str(profile.streams),
            "duration_s": f"{profile.duration_s:g}",
            "protocol": "udp" if profile.udp else "tcp",
            "reverse": str(int(profile.reverse)),
            "server": server_addr or "127.0.0.1 (loopback)",
        },
        repeat=repeat,
    )
