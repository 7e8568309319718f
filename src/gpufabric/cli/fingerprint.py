"""``gpufabric fingerprint``: write the reproducibility manifest, or diff manifests for drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from gpufabric.boundary import loads_json, read_capped
from gpufabric.cli.options import format_option, refuse_unused
from gpufabric.cli.output import Format, envelope, print_json, stdout_console, to_jsonable
from gpufabric.errors import InputError

#: Bytes read from a manifest: a host's fingerprint is kilobytes (env, versions, topology).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


def _load(path: Path) -> dict[str, Any]:
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


def register(app: typer.Typer) -> None:
    @app.command("fingerprint")
    def fingerprint(
        files: list[Path] = typer.Argument(
            None, help="Manifests to compare (with --compare); the first is the baseline."
        ),
        compare: bool = typer.Option(
            False, "--compare", help="Diff the given manifests against the first; exit 1 on drift."
        ),
        out: Path | None = typer.Option(None, "--out", help="Write this host's manifest to FILE (JSON)."),
        fmt: Format = format_option(),
    ) -> int:
        """Manifest of everything that can change results (versions, env, NCCL_*, topology), or drift between manifests."""
        from gpufabric.bench import fingerprint as fp

        if compare or files:
            refuse_unused(True, {"out": "--out"}, "with --compare (it writes no manifest)")
            if not compare:
                raise InputError("manifest files given without --compare; use --compare A B [C ...]")
            if len(files or []) < 2:
                raise InputError("--compare needs at least two manifest files (baseline first)")
            baseline = _load(files[0])
            diffs = {str(f): fp.diff(baseline, _load(f)) for f in files[1:]}
            drifted = any(diffs.values())
            if fmt is Format.json:
                print_json({"baseline": str(files[0]), "drift": diffs, "drifted": drifted})
            else:
                console = stdout_console()
                for name, drift in diffs.items():
                    if not drift:
                        console.print(f"{name}: no drift from {files[0]}")
                        continue
                    console.print(f"{name}: {len(drift)} key(s) drifted from {files[0]}")
                    for d in drift:
                        console.print(f"  {d.key}: {_short(d.baseline)} -> {_short(d.other)}", markup=False)
            return 1 if drifted else 0
        manifest = fp.collect()
        if out is not None:
            try:
                out.write_text(json.dumps(to_jsonable(envelope(manifest)), indent=2) + "\n", encoding="utf-8")
            except OSError as exc:
                raise InputError(f"{out}: cannot write manifest: {exc.strerror}") from exc
        if fmt is Format.json:
            print_json(manifest)
        else:
            console = stdout_console()
            versions = ", ".join(f"{k} {v}" for k, v in manifest["versions"].items())
            nccl_env = {k: v for k, v in manifest["env"].items() if k.startswith("NCCL_")}
            console.print(
                f"host {manifest['host']}  kernel {manifest['kernel']['release']}  {manifest['os']}", markup=False
            )
            console.print(
                f"cpu {manifest['cpu']['model']} x{manifest['cpu']['logical_cpus']}  "
                f"governor {manifest['cpu']['governor']}  THP {manifest['memory']['transparent_hugepages']}",
                markup=False,
            )
            console.print(f"gpus {_short(manifest['gpus'])}  rdma {_short(manifest['rdma'])}", markup=False)
            console.print(f"versions: {versions}", markup=False)
            console.print(f"torch build: {_short(manifest['torch_build'])}", markup=False)
            console.print(f"NCCL env: {_short(nccl_env) if nccl_env else '(none set)'}", markup=False)
            console.print(
                f"CUBLAS_WORKSPACE_CONFIG: {manifest['env'].get('CUBLAS_WORKSPACE_CONFIG', '(not set)')}", markup=False
            )
            if out is not None:
                console.print(f"manifest written to {out}", markup=False)
        return 0


def _short(value: Any, limit: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(to_jsonable(value), sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."
