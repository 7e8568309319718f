"""perftest runner (ib_write_lat, ib_send_lat, ib_read_lat, ib_write_bw) with ``--out_json``.

Runs only where ``ibv_devices`` lists a device; otherwise the test is skipped with the
reason ibv_devices gave (here: "Failed to get IB devices list: Function not
implemented", reference/this-machine.md item 4). On one host both sides run over
loopback on the first device; with ``--server`` the client targets that host, whose
server side the user starts with the same options (perftest README: "The SAME OPTIONS
must be passed to both server and client").
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gpufabric.bench.runners import PlannedTest, ServerSpec
from gpufabric.errors import CommandTimeout, ToolNotFound
from gpufabric.exec import process

#: perftest's out-of-band TCP port (-p), inside this tool's loopback range.
PORT = 5290


def rdma_devices() -> tuple[list[str], str]:
    """(device names, reason when there are none)."""
    try:
        done = process.run(["ibv_devices"], timeout_s=10)
    except ToolNotFound:
        return [], "skipped: ibv_devices not installed (rdma-core / ibverbs-utils)"
    except CommandTimeout:
        return [], "skipped: ibv_devices hung"
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
        return [], f"skipped: no RDMA device (ibv_devices: {tail[0]})"
    names = []
    for line in done.stdout.splitlines():
        fields = line.split()
        if fields and fields[0] not in ("device", "------"):
            names.append(fields[0])
    return names, "" if names else "skipped: no RDMA device (ibv_devices lists none)"


def plan(
    binary: str,
    *,
    scratch: Path,
    timeout_s: float,
    devices: list[str],
    no_device_reason: str,
    server_addr: str | None = None,
    repeat: int = 1,
) -> PlannedTest:
    name = f"perftest.{binary}"
    out = scratch / f"{binary}-{repeat}.json"
    skip = ""
    if shutil.which(binary) is None:
        skip = "skipped: perftest not installed"
    elif not devices:
        skip = no_device_reason
    device = devices[0] if devices else "<device>"
    common = [binary, "-d", device, "-p", str(PORT), "-F"]
    size = ["-s", "8388608"] if binary.endswith("_bw") else ["-s", "2"]
    server = None
    if not server_addr:
        server = ServerSpec(
            argv=tuple(common + size + ["--out_json", f"--out_json_file={scratch / (binary + '-server.json')}"]),
            port=PORT,
        )
    argv = common + size + ["--out_json", f"--out_json_file={out}", server_addr or "127.0.0.1"]
    return PlannedTest(
        name=name,
        tool="perftest",
        argv=tuple(argv),
        timeout_s=timeout_s,
        server=server,
        cwd=str(scratch),
        log_file=str(out),
        skip_reason=skip,
        params={"device": device, "msg_size_bytes": size[1]},
        repeat=repeat,
    )
