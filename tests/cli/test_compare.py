from __future__ import annotations

import json

import numpy as np

from gpufabric.results.store import Store
from tests.results.factories import bw_result, latency_result, make_run


def _db(tmp_path, cand_latency_us, cand_gbps=(9.4, 9.5, 9.45)):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        base = make_run(
            store, [latency_result(median_us=10.0, seed=1), *(bw_result(gbps=g) for g in (9.4, 9.5, 9.45))], verdicts=[]
        )
        cand = make_run(
            store,
            [latency_result(median_us=cand_latency_us, seed=2), *(bw_result(gbps=g) for g in cand_gbps)],
            verdicts=[],
        )
    return db, base, cand


def test_significant_regression_exits_1(cli, tmp_path):
    db, base, cand = _db(tmp_path, cand_latency_us=12.0)
    code, out, _ = cli("compare", str(base), str(cand), "--db", db)
    assert code == 1
    first = out.splitlines()[1]
    assert first.startswith("REGRESSION") and "lat_p50_us" in first and "batch medians" in first
    # The medians of the factory's own seeded samples, computed here, not copied from the output.
    before, after = (
        float(np.median(latency_result(median_us=m, seed=s).metrics[0].samples)) for m, s in ((10.0, 1), (12.0, 2))
    )
    assert f"{before:.4g} -> {after:.4g} us ({(after / before - 1) * 100:+.1f}%, lower is better" in first
    assert "p_adj=" in first


def test_no_change_exits_0_and_json(cli, tmp_path):
    db, base, cand = _db(tmp_path, cand_latency_us=10.0)
    code, out, _ = cli("compare", "latest~1", "latest", "--db", db, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["failed"] is False and data["regressions"] == 0 and data["correction"] == "holm"
    methods = {d["metric"]: (d["method"], d["verdict"]) for d in data["deltas"]}
    assert methods == {
        "lat_p50_us": ("batch medians", "unchanged"),
        "lat_p99_us": ("-", "inconclusive"),
        "throughput_gbps": ("repeats", "unchanged"),
    }
    assert data["tested"] == 2 and data["counts"]["inconclusive"] == 1 and data["min_effect"]["tail"] == 0.10


def test_tolerance_decides(cli, tmp_path):
    db, base, cand = _db(tmp_path, cand_latency_us=10.0, cand_gbps=(8.9, 9.0, 8.95))
    code, out, _ = cli("compare", str(base), str(cand), "--db", db)
    assert code == 1 and "REGRESSION" in out and "throughput_gbps" in out
    code, _, _ = cli("compare", str(base), str(cand), "--db", db, "--tolerance", "0.10")
    assert code == 0


def test_json_report_file_as_baseline(cli, tmp_path):
    db, base, cand = _db(tmp_path, cand_latency_us=12.0)
    baseline = tmp_path / "baseline.json"
    code, _, _ = cli("report", str(base), "--db", db, "--format", "json", "--out", baseline)
    assert code == 0
    code, out, _ = cli("compare", baseline, "latest", "--db", db)
    assert code == 1 and "REGRESSION" in out
    candidate = tmp_path / "candidate.json"
    assert cli("report", str(cand), "--db", db, "--format", "json", "--out", candidate)[0] == 0
    unused = tmp_path / "unused" / "r.db"
    code, out, _ = cli("compare", baseline, candidate, "--db", unused)
    assert code == 1 and "REGRESSION" in out
    assert not unused.parent.exists()  # two report files: no store opened, none created


def test_strict_fails_untestable_moves(cli, tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        make_run(store, [bw_result(gbps=9.4)], verdicts=[])
        make_run(store, [bw_result(gbps=6.0)], verdicts=[])
    code, out, _ = cli("compare", "latest~1", "latest", "--db", db)
    assert code == 0 and "INCONCLUSIVE" in out and "one value per side" in out
    code, _, _ = cli("compare", "latest~1", "latest", "--db", db, "--strict")
    assert code == 1


def test_bad_input(cli, tmp_path):
    db, base, cand = _db(tmp_path, cand_latency_us=10.0)
    code, _, err = cli("compare", "1", "2", "--db", db, "--alpha", "2")
    assert code == 2 and "--alpha" in err
    code, _, err = cli("compare", "1", "2", "--db", db, "--min-effect", "tail")
    assert code == 2 and "CLASS=FRACTION" in err
    code, _, err = cli("compare", "1", "2", "--db", db, "--correction", "bonf")
    assert code == 2 and "unknown correction" in err
    code, _, err = cli("compare", "1", "99", "--db", db)
    assert code == 2 and "no run 99" in err
    bogus = tmp_path / "x.json"
    bogus.write_text('{"foo": 1}')
    code, _, err = cli("compare", bogus, "1", "--db", db)
    assert code == 2 and "not a gpufabric JSON report" in err


# --- issue 23: a gate on size curves, and --strict always says why -------------------------------------------------


def test_real_table_against_a_copy_12_percent_slower_above_1_mib_exits_1(cli, tmp_path):
    from tests.results.curves import DATA, slower_copy

    table = DATA / "public_h100_ndr_2node_issue309.txt"
    slow = tmp_path / "slow.txt"
    slow.write_text(slower_copy(table.read_text(), 1.12, min_size=1 << 20))
    db = tmp_path / "r.db"
    for f in (table, slow):
        assert cli("ingest", "--tool", "nccl-tests", f, "--db", db)[0] == 0
    code, out, _ = cli("compare", "latest~1", "latest", "--db", db)
    assert code == 1
    first = out.splitlines()[1]
    assert first.startswith("REGRESSION") and "signed rank over sizes" in first and "bandwidth-bound" in first
    assert out.splitlines()[-1].startswith("failed: 1 regression(s)")
    code, out, _ = cli("compare", "latest~1", "latest", "--db", db, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["failed"] and doc["reason"].startswith("failed: 1 regression")
    (reg,) = [d for d in doc["deltas"] if d["verdict"] == "regression" and not d["duplicate_of"]]
    assert reg["regime"] == "bandwidth-bound" and reg["sizes"] >= 8 and abs(reg["effect"] - 0.12) < 0.01
    code, out, _ = cli("compare", "latest~1", "latest~1", "--db", db, "--strict")
    assert code == 0 and out.splitlines()[-1].startswith("passed (--strict): ")


def test_strict_with_nothing_in_common_exits_1_and_says_so(cli, tmp_path):
    from tests.results.curves import DATA

    db = tmp_path / "r.db"
    assert cli("ingest", "--tool", "nccl-tests", DATA / "public_h100_1node_issue290.txt", "--db", db)[0] == 0
    assert cli("ingest", "--tool", "fio", DATA.parent / "fio" / "psync_read.json", "--db", db)[0] == 0
    code, out, _ = cli("compare", "latest~1", "latest", "--db", db)
    assert code == 0 and "0 metrics tested" in out
    code, out, _ = cli("compare", "latest~1", "latest", "--db", db, "--strict")
    assert code == 1 and out.splitlines()[-1].startswith("failed (--strict): no metric was tested")
    code, out, _ = cli("compare", "latest~1", "latest", "--db", db, "--strict", "--format", "json")
    assert code == 1 and "no metric was tested" in json.loads(out)["reason"]


def test_compare_output_never_carries_terminal_escapes(cli, tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        for gbps in (9.4, 6.0):
            make_run(store, [bw_result(gbps=gbps, host="n\x1b[2J\x1b]0;pwned\x07")], verdicts=[])
    code, out, _ = cli("compare", "latest~1", "latest", "--db", db, "--strict")
    assert code == 1 and "\x1b" not in out and "\x07" not in out and "n\\x1b[2J" in out
