"""``gpufabric sweep``: variants of a spec evaluated together, written as CSV."""

from __future__ import annotations

import csv

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.errors import InputError
from gpufabric.plan import evaluate_candidates
from gpufabric.plan.sweep import parse_vary, run_sweep
from gpufabric.spec import load_spec
from tests.conftest import EXAMPLES

CAT = load_catalog()
SPEC = load_spec(EXAMPLES / "llama3-70b-1k.yaml").spec


def test_parse_vary_reads_scalars_and_rejects_junk():
    v = parse_vary("cluster.nodes=64, 128")
    assert v.key == "cluster.nodes" and v.values == (64, 128)
    assert parse_vary("workload.model.params=7e9").values == (7e9,)
    for bad in ("nodes", "=1,2", "cluster.nodes=", "Cluster..x=1", "a.b={x: 1}"):
        with pytest.raises(InputError):
            parse_vary(bad)


def test_sweep_rows_equal_the_planner_for_each_variant():
    res = run_sweep(SPEC, CAT, [parse_vary("cluster.nodes=64,128"), parse_vary("workload.parallelism.dp=16,32")])
    # 64 nodes pair with dp 16, 128 with dp 32; the two mismatched pairings are skipped.
    assert len(res.skipped) == 2 and sorted(set(res.combos)) == [(64, 16), (128, 32)]
    designs = len(SPEC.options.fabrics) * len(SPEC.options.storage) * len(SPEC.options.oversubscription)
    assert len(res) == 2 * designs
    planned = {c.id: c for c in evaluate_candidates(SPEC, CAT)}
    rows = [r for r in res.rows() if r[0] == 128]
    for row in rows:
        cand = planned[row[2]]
        assert row[res.columns.index("step_time_s")] == pytest.approx(cand.step_time_s, rel=1e-9)
        assert row[res.columns.index("memory_fits")] is True
    # Half the nodes, same efficiency (anchored once): each step takes longer.
    small = [r for r in res.rows() if r[0] == 64]
    assert small[0][res.columns.index("compute_s")] == pytest.approx(2 * rows[0][res.columns.index("compute_s")])


def test_sweep_cli_writes_csv(tmp_path, cli):
    out = tmp_path / "s.csv"
    code, stdout, _ = cli(
        "sweep", str(EXAMPLES / "lab-2node.yaml"), "--vary", "workload.recompute=none,full", "--out", str(out)
    )
    assert code == 0 and "rows" in stdout
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["workload.recompute"] for r in rows} == {"none", "full"}
    full = [float(r["compute_s"]) for r in rows if r["workload.recompute"] == "full"]
    none = [float(r["compute_s"]) for r in rows if r["workload.recompute"] == "none"]
    assert min(full) > max(none)
    code, _, err = cli("sweep", str(EXAMPLES / "lab-2node.yaml"), "--vary", "cluster.nodez=1", "--out", str(out))
    assert code == 2 and "nodez" in err


def test_parquet_needs_pyarrow_or_writes_a_table(tmp_path, cli):
    out = tmp_path / "s.parquet"
    code, _, err = cli("sweep", str(EXAMPLES / "lab-2node.yaml"), "--vary", "cluster.nodes=2", "--out", str(out))
    try:
        import pyarrow.parquet as pq
    except ImportError:
        assert code == 2 and "pyarrow" in err and not out.exists()
        return
    assert code == 0 and pq.read_table(out).num_rows > 0


def test_sweep_refuses_other_suffixes(tmp_path, cli):
    code, _, err = cli(
        "sweep", str(EXAMPLES / "lab-2node.yaml"), "--vary", "cluster.nodes=2", "--out", str(tmp_path / "x.txt")
    )
    assert code == 2 and ".csv or .parquet" in err


def test_csv_cells_cannot_start_a_formula(tmp_path):
    # issue 24: text cells from specs and combos never start a spreadsheet formula; numbers stay numbers
    import dataclasses

    from gpufabric.plan.sweep import csv_cell, write_sweep

    spec = load_spec(EXAMPLES / "lab-2node.yaml").spec
    res = run_sweep(spec, load_catalog(), [parse_vary("cluster.nodes=2")])
    evil = ('=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx")
    res = dataclasses.replace(res, design_ids=tuple(evil[i % len(evil)] for i in range(len(res))))
    out = tmp_path / "s.csv"
    write_sweep(res, out)
    with out.open(newline="") as fh:
        rows = list(csv.reader(fh))
    designs = [r[rows[0].index("design")] for r in rows[1:]]
    assert designs and all(d.startswith("'") and d[1:] in evil for d in designs)
    assert csv_cell(-1.5) == -1.5 and csv_cell("node1") == "node1"
