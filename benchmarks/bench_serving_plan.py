"""Serving planner CPU (issue 32): ``make_serving_plan`` alone and ``gpufabric plan`` end to end
on every examples/serving spec, against a baseline source tree measured in the same run.

The bar is <= 0.6 s CPU for the whole ``gpufabric plan`` command per serving example; the
planning itself (the layout search, sizing by engine simulation, the final check on 2,000
requests per engine, costing) should stay within ~0.15 s of it. The planning time is
process CPU time around ``make_serving_plan`` with the spec and catalog loaded once
(median and best of ``--repeats``); the command's is the child's user + system time
(``resource.getrusage(RUSAGE_CHILDREN)``, as ``/usr/bin/time -f %U+%S`` reports it; median
of ``--command-repeats``).

The baseline (``--baseline-rev``, default none) is another revision's ``src/`` unpacked
with ``git archive`` into a temporary folder and measured in a child process, interleaved
round by round with this checkout's, so that both see the same load on a shared machine.
The plans of both must be the same (their repr is compared): the speed-ups are exact.

    .venv/bin/python benchmarks/bench_serving_plan.py [--repeats 5] [--baseline-rev a4cfe18] [--only 50rps]
"""

from __future__ import annotations

import os

# One core: pin the math libraries before numpy loads.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "serving"

#: The child's program: time make_serving_plan on one spec, print JSON (times, plan digest).
_CHILD = """
import hashlib, json, sys, time
from gpufabric.catalog import load_catalog
from gpufabric.plan.inference import make_serving_plan
from gpufabric.sim import serving
from gpufabric.sim.serving import simulate_serving
from gpufabric.spec.inference import load_inference_spec, read_located
cat = load_catalog()
spec = load_inference_spec(read_located(sys.argv[1]))
times = []
for _ in range(int(sys.argv[2])):
    getattr(serving, "_PREFILL_MEMO", {}).clear()  # each repeat a fresh plan, as one command is
    t = time.process_time()
    plan = make_serving_plan(spec, cat, simulate=simulate_serving)
    times.append(time.process_time() - t)
print(json.dumps({"cpu_s": times, "digest": hashlib.sha256(repr(plan).encode()).hexdigest()}))
"""


def _planning(src: Path, spec: Path, repeats: int) -> tuple[list[float], str]:
    """make_serving_plan's CPU seconds on ``spec`` with ``src`` first on the path (a child process)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(spec), str(repeats)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=600,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return [float(x) for x in got["cpu_s"]], str(got["digest"])


def _command_cpu_s(src: Path, spec: Path) -> float:
    """User + system CPU seconds of one ``gpufabric plan SPEC`` run from ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "gpufabric", "plan", str(spec)], capture_output=True, env=env, check=True, timeout=600
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _unpack(rev: str, into: Path) -> Path:
    """``src/`` of git revision ``rev`` unpacked under ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True).stdout
    tar = into / "src.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into / "src"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="make_serving_plan runs per example and round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (this tree, then the baseline)")
    ap.add_argument("--command-repeats", type=int, default=3, help="`gpufabric plan` runs per example (0: none)")
    ap.add_argument("--baseline-rev", default=None, help="git revision to compare with (its src/ via git archive)")
    ap.add_argument("--only", default=None, help="examples whose file name contains this")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    specs = [p for p in sorted(EXAMPLES.glob("*.yaml")) if args.only is None or args.only in p.name]
    here = ROOT / "src"
    report: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = _unpack(args.baseline_rev, Path(tmp)) if args.baseline_rev else None
        for spec in specs:
            runs: dict[str, list[float]] = {"this": [], "baseline": []}
            digests = set()
            for _ in range(args.rounds):
                for label, src in (("this", here), ("baseline", base)):
                    if src is None:
                        continue
                    cpu_s, digest = _planning(src, spec, args.repeats)
                    runs[label] += cpu_s
                    digests.add(digest)
            row: dict[str, object] = {
                "plan_cpu_median_s": statistics.median(runs["this"]),
                "plan_cpu_best_s": min(runs["this"]),
            }
            if base is not None:
                row["baseline_cpu_median_s"] = statistics.median(runs["baseline"])
                row["baseline_cpu_best_s"] = min(runs["baseline"])
                row["ratio_median"] = statistics.median(runs["baseline"]) / statistics.median(runs["this"])
                row["same_plan"] = len(digests) == 1
            if args.command_repeats:
                row["command_cpu_median_s"] = statistics.median(
                    _command_cpu_s(here, spec) for _ in range(args.command_repeats)
                )
            report[spec.stem] = row
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for name, row in report.items():
            print(
                name + ": " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items())
            )
    if any(row.get("same_plan") is False for row in report.values()):
        print("the baseline's plan differs from this tree's", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
