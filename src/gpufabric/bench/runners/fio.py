"""fio runner: one profile -> one ``fio --output-format=json+`` run in the scratch directory."""

from __future__ import annotations

from pathlib import Path

from gpufabric.bench.profiles import FioProfile
from gpufabric.bench.runners import PlannedTest


def plan(profile: FioProfile, *, scratch: Path, timeout_s: float, repeat: int = 1) -> PlannedTest:
    params = {
        "rw": profile.rw,
        "bs_bytes": str(profile.bs_bytes),
        "job_size_bytes": str(profile.size_bytes),
        "numjobs": str(profile.numjobs),
        "direct": str(int(profile.direct)),
        **profile.params,
    }
    return PlannedTest(
        name=f"fio.{profile.name}",
        tool="fio",
        argv=tuple(profile.argv(scratch)),
        timeout_s=timeout_s,
        cwd=str(scratch),
        mkdirs=(str(scratch / profile.directory_name),),
        params=params,
        repeat=repeat,
    )
