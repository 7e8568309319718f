"""KEY=VALUE environment files (NCCL env file, /etc/nccl.conf) as NCCL reads them."""

from __future__ import annotations

from gpufabric.audit.collect import HostView

#: NCCL reads $NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf, never overwriting a
#: set variable (nccl src/misc/param.cc), so the environment wins over both files.
NCCL_FILES = ("/etc/gpufabric/nccl.env", "/etc/nccl.conf")


def parse_env(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def nccl_settings(view: HostView) -> tuple[dict[str, str], list[str]] | None:
    """Effective NCCL_*/torch variables and where they came from; None without any source.

    Parsed once per host (six checks ask); the callers only read what it returns.
    """
    return view.derived("nccl_settings", _nccl_settings)


def _nccl_settings(view: HostView) -> tuple[dict[str, str], list[str]] | None:
    merged: dict[str, str] = {}
    sources: list[str] = []
    for path in reversed(NCCL_FILES):
        text = view.read(path)
        if text is not None:
            merged.update(parse_env(text))
            sources.append(path)
    if view.live and view.env:
        live = {k: v for k, v in view.env.items() if k.startswith(("NCCL_", "GLOO_", "CUBLAS_", "TORCH_"))}
        if live:
            merged.update(live)
            sources.append("environment")
    return (merged, sources) if sources else None
