"""NCCL and PyTorch checks (NCCL-*, TORCH-*), reference/security-config.md 4 and "Audit checks"."""

from __future__ import annotations

from collections.abc import Iterator

from gpufabric.audit import intervals as iv
from gpufabric.audit.collect import Facts, HostView
from gpufabric.audit.envfiles import nccl_settings
from gpufabric.audit.exposure import admitted_ports, firewalled_views, planes_of, role_spans
from gpufabric.audit.findings import Finding, NotAvailable, Severity, check, finding
from gpufabric.spec.security import TORCH_RENDEZVOUS

DEBUG_KNOBS = {"NCCL_DEBUG": "TRACE", "NCCL_P2P_DISABLE": "1", "NCCL_NET_GDR_LEVEL": "0", "NCCL_SHM_DISABLE": "1"}
PINS = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NVLS_ENABLE")


def _compute_views(facts: Facts) -> Iterator[tuple[HostView, dict[str, str], list[str]]]:
    seen = False
    for view in facts.hosts:
        kind = facts.role_kind(view.role)
        if kind not in (None, "compute"):
            continue
        settings = nccl_settings(view)
        if settings is None:
            continue
        seen = True
        yield view, settings[0], settings[1]
    if not seen:
        raise NotAvailable("no NCCL settings (/etc/gpufabric/nccl.env, /etc/nccl.conf or NCCL_* in the environment)")


def _ifname_matches(spec: str, iface: str) -> bool:
    """NCCL_SOCKET_IFNAME semantics: comma list of prefixes, '=' exact, '^' exclude."""
    exact = spec.startswith("=")
    exclude = spec.startswith("^")
    body = spec.lstrip("=^")
    items = [i for i in body.split(",") if i]
    hit = any(iface == i if exact else iface.startswith(i) for i in items)
    return not hit if exclude else hit


@check(
    "NCCL-01",
    "Bootstrap interface not pinned to the control plane",
    Severity.high,
    "set NCCL_SOCKET_IFNAME==<control-plane interface> (exact match)",
)
def nccl01(facts: Facts) -> Iterator[Finding]:
    ctl = [p.interface for p in facts.policy.planes if p.kind == "control"] if facts.policy else []
    mgmt = [p.interface for p in facts.policy.planes if p.kind == "management"] if facts.policy else []
    for view, env, sources in _compute_views(facts):
        value = env.get("NCCL_SOCKET_IFNAME")
        if not value:
            yield finding(
                "NCCL-01",
                view.name,
                f"NCCL_SOCKET_IFNAME unset in {', '.join(sources)}: bootstrap lands on"
                " whatever interface NCCL finds first",
            )
        elif any(m and _ifname_matches(value, m) for m in mgmt):
            yield finding("NCCL-01", view.name, f"NCCL_SOCKET_IFNAME={value} matches the management interface")
        elif ctl and not any(c and _ifname_matches(value, c) for c in ctl):
            yield finding(
                "NCCL-01", view.name, f"NCCL_SOCKET_IFNAME={value} does not select the control interface {ctl[0]}"
            )


@check("NCCL-02", "HCA selection too broad", Severity.medium, "set NCCL_IB_HCA==dev:port,... (exact list)")
def nccl02(facts: Facts) -> Iterator[Finding]:
    if facts.fabric_kind not in ("ib", "roce"):
        raise NotAvailable("not an RDMA design (policy.json design.fabric_kind)")
    for view, env, _sources in _compute_views(facts):
        value = env.get("NCCL_IB_HCA", "")
        if not value.startswith("="):
            yield finding("NCCL-02", view.name, f"NCCL_IB_HCA={value or '(unset)'} is not an exact '=' list")


@check(
    "NCCL-03",
    "Hidden or leftover NCCL configuration",
    Severity.medium,
    "remove /etc/nccl.conf and debug-only variables; keep settings in the gpufabric env file",
)
def nccl03(facts: Facts) -> Iterator[Finding]:
    for view, env, sources in _compute_views(facts):
        if "/etc/nccl.conf" in sources and (view.read("/etc/nccl.conf") or "").strip():
            yield finding(
                "NCCL-03",
                view.name,
                "/etc/nccl.conf is present: NCCL applies it silently",
                location=view.where("/etc/nccl.conf"),
            )
        for key, bad in DEBUG_KNOBS.items():
            if env.get(key, "").upper() == bad:
                yield finding("NCCL-03", view.name, f"{key}={env[key]} (debug-only knob)")
        if facts.reproducibility != "bitwise":
            for key in ("NCCL_ALGO", "NCCL_PROTO"):
                if key in env:
                    yield finding("NCCL-03", view.name, f"{key}={env[key]} pinned without bitwise reproducibility")


@check(
    "NCCL-04",
    "IB/RDMA transport disabled on an RDMA design",
    Severity.medium,
    "remove NCCL_IB_DISABLE=1 / NCCL_NET=Socket",
)
def nccl04(facts: Facts) -> Iterator[Finding]:
    if facts.fabric_kind not in ("ib", "roce"):
        raise NotAvailable("not an RDMA design (policy.json design.fabric_kind)")
    for view, env, _sources in _compute_views(facts):
        if env.get("NCCL_IB_DISABLE") == "1" or env.get("NCCL_NET", "").lower() == "socket":
            yield finding("NCCL-04", view.name, "NCCL_IB_DISABLE=1 or NCCL_NET=Socket")


@check(
    "NCCL-05",
    "Determinism knobs not pinned while bitwise reproducibility is requested",
    Severity.medium,
    "pin NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS and NCCL_NVLS_ENABLE=0",
)
def nccl05(facts: Facts) -> Iterator[Finding]:
    if facts.reproducibility != "bitwise":
        raise NotAvailable("the policy does not request bitwise reproducibility")
    for view, env, _sources in _compute_views(facts):
        missing = [k for k in PINS if k not in env]
        if env.get("NCCL_NVLS_ENABLE", "0") != "0":
            missing.append("NCCL_NVLS_ENABLE=0")
        if missing:
            yield finding("NCCL-05", view.name, f"not pinned: {', '.join(missing)}")


@check(
    "NCCL-06", "RAS listener off loopback", Severity.medium, "set NCCL_RAS_ADDR=127.0.0.1:28028 (or NCCL_RAS_ENABLE=0)"
)
def nccl06(facts: Facts) -> Iterator[Finding]:
    for view, env, _sources in _compute_views(facts):
        addr = env.get("NCCL_RAS_ADDR", "localhost:28028")
        host = addr.rsplit(":", 1)[0].strip("[]")
        if env.get("NCCL_RAS_ENABLE") != "0" and host not in ("127.0.0.1", "::1", "localhost"):
            yield finding("NCCL-06", view.name, f"NCCL_RAS_ADDR={addr}")
        for lst in view.listeners or []:
            if lst["port"] == 28028 and lst["local_addr"] not in ("127.0.0.1", "::1"):
                yield finding("NCCL-06", view.name, f"listener on {lst['local_addr']}:28028 ({lst['process']})")


@check(
    "TORCH-01",
    "Rendezvous or TCPStore reachable beyond the job's compute nodes",
    Severity.critical,
    "admit 29400 and 29500-29999 (the launchers' per-job ports) only on the control plane and only from compute nodes",
)
def torch01(facts: Facts) -> Iterator[Finding]:
    if facts.policy is None:
        raise NotAvailable("no policy.json: cannot tell planes and compute nodes apart")
    compute_spans = {p.name: role_spans(facts, "compute", p.name) for p in facts.policy.planes if p.kind == "control"}
    for view, rs in firewalled_views(facts):
        for plane, kind, iface in planes_of(facts, view):
            allowed_src = compute_spans.get(plane, ())
            for lo, hi in TORCH_RENDEZVOUS:
                # adjacent pieces open to the same extra sources make one finding
                pieces: list[tuple[int, int, tuple[iv.Span, ...]]] = []
                for start, end, sources in admitted_ports(rs, iface, "tcp", lo, hi):
                    extra = iv.subtract(sources, allowed_src)
                    if pieces and pieces[-1][2] == extra and pieces[-1][1] + 1 == start:
                        pieces[-1] = (pieces[-1][0], end, extra)
                    else:
                        pieces.append((start, end, extra))
                for start, end, extra in pieces:
                    if extra:
                        ports = str(start) if start == end else f"{start}-{end}"
                        yield finding(
                            "TORCH-01",
                            f"{view.name}: {iface} ({plane}, {kind})",
                            f"tcp/{ports} admitted from {iv.fmt_ip_spans(extra)}",
                        )


@check(
    "TORCH-02",
    "Determinism settings missing",
    Severity.info,
    "set CUBLAS_WORKSPACE_CONFIG=:4096:8 and torch.use_deterministic_algorithms(True)",
)
def torch02(facts: Facts) -> Iterator[Finding]:
    if facts.reproducibility != "bitwise":
        raise NotAvailable("the policy does not request bitwise reproducibility")
    for view, env, _sources in _compute_views(facts):
        if env.get("CUBLAS_WORKSPACE_CONFIG") not in (":4096:8", ":16:8"):
            yield finding("TORCH-02", view.name, "CUBLAS_WORKSPACE_CONFIG unset")
