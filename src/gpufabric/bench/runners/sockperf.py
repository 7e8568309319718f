"""sockperf runner: ping-pong latency with the per-packet ``--full-log`` kept as raw samples."""

from __future__ import annotations

from pathlib import Path

from gpufabric.bench.profiles import SockperfProfile
from gpufabric.bench.runners import PlannedTest, ServerSpec


def plan(
    profile: SockperfProfile, *, scratch: Path, timeout_s: float, server_addr: str | None = None, repeat: int = 1
) -> PlannedTest:
    log = scratch / f"sockperf-{profile.name}-{repeat}.csv" if profile.full_log else None
    server = None
    if not server_addr:
        server = ServerSpec(
            argv=tuple(profile.server_argv()), port=profile.port, protocol="tcp" if profile.tcp else "udp"
        )
    return PlannedTest(
        name=f"sockperf.{profile.name}",
        tool="sockperf",
        argv=tuple(profile.argv(server_addr or "127.0.0.1", log)),
        timeout_s=timeout_s,
        server=server,
        cwd=str(scratch),
        log_file=str(log) if log else None,
        params={
            "protocol": "tcp" if profile.tcp else "udp",
            "duration_s": str(profile.duration_s),
            "msg_size_bytes": str(profile.msg_size),
            "server": server_addr or "127.0.0.1 (loopback)",
        },
        repeat=repeat,
    )
