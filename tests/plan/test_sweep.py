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


def test_chunks_stream_the_same_rows_and_the_csv_is_csv_writers(tmp_path):
    """issue 32: the sweep evaluates and writes chunk by chunk (memory flat in the rows); the
    rows equal one pass's, and the column-wise CSV equals csv.writer's cell for cell."""
    from gpufabric.plan.sweep import stream_sweep, write_sweep

    varies = [parse_vary("reliability.gpu_mttf_hours=20000,50000,1e5"), parse_vary("workload.recompute=none,full")]
    whole = run_sweep(SPEC, CAT, varies)
    chunks = list(stream_sweep(SPEC, CAT, varies, chunk_rows=30))
    assert len(chunks) > 2 and sum(len(c) for c in chunks) == len(whole) == 6 * 24
    assert [r for c in chunks for r in c.rows()] == whole.rows()
    out = tmp_path / "s.csv"
    assert write_sweep(iter(chunks), out).rows == len(whole)
    expected = tmp_path / "e.csv"
    with expected.open("w", newline="") as fh:
        csv.writer(fh).writerows([whole.columns, *whole.rows()])
    assert out.read_bytes() == expected.read_bytes()


def test_csv_cells_match_csv_writer_for_awkward_values(tmp_path):
    import numpy as np

    from gpufabric.plan.sweep import _csv_cells, _csv_column, _full_cells

    def cells(column, per):
        kind, out = _csv_cells(column, per)
        n = len(column) // per if per else 0
        if kind == "full":  # the texts, or the floats formatted a block at a time (by str)
            return [str(c) for c in _full_cells(out, "")[0].tolist()]
        return out * n if kind == "design" else [c for c in out for _ in range(per)] if kind == "variant" else out

    floats = np.array([0.0, -0.0, 1.5, np.nan, np.inf, -np.inf, 1e16, 1e-5, 1.0] * 3)
    for per in (0, 3, 9):
        assert cells(floats, per) == [str(x) for x in floats.tolist()]
    assert _csv_cells(floats, 9)[0] == "design"
    grid = np.repeat(np.array([0.0, -0.0, 2.5]), 3)  # follows the variants: formatted per variant
    assert _csv_cells(grid, 3)[0] == "variant" and cells(grid, 3) == [str(x) for x in grid.tolist()]
    assert cells(["a", "b", "a", "b"], 2) == ["a", "b", "a", "b"] and cells([1, 1, 2, 2], 2) == ["1", "1", "2", "2"]
    mixed = [1, 1.0, True, "a,b", 'say "x"', "=1+1", "x\ny"]
    path = tmp_path / "m.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerow([f"'{v}" if isinstance(v, str) and v.startswith("=") else v for v in mixed])
    assert (",".join(_csv_column(mixed)) + "\r\n").encode() == path.read_bytes()


def test_csv_blocks_equal_csv_writer_for_awkward_columns(tmp_path, monkeypatch):
    """issue 32: the CSV is written in blocks of rows, columns of few distinct values by
    np.unique and mostly distinct floats as they come; -0.0, NaN, infinities and text
    are written as csv.writer writes them, across block and chunk boundaries."""
    import dataclasses

    import numpy as np

    from gpufabric.plan import sweep
    from gpufabric.plan.sweep import stream_sweep, write_sweep

    monkeypatch.setattr(sweep, "_BLOCK_ROWS", 7)
    varies = [parse_vary("reliability.gpu_mttf_hours=20000,50000,1e5"), parse_vary("workload.recompute=none,full")]
    rng = np.random.default_rng(3)
    awkward = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e16, 1e-5, 0.1, 2.5])
    chunks = []
    for chunk in stream_sweep(SPEC, CAT, varies, chunk_rows=50):
        n = len(chunk)
        out = dataclasses.replace(
            chunk.out,
            step_time_s=rng.random(n) * 10.0 ** rng.integers(-8, 20, n),  # mostly distinct
            compute_s=awkward[rng.integers(0, 3, n)],  # few distinct, with -0.0 and NaN
            bubble_s=awkward[rng.integers(2, 9, n)],  # few distinct, no -0.0
            tiers=rng.integers(-3, 3, n),
        )
        chunks.append(dataclasses.replace(chunk, out=out))
    assert len(chunks) > 2
    out = tmp_path / "s.csv"
    write_sweep(iter(chunks), out)
    expected = tmp_path / "e.csv"
    with expected.open("w", newline="") as fh:
        csv.writer(fh).writerows([chunks[0].columns, *(r for c in chunks for r in c.rows())])
    assert out.read_bytes() == expected.read_bytes()


def test_a_refused_sweep_leaves_no_file(tmp_path):
    from gpufabric.plan.sweep import stream_sweep, write_sweep

    out = tmp_path / "s.csv"
    with pytest.raises(InputError, match="combinations is invalid"):
        write_sweep(stream_sweep(SPEC, CAT, [parse_vary("cluster.nodes=3,5")]), out)
    assert list(tmp_path.iterdir()) == []
