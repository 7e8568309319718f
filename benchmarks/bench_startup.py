"""Issue 32 bars in CPU seconds (user + sys of the child, median of ``--runs``), this
checkout against a ``--baseline`` source tree in the same run, interleaved (the machine is
shared: before and after alternate, so load affects both alike).

- ``gpufabric plan EXAMPLE``: <= 0.45 s and <= 300 MB for every training example in
  ``examples/``, <= 0.6 s for every serving example in ``examples/serving/``;
- ``gpufabric --help``: <= 0.3 s;
- ``gpufabric sweep`` of 100,800 rows (70 x 60 variants of llama3-70b-1k x 24 designs):
  <= 2 s and <= 400 MB.

    .venv/bin/python benchmarks/bench_startup.py [--runs 3] [--baseline /path/to/old/src] [--only help,plan,plan-json,sweep]

Without ``--baseline`` only this checkout is measured. Each command runs once first so
that the bytecode and the catalog caches are warm, as on a user's second run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(src: Path, args: list[str]) -> tuple[float, float]:
    """CPU seconds and peak RSS (MB) of ``python -m gpufabric ARGS`` with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its bytecode compiled
    proc = subprocess.Popen([sys.executable, "-m", "gpufabric", *args], env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (RUSAGE_CHILDREN would pool them)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # plan exits 1 when nothing is recommendable
        raise SystemExit(f"{' '.join(args)} failed with {proc.returncode} under {src}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # ru_maxrss: KiB on Linux


def sweep_args(out: Path, mttf: int = 70, interval: int = 60) -> list[str]:
    return [
        "sweep",
        str(ROOT / "examples" / "llama3-70b-1k.yaml"),
        "--vary",
        "reliability.gpu_mttf_hours=" + ",".join(str(10000 + i * 1000) for i in range(mttf)),
        "--vary",
        "workload.checkpoint.interval_min=" + ",".join(str(10 + i) for i in range(interval)),
        "--out",
        str(out),
    ]


def cases(only: set[str], tmp: Path, small: bool) -> list[tuple[str, list[str], float, float]]:
    """(label, argv, CPU bar s, RSS bar MB)."""
    out: list[tuple[str, list[str], float, float]] = []
    if "help" in only:
        out.append(("--help", ["--help"], 0.3, 0.0))
    if "plan" in only:
        for path in sorted((ROOT / "examples").glob("*.yaml")):
            out.append((f"plan {path.name}", ["plan", str(path)], 0.45, 300.0))
    if "plan-json" in only:  # the same bar for the JSON document
        for path in sorted((ROOT / "examples").glob("*.yaml")):
            out.append((f"plan {path.name} --format json", ["plan", str(path), "--format", "json"], 0.45, 300.0))
    if "plan" in only:
        for path in sorted((ROOT / "examples" / "serving").glob("*.yaml")):
            out.append((f"plan serving/{path.name}", ["plan", str(path)], 0.6, 0.0))
    if "sweep" in only:
        args = sweep_args(tmp / "sweep.csv", *((2, 2) if small else (70, 60)))
        out.append(("sweep 100,800 rows" if not small else "sweep (smoke)", args, 2.0, 400.0))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a source tree (the src/ of an older checkout) to compare")
    parser.add_argument("--only", default="help,plan,plan-json,sweep")
    parser.add_argument("--small", action="store_true", help="a 4-variant sweep (the smoke run)")
    opts = parser.parse_args()
    trees = [("after", ROOT / "src")] + ([("before", opts.baseline)] if opts.baseline else [])
    met = True
    print("| command | " + " | ".join(f"{name} CPU s (runs) | {name} MB" for name, _ in trees) + " | ratio | bar |")
    print("|---|" + "---|---|" * len(trees) + "---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, args, cpu_bar, mb_bar in cases(set(opts.only.split(",")), Path(tmp), opts.small):
            for _, src in trees:
                one_run(src, args)  # warm: bytecode, the catalog cache
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in trees}
            for _ in range(opts.runs):  # interleaved
                for name, src in trees:
                    runs[name].append(one_run(src, args))
            cells, medians = [], {}
            for name, _ in trees:
                cpu = [c for c, _ in runs[name]]
                medians[name] = statistics.median(cpu)
                mb = max(m for _, m in runs[name])
                cells.append(f"{medians[name]:.2f} ({', '.join(f'{c:.2f}' for c in cpu)}) | {mb:.0f}")
            ratio = f"{medians['before'] / medians['after']:.1f}x" if "before" in medians else ""
            ok = medians["after"] <= cpu_bar and (not mb_bar or max(m for _, m in runs["after"]) <= mb_bar)
            met &= ok
            bar = f"<= {cpu_bar:g} s" + (f", {mb_bar:g} MB" if mb_bar else "") + (" met" if ok else " NOT met")
            print(f"| {label} | " + " | ".join(cells) + f" | {ratio} | {bar} |", flush=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
