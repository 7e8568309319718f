"""Run generated scripts with their external commands stubbed, and detect injected code.

Stubs (a PATH directory of tiny scripts) stand in for the commands a generated script
drives (torchrun, srun, scontrol, ip, mlnx_qos, dcb, python3, modprobe): they record
their argv and succeed. Everything else (touch, id, cat, mkdir, awk) stays real, so a
payload like ``$(touch CANARY)`` that escaped its quoting leaves the canary file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

STUBBED = ("torchrun", "srun", "scontrol", "ip", "mlnx_qos", "dcb", "python3", "modprobe", "sbatch", "nvme")

#: Payloads: each one, if it escapes its quoting, creates the canary (CANARY is replaced).
PAYLOADS = (
    "x\ntouch CANARY\n",
    "$(touch CANARY)",
    "`touch CANARY`",
    "a'; touch CANARY; '",
    'a"; touch CANARY; "',
    "a;touch CANARY",
    "a|touch CANARY",
    "a&&touch CANARY",
    "${IFS}$(touch${IFS}CANARY)",
    "x\r\ntouch CANARY",
    '" accept; } chain evil { type filter hook input priority 0; policy accept; #',
    "} ; flush ruleset ;",
    "a\\\ntouch CANARY",
    "../../../tmp/escape",
    "a=b c",
    "a#b",
    "ünïcödé",
    "x" * 300,
)


def payloads(canary: Path) -> list[str]:
    return [p.replace("CANARY", str(canary)) for p in PAYLOADS]


def make_stubs(root: Path) -> Path:
    """A PATH directory of recording stubs; `ip` and `scontrol` print plausible output."""
    bin_dir = root / "stubs"
    bin_dir.mkdir(parents=True, exist_ok=True)
    log = root / "stub.log"
    outputs = {
        "ip": "2: ctl0    inet 10.20.0.10/16 brd 10.20.255.255 scope global ctl0",
        "scontrol": "node-1",
        "srun": "2: ctl0    inet 10.20.0.10/16 brd 10.20.255.255 scope global ctl0",
    }
    for name in STUBBED:
        if (bin_dir / name).exists():
            continue  # a test replaced this stub (a failing tool, say): keep it
        text = f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >> "{log}"\n'
        if name in outputs:
            text += f"echo '{outputs[name]}'\n"
        (bin_dir / name).write_text(text + "exit 0\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def fake_sysfs(root: Path, devices: list[str], netdevs: list[str]) -> Path:
    """A sysfs tree like the inbox mlx5 driver's: RDMA devices with one netdev each, no ECN knobs."""
    sysfs = root / "sys"
    (sysfs / "kernel/config/rdma_cm").mkdir(parents=True, exist_ok=True)
    for i, dev in enumerate(devices):
        nd = f"eth{i}"
        (sysfs / f"class/infiniband/{dev}/device/net/{nd}").mkdir(parents=True, exist_ok=True)
        (sysfs / f"class/net/{nd}").mkdir(parents=True, exist_ok=True)
    for nd in netdevs:
        (sysfs / f"class/net/{nd}/device/infiniband/mlx5_9").mkdir(parents=True, exist_ok=True)
        (sysfs / f"class/net/{nd}/dev_port").write_text("0\n")
    return sysfs


def run_script(
    script: Path, work: Path, *, env_file: Path | None = None, sysfs: Path | None = None, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` under its shebang's shell with stubs first on PATH, in ``work``."""
    bin_dir = make_stubs(work)
    first = script.read_text().split("\n", 1)[0]
    shell = shutil.which("sh" if first == "#!/bin/sh" else "bash")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(work),
        "LC_ALL": "C",
        "RDZV_HOST": "10.20.0.10",
        "SLURM_JOB_NODELIST": "node-[1-2]",
        "SLURM_NNODES": "2",
        "SLURM_JOB_ID": "7",
    }
    if env_file is not None:
        env["GPUFABRIC_NCCL_ENV"] = str(env_file)
    if sysfs is not None:
        env["GPUFABRIC_SYSFS"] = str(sysfs)
    return subprocess.run(
        [shell, str(script), *args], cwd=work, env=env, capture_output=True, text=True, timeout=30, check=False
    )


def source_env_file(path: Path, work: Path) -> subprocess.CompletedProcess[str]:
    """Source an env file the way the wrappers do (set -a; . FILE) and print the environment."""
    bin_dir = make_stubs(work)
    return subprocess.run(
        ["bash", "-c", 'set -eu; set -a; . "$1"; set +a; env -0', "bash", str(path)],
        cwd=work,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def nft_check(path: Path) -> subprocess.CompletedProcess[str] | None:
    """``nft -c -f`` (in a user namespace when not root); None when nft is missing."""
    nft = shutil.which("nft")
    if nft is None:
        return None
    argv = [nft, "-c", "-f", str(path)]
    if os.geteuid() != 0:
        argv = ["unshare", "-rn", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
