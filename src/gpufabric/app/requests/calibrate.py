"""The request of ``gpufabric calibrate``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpufabric.exec.knobs import DB_HELP, knob


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrateRequest:
    """``gpufabric calibrate RUN``: fit a measured run, write a catalog override."""

    run: str = knob(..., None, "Run id (or 'latest') with collective sweeps / fio results.", metavar="RUN")
    fabric: str | None = knob(
        None, "--fabric", "Catalog fabric id the multi-node sweeps ran over (needed when the run spans nodes)."
    )
    gpu: str | None = knob(None, "--gpu", "Catalog GPU id (default: read from the nccl-tests header of the run).")
    storage: str | None = knob(None, "--storage", "Catalog storage id the run's fio results measured.")
    harness: str | None = knob(
        None,
        "--harness",
        "How the run launched its ops, for every point: per-gpu (one process per GPU), single-process"
        " (nccl-tests -g N) or torch. Its launch cost is modelled, not fitted into the GPU's. Default:"
        " what each result's nccl-tests header says (nGpus > 1: single-process), else per-gpu.",
    )
    catalog_files: list[Path] = knob([], "--catalog", "Base catalog override(s) to start from.")
    out: Path = knob(Path("calibrated.yaml"), "--out", "Override file to write.")
    db: str | None = knob(None, "--db", DB_HELP)
    dry_run: bool = knob(False, "--dry-run", "Fit and report, but do not write --out.")
    force: bool = knob(
        False,
        "--force",
        "Write the fit even when it predicts the run's own points worse than the catalog did"
        " (otherwise refused, exit 1).",
    )
