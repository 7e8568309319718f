"""``gpufabric fingerprint``: this host's reproducibility manifest, or the drift between saved ones.

The outcomes own the versioned JSON, the text lines and the exit status (1 on drift);
``cli/fingerprint.py`` declares the options.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufabric.boundary import loads_json, read_capped
from gpufabric.errors import InputError
from gpufabric.jsonable import to_jsonable
from gpufabric.results import document

#: Bytes read from a manifest: a host's fingerprint is kilobytes (env, versions, topology).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


def load_manifest(path: Path) -> dict[str, Any]:
    """A saved manifest (``fingerprint --out``, or a run record's ``fingerprint``); InputError
    naming the file when it is not one."""
    try:
        data = loads_json(
            read_capped(path, MAX_MANIFEST_BYTES, "manifest").decode("utf-8", errors="replace"),
            source=str(path),
            what="manifest",
        )
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not a JSON manifest: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a manifest (expected a JSON object)")
    # A manifest saved from a run record nests under "fingerprint"; accept both.
    inner = data.get("fingerprint", data) if "kernel" not in data else data
    if not isinstance(inner, dict):
        raise InputError(f'{path}: not a manifest ("fingerprint" is not a JSON object)')
    return inner


def short(value: Any, limit: int = 100) -> str:
    """``value`` as one line of at most ``limit`` characters (JSON for anything but text)."""
    text = value if isinstance(value, str) else json.dumps(to_jsonable(value), sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, slots=True, kw_only=True)
class DriftOutcome:
    """Each manifest's drift from the baseline (the first)."""

    baseline: Path
    diffs: dict[str, list[Any]]  # manifest -> its drifted keys (bench.fingerprint.diff)

    @property
    def drifted(self) -> bool:
        return any(self.diffs.values())

    @property
    def exit_code(self) -> int:
        return 1 if self.drifted else 0

    def to_json(self) -> str:
        return document.dumps({"baseline": str(self.baseline), "drift": self.diffs, "drifted": self.drifted})

    def text_lines(self) -> list[tuple[str, bool]]:
        """(line, markup): the summary lines keep the console's markup as they always had."""
        lines: list[tuple[str, bool]] = []
        for name, drift in self.diffs.items():
            if not drift:
                lines.append((f"{name}: no drift from {self.baseline}", True))
                continue
            lines.append((f"{name}: {len(drift)} key(s) drifted from {self.baseline}", True))
            lines += [(f"  {d.key}: {short(d.baseline)} -> {short(d.other)}", False) for d in drift]
        return lines


def drift(files: Sequence[Path]) -> DriftOutcome:
    """Diff every manifest against the first. InputError with fewer than two."""
    from gpufabric.bench import fingerprint as fp

    if len(files) < 2:
        raise InputError("--compare needs at least two manifest files (baseline first)")
    baseline = load_manifest(files[0])
    return DriftOutcome(baseline=files[0], diffs={str(f): fp.diff(baseline, load_manifest(f)) for f in files[1:]})


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestOutcome:
    """This host's manifest (written to ``out`` when given)."""

    manifest: dict[str, Any]
    out: Path | None = None
    exit_code: int = 0

    def to_json(self) -> str:
        return document.dumps(self.manifest)

    def text_lines(self) -> list[str]:
        m = self.manifest
        versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
        nccl_env = {k: v for k, v in m["env"].items() if k.startswith("NCCL_")}
        lines = [
            f"host {m['host']}  kernel {m['kernel']['release']}  {m['os']}",
            f"cpu {m['cpu']['model']} x{m['cpu']['logical_cpus']}  "
            f"governor {m['cpu']['governor']}  THP {m['memory']['transparent_hugepages']}",
            f"gpus {short(m['gpus'])}  rdma {short(m['rdma'])}",
            f"versions: {versions}",
            f"torch build: {short(m['torch_build'])}",
            f"NCCL env: {short(nccl_env) if nccl_env else '(none set)'}",
            f"CUBLAS_WORKSPACE_CONFIG: {m['env'].get('CUBLAS_WORKSPACE_CONFIG', '(not set)')}",
        ]
        if self.out is not None:
            lines.append(f"manifest written to {self.out}")
        return lines


def manifest(out: Path | None = None) -> ManifestOutcome:
    """Collect this host's manifest; write it (versioned JSON) to ``out`` when given."""
    from gpufabric.bench import fingerprint as fp

    collected = fp.collect()
    if out is not None:
        try:
            out.write_text(document.dumps(collected), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{out}: cannot write manifest: {exc.strerror}") from exc
    return ManifestOutcome(manifest=collected, out=out)
