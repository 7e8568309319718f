"""Pure parsers for the host facts the HOST-*, IB-* and ROCE-* checks read.

Formats (reference/security-config.md 3.4, 3.8, 5.4-5.7): ``ibv_devinfo`` port blocks,
``nvidia-smi topo -m`` matrices with their "NIC Legend", ``lspci -vvv`` device blocks
with "ACSCtl:", kernel cpulists ("0-15,32-47"), ``lsmod``/``/proc/modules`` lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpufabric.errors import ParseError


@dataclass(frozen=True, slots=True, kw_only=True)
class IbPort:
    hca: str
    port: int
    state: str
    active_mtu_bytes: int
    link_layer: str


def parse_ibv_devinfo(text: str) -> list[IbPort]:
    """``ibv_devinfo`` -> one record per port (``hca_id:`` blocks, ``port:`` sub-blocks)."""
    ports: list[IbPort] = []
    hca = None
    current: dict[str, str] = {}

    def flush() -> None:
        if hca is not None and "port" in current:
            mtu = re.match(r"(\d+)", current.get("active_mtu", ""))
            if mtu is None:
                raise ParseError(f"ibv_devinfo: port {current['port']} of {hca} has no active_mtu: {current!r}")
            ports.append(
                IbPort(
                    hca=hca,
                    port=int(current["port"]),
                    state=current.get("state", "").split(" ")[0],
                    active_mtu_bytes=int(mtu.group(1)),
                    link_layer=current.get("link_layer", ""),
                )
            )

    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        value = value.strip()
        if key == "hca_id":
            flush()
            hca, current = value, {}
        elif key == "port" and value.isdigit():
            flush()
            current = {"port": value}
        elif "port" in current:
            current[key] = value
    flush()
    return ports


#: nvidia-smi topo -m legend, closest first (reference 5.5). NV# (NVLink) never links a GPU to a NIC.
TOPO_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")


def parse_topo(text: str) -> dict[str, dict[str, str]]:
    """``nvidia-smi topo -m`` -> {GPU: {NIC device: connection}}; NICn columns are renamed
    through the "NIC Legend" (older drivers print device names as column headers)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # nvidia-smi underlines the header row
    legend = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", text, re.MULTILINE))
    lines = text.splitlines()
    # Cells are tab-separated, but split on any whitespace: the GPU/NIC columns come first
    # and hold one token each, so they line up even where a copy turned tabs into spaces.
    header = next((line.split() for line in lines if re.match(r"^\s+GPU0\b", line)), None)
    if header is None:
        raise ParseError(f"nvidia-smi topo -m: no header row with GPU0 in {text[:200]!r}")
    out: dict[str, dict[str, str]] = {}
    for line in lines:
        cells = line.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        row = {}
        for col, cell in zip(header, cells[1:], strict=False):  # a row may stop short of the header
            if re.fullmatch(r"GPU\d+", col):
                continue
            if col == "CPU":  # "CPU Affinity" and later columns are not connections
                break
            row[legend.get(col, col)] = cell
        out[cells[0]] = row
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class AcsPort:
    bdf: str
    description: str
    acsctl: dict[str, bool]

    @property
    def redirects(self) -> bool:
        """Peer-to-peer requests are redirected up to the root complex (GDR breaks, reference 5.6)."""
        return self.acsctl.get("ReqRedir", False) or self.acsctl.get("CmpltRedir", False)


def parse_lspci_acs(text: str) -> list[AcsPort]:
    """``lspci -vvv`` -> the PCI bridges that have an ACS capability, with their ACSCtl flags."""
    out = []
    bdf = desc = None
    for line in text.splitlines():
        head = re.match(
            r"^([0-9a-fA-F]{2,4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]|[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (.*)$", line
        )
        if head:
            bdf, desc = head.group(1), head.group(2)
            continue
        ctl = re.match(r"^\s+ACSCtl:\s*(.*)$", line)
        if ctl and bdf is not None and desc is not None and "bridge" in desc.lower():
            flags = {m.group(1): m.group(2) == "+" for m in re.finditer(r"(\w+)([+-])", ctl.group(1))}
            out.append(AcsPort(bdf=bdf, description=desc, acsctl=flags))
    return out


def parse_cpulist(text: str) -> set[int]:
    """Kernel cpulist ("0-3,8,10-11") -> CPU numbers."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            cpus.update(range(int(lo), int(hi or lo) + 1))
        except ValueError as exc:
            raise ParseError(f"bad cpulist {text!r}") from exc
    return cpus


def parse_modules(text: str) -> set[str]:
    """``lsmod`` or ``/proc/modules`` -> module names (the first column of both)."""
    return {line.split()[0] for line in text.splitlines() if line.strip() and not line.startswith("Module ")}
