"""InfiniBand (IB-*) and RoCEv2 (ROCE-*) checks, reference/security-config.md 3 and "Audit checks"."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpufabric.audit.collect import Facts, HostView
from gpufabric.audit.envfiles import nccl_settings
from gpufabric.audit.findings import Finding, NotAvailable, Severity, check, finding

PARTITIONS = "/etc/opensm/partitions.conf"
OPENSM = "/etc/opensm/opensm.conf"
QOS_SCRIPT = "/usr/local/sbin/gpufabric-roce-qos"


def _sm_views(facts: Facts) -> list[HostView]:
    views = [v for v in facts.hosts if v.has(PARTITIONS) or v.has(OPENSM)]
    if not views:
        raise NotAvailable("no OpenSM configuration (/etc/opensm) in the audited tree")
    return views


@check("IB-01", "partitions.conf missing or unreadable", Severity.high,
       "install /etc/opensm/partitions.conf with an explicit Default rule and one PKey per plane")
def ib01(facts: Facts) -> Iterator[Finding]:
    for view in _sm_views(facts):
        if view.read(PARTITIONS) is None:
            yield finding("IB-01", view.name, "OpenSM falls back to Default=0x7fff : ALL=full ;")


def _rules(text: str) -> list[str]:
    body = re.sub(r"#[^\n]*", "", text)
    return [r.strip() for r in body.split(";") if r.strip()]


@check("IB-02", "Default partition grants everyone full membership", Severity.high,
       "write the Default rule as: Default=0x7fff : ALL=limited, SELF=full ;")
def ib02(facts: Facts) -> Iterator[Finding]:
    for view in _sm_views(facts):
        text = view.read(PARTITIONS)
        if text is None:
            continue
        for rule in _rules(text):
            head, _, members = rule.partition(":")
            if not re.match(r"^\s*Default\b|^[^=]*=\s*0x7fff\b", head, re.IGNORECASE):
                continue
            explicit = re.search(r"\bALL(_CAS)?\s*=\s*full\b", members, re.IGNORECASE)
            # a member without "=type" takes the partition's defmember (limited by default)
            implied = re.search(r"defmember\s*=\s*full", head, re.IGNORECASE) and re.search(
                r"\bALL(_CAS)?\b(?!\s*=)", members)
            if explicit or implied:
                yield finding("IB-02", view.name, f"rule {rule.strip()!r}", location=view.where(PARTITIONS))


def _opensm_options(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition(" ")
            out[key] = value.strip()
    return out


@check("IB-03", "Partition enforcement is disabled", Severity.high, "set part_enforce both in opensm.conf")
def ib03(facts: Facts) -> Iterator[Finding]:
    for view in _sm_views(facts):
        text = view.read(OPENSM)
        if text is None:
            continue
        opts = _opensm_options(text)
        if opts.get("part_enforce", "both").lower() == "off":
            yield finding("IB-03", view.name, "part_enforce off", location=view.where(OPENSM))
        elif opts.get("no_partition_enforcement", "FALSE").upper() == "TRUE":
            yield finding("IB-03", view.name, "no_partition_enforcement TRUE", location=view.where(OPENSM))


@check("IB-04", "Fabric management keys left at defaults", Severity.medium,
       "set random m_key, sm_key, sa_key and m_key_protection_level 2 in opensm.conf (keep it 0600)")
def ib04(facts: Facts) -> Iterator[Finding]:
    for view in _sm_views(facts):
        text = view.read(OPENSM)
        if text is None:
            continue
        opts = _opensm_options(text)

        def value(key: str, default: int, opts: dict[str, str] = opts) -> int:
            try:
                return int(opts.get(key, str(default)), 0)
            except ValueError:
                return default

        problems = []
        if value("m_key", 0) == 0:
            problems.append("m_key 0")
        if value("m_key_protection_level", 0) == 0:
            problems.append("m_key_protection_level 0")
        for key in ("sm_key", "sa_key"):
            if value(key, 1) == 1:
                problems.append(f"{key} 1 (default)")
        if problems:
            yield finding("IB-04", view.name, ", ".join(problems), location=view.where(OPENSM))


def _roce_views(facts: Facts) -> list[HostView]:
    if facts.fabric_kind != "roce":
        raise NotAvailable("not a RoCE design (policy.json design.fabric_kind)")
    views = [v for v in facts.hosts if v.has(QOS_SCRIPT)]
    if not views:
        raise NotAvailable(f"no RoCE QoS script ({QOS_SCRIPT})")
    return views


def _script_vars(text: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", text, re.MULTILINE))


@check("ROCE-01", "Trust mode is not DSCP", Severity.high, "run mlnx_qos --trust dscp on every RoCE netdev")
def roce01(facts: Facts) -> Iterator[Finding]:
    for view in _roce_views(facts):
        text = view.read(QOS_SCRIPT) or ""
        if "--trust dscp" not in text:
            yield finding("ROCE-01", view.name, "the QoS script never sets trust dscp", location=view.where(QOS_SCRIPT))


@check("ROCE-02", "PFC is not enabled on exactly the RoCE priority", Severity.high,
       "set mlnx_qos --pfc with a single 1 at the RoCE priority (and the same on the switch)")
def roce02(facts: Facts) -> Iterator[Finding]:
    prio = facts.policy.roce_priority if facts.policy else 3
    expected = ",".join("1" if i == prio else "0" for i in range(8))
    for view in _roce_views(facts):
        got = _script_vars(view.read(QOS_SCRIPT) or "").get("PFC")
        if got != expected:
            yield finding("ROCE-02", view.name, f"PFC vector {got!r}, expected {expected!r}", location=view.where(QOS_SCRIPT))


@check("ROCE-03", "ECN NP/RP disabled on the RoCE priority", Severity.medium,
       "enable /sys/class/net/<if>/ecn/roce_{np,rp}/enable/<prio>")
def roce03(facts: Facts) -> Iterator[Finding]:
    for view in _roce_views(facts):
        text = view.read(QOS_SCRIPT) or ""
        for side in ("roce_np", "roce_rp"):
            if f"ecn/{side}/enable/$PRIO" not in text:
                yield finding("ROCE-03", view.name, f"{side} is never enabled", location=view.where(QOS_SCRIPT))


@check("ROCE-04", "DSCP/TC marking is inconsistent end to end", Severity.medium,
       "make NCCL_IB_TC, rdma_cm default_roce_tos and the switch DSCP map agree (TOS = DSCP << 2)")
def roce04(facts: Facts) -> Iterator[Finding]:
    for view in _roce_views(facts):
        tos = _script_vars(view.read(QOS_SCRIPT) or "").get("TOS")
        nccl = nccl_settings(view)
        if nccl is None or facts.role_kind(view.role) != "compute":
            continue
        tc = nccl[0].get("NCCL_IB_TC")
        if tc != tos:
            yield finding("ROCE-04", view.name, f"NCCL_IB_TC={tc} but rdma_cm default_roce_tos={tos}")


@check("ROCE-05", "GID index not pinned to RoCE v2", Severity.high,
       "set NCCL_IB_GID_INDEX to the RoCE v2 GID of the compute-data netdev")
def roce05(facts: Facts) -> Iterator[Finding]:
    for view in _roce_views(facts):
        nccl = nccl_settings(view)
        if nccl is None or facts.role_kind(view.role) != "compute":
            continue
        if "NCCL_IB_GID_INDEX" not in nccl[0]:
            yield finding("ROCE-05", view.name, "NCCL_IB_GID_INDEX unset: NCCL auto-selects (may pick RoCE v1 or another netdev)")
