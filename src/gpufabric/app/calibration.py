"""The outcomes of ``calibrate``: a collective/storage fit (``plan/calibrate.py``) or a GPU's
efficiencies from a ``bench gpu`` run (``plan/calibrate_gpu.py``), and the override written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpufabric.errors import InputError

if TYPE_CHECKING:
    from pathlib import Path

    from gpufabric.plan.calibrate import Calibration
    from gpufabric.plan.calibrate_gpu import GpuCalibration


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricCalibration:
    """alpha/beta per link class fitted from collective sweeps (and fio results).

    A fit that predicts the run's own points worse than the catalog did is ``refused`` unless
    forced, and not written: the catalog was closer to this run (issue 25: a healthy NDR table
    once lowered NDR's efficiency and flipped a plan's fabric).
    """

    kind: str = "fabric"
    calibration: Calibration
    out: Path
    """The override file asked for (``written`` says whether it was)."""
    written: bool
    refused: bool

    @property
    def exit_code(self) -> int:
        return 1 if self.refused else 0

    def to_json(self) -> dict[str, Any]:
        cal = self.calibration
        return {
            "run_id": cal.run_id,
            "out": str(self.out) if self.written else None,
            "refused": self.refused,
            "worsened": list(cal.worsened),
            "gpu": cal.gpu,
            "fabric": cal.fabric,
            "notes": list(cal.notes),
            "fits": cal.fits,
            "override": cal.override,
            "before": cal.before,
            "after": cal.after,
            "points": list(cal.comparison),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuCalibrationOutcome:
    """A GPU's gemm/HBM efficiency and host copy rate from a ``bench gpu`` run."""

    kind: str = "gpu"
    calibration: GpuCalibration
    out: Path
    written: bool
    exit_code: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**self.calibration.to_dict(), "out": str(self.out) if self.written else None}


def write_override(out: Path, text: str) -> None:
    """Write the override document; an unwritable path is bad input (exit 2), not a traceback."""
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{out}: cannot write: {exc.strerror}") from exc
