"""Cost of input validation in `gpufabric plan` (issue 9: it must add under 10 ms).

What `plan` validates, timed separately on every shipped example (median of many runs,
in-process, after one warm-up so imports and regex compilation are not counted):

* spec: read the file (size cap, UTF-8), parse YAML with positions, count alias
  expansion, pydantic validation with typed identifiers and bounds, catalog-id check;
* catalog: validate the shipped catalog (uncached build: every entry, strict numbers);
* outputs: the planner's NaN/inf/negative check over all candidate columns.

With ``--baseline SRC`` the spec and catalog timings are also taken on another source
tree (for example ``git archive <commit> src | tar -x -C /tmp/base``) in a subprocess,
and the difference is printed: that difference is what validation added.

Run: .venv/bin/python benchmarks/bench_validation.py [--baseline /tmp/base/src]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 200


def _median_ms(fn, runs: int = RUNS) -> float:
    fn()  # warm-up: imports, regex compilation, caches of the pydantic core
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def measure() -> dict[str, dict[str, float]]:
    from gpufabric.catalog import loader
    from gpufabric.spec import load_spec

    catalog = loader.load_catalog()
    known = catalog.known_ids()
    out: dict[str, dict[str, float]] = {}
    catalog_ms = _median_ms(lambda: loader._build(list(loader._shipped()), n_shipped=len(loader.DATA_FILES)), 50)
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        row = {"spec_ms": _median_ms(lambda path=example: load_spec(path, known_ids=known)), "catalog_ms": catalog_ms}
        try:
            from gpufabric.plan.candidates import invalid_outputs
            from gpufabric.plan.evaluate import evaluate_table
            from gpufabric.plan.table import build_table, enumerate_designs

            spec = load_spec(example).spec
            if spec.searched:  # parallelism: auto; the layout search is bench_plan's to time
                row.update(outputs_ms=0.0, candidates=0)
                out[example.name] = row
                continue
            designs = enumerate_designs(spec)
            cols = evaluate_table(build_table(spec, catalog, designs))
            row["outputs_ms"] = _median_ms(lambda columns=cols: invalid_outputs(columns))
            row["candidates"] = len(designs)
        except ImportError:  # a tree without the output check
            row["outputs_ms"] = 0.0
        out[example.name] = row
    return out


_IMPORT = (
    "import time; t = time.perf_counter(); import gpufabric.spec, gpufabric.catalog.loader, gpufabric.plan;"
    " print(time.perf_counter() - t)"
)


def _import_once(src: str) -> float:
    env = {**os.environ, "PYTHONPATH": src}
    return float(
        subprocess.run([sys.executable, "-c", _IMPORT], env=env, capture_output=True, text=True, check=True).stdout
    )


def import_ms(srcs: list[str], runs: int = 21) -> list[float]:
    """Median time to import the spec, catalog and plan modules in a fresh interpreter, per
    source tree (pydantic builds every model's validator at import). The trees alternate
    run by run so that load on a shared machine hits both alike."""
    samples: list[list[float]] = [[] for _ in srcs]
    for _ in range(runs):
        for i, src in enumerate(srcs):
            samples[i].append(_import_once(src))
    return [statistics.median(x) * 1e3 for x in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="src/ directory of the code to compare with")
    parser.add_argument("--json", action="store_true", help="print the raw measurements as JSON (used internally)")
    args = parser.parse_args()
    now = measure()
    if args.json:
        print(json.dumps(now))
        return
    base = None
    if args.baseline:
        env = {**os.environ, "PYTHONPATH": args.baseline}
        done = subprocess.run([sys.executable, __file__, "--json"], env=env, capture_output=True, text=True, check=True)
        base = json.loads(done.stdout)
    print(
        f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {platform.processor() or platform.machine()},"
        f" {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}"
    )
    if args.baseline:
        here, there = import_ms([str(ROOT / "src"), args.baseline])
        print(f"\nimport + model build: {here:.1f} ms (baseline {there:.1f} ms, added {here - there:+.1f} ms)\n")
    else:
        print(f"\nimport + model build: {import_ms([str(ROOT / 'src')])[0]:.1f} ms\n")
    print("| example | candidates | spec ms | catalog ms | output check ms | total ms | baseline ms | added ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in now.items():
        total = row["spec_ms"] + row["catalog_ms"] + row["outputs_ms"]
        if base and name in base:
            b = base[name]["spec_ms"] + base[name]["catalog_ms"]
            extra = f"{b:.2f} | {total - b:+.2f}"
        else:
            extra = "- | -"
        print(
            f"| {name} | {row.get('candidates', '-')} | {row['spec_ms']:.2f} | {row['catalog_ms']:.2f} |"
            f" {row['outputs_ms']:.3f} | {total:.2f} | {extra} |"
        )


if __name__ == "__main__":
    main()
