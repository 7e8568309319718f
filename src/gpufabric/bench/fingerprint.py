"""Reproducibility manifest: everything on a host that can change a benchmark's result.

``collect()`` snapshots versions, the environment (every ``NCCL_*`` variable,
``CUBLAS_WORKSPACE_CONFIG``, thread counts), kernel and CPU settings, NICs, RDMA devices,
GPUs and topology, plus the rank -> host -> device map of a run when one is given.
``diff()`` compares two manifests key by key and ignores what changes on every call
(timestamps, free memory), so what remains is drift.

Why these keys: bitwise reproducibility of collectives is lost when the reduction order
changes, which follows NCCL's algorithm/protocol/channel choice, the rank -> GPU mapping
and library versions (reference/models.md 1.6 item 4: nccl #23, #1497, RCCL #11661,
SGLang #34159); ``CUBLAS_WORKSPACE_CONFIG`` is required for deterministic cuBLAS
(PyTorch "Reproducibility" notes).

Every source is optional: a missing file or tool is recorded as ``"unavailable"`` and
never raises. Subprocesses run concurrently with a short timeout so ``collect`` stays
under ~2 s.
"""

from __future__ import annotations

import concurrent.futures
import glob
import importlib.metadata
import os
import platform
import re
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufabric.errors import EnvironmentFailure, InputError
from gpufabric.exec.process import run
from gpufabric.jsonable import to_jsonable

UNAVAILABLE = "unavailable"

#: Environment variables recorded besides every NCCL_* one (prefix match for the *_ ones).
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_", "UCX_", "OMPI_MCA_", "CUDA_", "NVIDIA_", "PYTORCH_")
ENV_NAMES = (
    "CUBLAS_WORKSPACE_CONFIG",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTHONHASHSEED",
    "TORCH_DETERMINISTIC",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "LD_LIBRARY_PATH",
)

#: Keys (dotted, prefix match) that differ on every call or every process and so are not drift.
VOLATILE = (
    "collected_at",
    "collect_duration_s",
    "memory.available_bytes",
    "env.MASTER_PORT",
    "pid",
    "host",  # differs between nodes by design; per-node drift is everything else
)

#: Keys a saved manifest carries from the JSON envelope, not from the host.
_ENVELOPE = ("schema_version", "gpufabric_version")

#: Python distributions whose version can change numerics or communication.
PACKAGES = (
    "torch",
    "numpy",
    "safetensors",
    "gpufabric",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "nvidia-cublas-cu12",
    "nvidia-cudnn-cu12",
    "triton",
)

#: Tools whose version is recorded: argv that prints it, and a regex for the version.
TOOLS: dict[str, tuple[tuple[str, ...], str]] = {
    "fio": (("fio", "--version"), r"fio-(\S+)"),
    "iperf3": (("iperf3", "--version"), r"iperf (\S+)"),
    "sockperf": (("sockperf", "--version"), r"[Vv]ersion:?\s*(\S+)"),
    "mpirun": (("mpirun", "--version"), r"\(Open MPI\) (\S+)"),
    # slurmd -V needs no slurm.conf; srun/sinfo --version fail without one.
    "slurm": (("slurmd", "-V"), r"slurm(?:-wlm)? (\S+)"),
    "nvidia-smi": (("nvidia-smi", "--version"), r"DRIVER version\s*:\s*(\S+)"),
    "ib_write_bw": (("ib_write_bw", "--version"), r"[Vv]ersion:?\s*(\S+)"),
    "nvme": (("nvme", "version"), r"nvme version (\S+)"),
}

_SUBPROCESS_TIMEOUT_S = 1.5


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _run(argv: tuple[str, ...]) -> str | None:
    """Output of a short query command, or None when it is missing, fails or hangs.

    A missing source must never fail a fingerprint: these are sub-second queries whose
    failure is simply recorded as unavailable.
    """
    try:
        done = run(argv, timeout_s=_SUBPROCESS_TIMEOUT_S)
    except (EnvironmentFailure, InputError, OSError):
        return None
    text = done.stdout + done.stderr
    return text if done.returncode == 0 or text.strip() else None


def _env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: env[k] for k in sorted(env) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def _cpu() -> dict[str, Any]:
    info = _read("/proc/cpuinfo") or ""
    model = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    return {
        "model": model.group(1).strip() if model else platform.processor() or UNAVAILABLE,
        "logical_cpus": os.cpu_count(),
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") or UNAVAILABLE,
        "numa_nodes": len(glob.glob("/sys/devices/system/node/node[0-9]*")) or UNAVAILABLE,
    }


def _memory() -> dict[str, Any]:
    info = _read("/proc/meminfo") or ""

    def kib(key: str) -> int | None:
        m = re.search(rf"^{key}:\s*(\d+) kB", info, re.M)
        return int(m.group(1)) * 1024 if m else None

    thp = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    thp_mode = re.search(r"\[(\w+)\]", thp) if thp else None  # the bracketed word is the active mode
    return {
        "total_bytes": kib("MemTotal"),
        "available_bytes": kib("MemAvailable"),
        "transparent_hugepages": thp_mode.group(1) if thp_mode else UNAVAILABLE,
    }


def _nics() -> dict[str, Any]:
    nics: dict[str, Any] = {}
    for dev in sorted(glob.glob("/sys/class/net/*")):
        name = os.path.basename(dev)
        driver = os.path.realpath(f"{dev}/device/driver") if os.path.exists(f"{dev}/device/driver") else ""
        nics[name] = {
            "mtu": int(_read(f"{dev}/mtu") or 0) or None,
            "speed_mbps": _int_or_none(_read(f"{dev}/speed")),
            "driver": os.path.basename(driver) or None,
            "operstate": _read(f"{dev}/operstate"),
        }
    return nics


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None and int(text) >= 0 else None
    except ValueError:
        return None


def _rdma() -> list[dict[str, Any]] | str:
    root = Path("/sys/class/infiniband")
    if not root.is_dir():
        return UNAVAILABLE
    out = []
    for dev in sorted(root.iterdir()):
        ports = {}
        for port in sorted((dev / "ports").glob("*")):
            ports[port.name] = {
                "rate": _read(port / "rate"),
                "state": _read(port / "state"),
                "link_layer": _read(port / "link_layer"),
            }
        out.append({"name": dev.name, "fw_ver": _read(dev / "fw_ver"), "ports": ports})
    return out


def _gpus(smi: str | None) -> list[dict[str, str]] | str:
    if not smi:
        return UNAVAILABLE
    rows = []
    for line in smi.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 5:
            rows.append(
                {"index": parts[0], "name": parts[1], "uuid": parts[2], "driver": parts[3], "pci_bus_id": parts[4]}
            )
    return rows or UNAVAILABLE


def _versions() -> dict[str, str]:
    out: dict[str, str] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _torch_build() -> dict[str, Any]:
    """CUDA/NCCL versions torch was built with, without importing torch when it is not loaded.

    Importing torch costs seconds on a small machine; when a worker already imported it we
    ask it directly (that also gives the NCCL runtime version), else read torch/version.py.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        nccl: Any = UNAVAILABLE
        try:
            if torch.distributed.is_nccl_available():
                nccl = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception:
            nccl = UNAVAILABLE
        return {
            "cuda": torch.version.cuda or None,
            "git": torch.version.git_version,
            "nccl": nccl,
            "cuda_available": bool(torch.cuda.is_available()),
            "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        }
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return {"cuda": UNAVAILABLE, "nccl": UNAVAILABLE}
    text = _read(Path(list(spec.submodule_search_locations)[0]) / "version.py") or ""
    cuda = re.search(r"^cuda[^=]*=\s*(.+)$", text, re.M)
    git = re.search(r"^git_version[^=]*=\s*'([^']*)'", text, re.M)
    cuda_value = cuda.group(1).strip().strip("'\"") if cuda else UNAVAILABLE
    return {
        "cuda": None if cuda_value == "None" else cuda_value,
        "git": git.group(1) if git else UNAVAILABLE,
        "nccl": UNAVAILABLE,
    }


def _nccl_conf(env: Mapping[str, str]) -> dict[str, str]:
    paths = ["/etc/nccl.conf", os.path.expanduser("~/.nccl.conf")]
    if env.get("NCCL_CONF_FILE"):
        paths.append(env["NCCL_CONF_FILE"])
    return {p: text for p in paths if (text := _read(p)) is not None}


def collect(*, env: Mapping[str, str] | None = None, run: Any = None) -> dict[str, Any]:
    """Snapshot of this host. JSON-able; never raises for a missing source.

    Args:
        env: the environment the benchmark runs with (default: this process's).
        run: optional description of a run, typically ``{"ranks": [{"rank", "host",
            "device", "local_rank"}], "launcher": ..., "backend": ...}``; stored under
            ``run`` so a changed rank placement shows up as drift.
    """
    started = time.monotonic()
    env = dict(os.environ if env is None else env)
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        tool_out = {name: pool.submit(_run, argv) for name, (argv, _) in TOOLS.items()}
        smi = pool.submit(
            _run, ("nvidia-smi", "--query-gpu=index,name,uuid,driver_version,pci.bus_id", "--format=csv,noheader")
        )
        topo = pool.submit(_run, ("nvidia-smi", "topo", "-m"))
        tools: dict[str, str | None] = {}
        for name, future in tool_out.items():
            text = future.result()
            match = re.search(TOOLS[name][1], text or "")
            tools[name] = match.group(1) if match else (UNAVAILABLE if text is None else text.strip()[:80])
        gpus = _gpus(smi.result())
        topology_text = topo.result()
    uname = platform.uname()
    manifest: dict[str, Any] = {
        "collected_at": time.time(),
        "host": socket.gethostname(),
        "kernel": {
            "release": uname.release,
            "version": uname.version,
            "machine": uname.machine,
            "cmdline": _read("/proc/cmdline") or UNAVAILABLE,
        },
        "os": _os_release(),
        "cpu": _cpu(),
        "memory": _memory(),
        "nics": _nics(),
        "rdma": _rdma(),
        "gpus": gpus,
        "driver": gpus[0]["driver"] if isinstance(gpus, list) and gpus else UNAVAILABLE,
        "torch_build": _torch_build(),
        "versions": _versions(),
        "tools": tools,
        "env": _env(env),
        "nccl_conf": _nccl_conf(env),
        "tuned_profile": _read("/etc/tuned/active_profile") or UNAVAILABLE,
        "topology": topology_text.strip() if topology_text else UNAVAILABLE,
        "run": to_jsonable(run),
    }
    manifest["collect_duration_s"] = round(time.monotonic() - started, 3)
    return manifest


def _os_release() -> str:
    text = _read("/etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', text, re.M)
    return m.group(1) if m else UNAVAILABLE


@dataclass(frozen=True, slots=True, kw_only=True)
class Drift:
    """One key whose value differs between a baseline manifest and another one."""

    key: str  # dotted path, e.g. "env.NCCL_ALGO" or "versions.torch"
    baseline: Any  # value in the baseline (None when absent)
    other: Any  # value in the other manifest (None when absent)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> {dotted.key: leaf}; lists stay leaves (compared as a whole)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _volatile(key: str) -> bool:
    return any(key == v or key.startswith(v + ".") for v in VOLATILE)


def diff(baseline: Mapping[str, Any], other: Mapping[str, Any]) -> list[Drift]:
    """Keys whose values differ (added, removed or changed), volatile keys excluded, sorted."""
    a, b = flatten(baseline), flatten(other)
    drift = []
    for key in sorted(set(a) | set(b)):
        if _volatile(key) or key in _ENVELOPE:
            continue
        if a.get(key) != b.get(key):
            drift.append(Drift(key=key, baseline=a.get(key), other=b.get(key)))
    return drift
