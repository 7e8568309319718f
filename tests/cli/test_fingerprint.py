"""gpufabric fingerprint: manifest contents, drift diff, exit codes."""

from __future__ import annotations

import json

from gpufabric.bench import fingerprint as fp


def test_collect_records_nccl_env_and_run_map_fast():
    env = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "HOME": "/root"}
    run = {"ranks": [{"rank": 0, "host": "h1", "device": "cpu"}, {"rank": 1, "host": "h2", "device": "cpu"}]}
    m = fp.collect(env=env, run=run)
    assert m["env"] == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    assert m["run"]["ranks"][1]["host"] == "h2"
    assert m["versions"]["python"].count(".") == 2
    assert m["tools"]["fio"] != fp.UNAVAILABLE  # fio is installed here
    assert m["collect_duration_s"] < 2.0
    json.dumps(m)  # JSON-able


def test_diff_ignores_volatile_and_reports_changes():
    a = fp.collect(env={"NCCL_ALGO": "Ring"})
    b = json.loads(json.dumps(a))
    b["collected_at"] += 10
    b["memory"]["available_bytes"] = 1
    b["host"] = "other-node"
    assert fp.diff(a, b) == []
    b["env"]["NCCL_ALGO"] = "Tree"
    b["env"]["NCCL_NCHANNELS"] = "4"
    b["versions"]["torch"] = "9.9"
    keys = {d.key: (d.baseline, d.other) for d in fp.diff(a, b)}
    assert keys == {
        "env.NCCL_ALGO": ("Ring", "Tree"),
        "env.NCCL_NCHANNELS": (None, "4"),
        "versions.torch": (a["versions"]["torch"], "9.9"),
    }


def test_cli_out_then_compare(cli, tmp_path):
    base = tmp_path / "a.json"
    code, out, _ = cli("fingerprint", "--out", base)
    assert code == 0 and "versions:" in out
    same = tmp_path / "b.json"
    same.write_text(base.read_text())
    code, out, _ = cli("fingerprint", "--compare", base, same)
    assert code == 0 and "no drift" in out
    drifted = json.loads(base.read_text())
    drifted["env"]["NCCL_ALGO"] = "Tree"
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps(drifted))
    code, out, _ = cli("fingerprint", "--compare", base, same, bad, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["drifted"] is True
    assert doc["drift"][str(same)] == []
    assert doc["drift"][str(bad)] == [{"key": "env.NCCL_ALGO", "baseline": None, "other": "Tree"}]


def test_cli_bad_input(cli, tmp_path):
    code, _, err = cli("fingerprint", "--compare", tmp_path / "missing.json", tmp_path / "x.json")
    assert code == 2 and "cannot read manifest" in err
    code, _, err = cli("fingerprint", "--compare", tmp_path / "only.json")
    assert code == 2 and "at least two" in err
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"kernel": "6.8"}')
    bad.write_text('{"fingerprint": [1]}')  # a list where the run record's object goes
    code, _, err = cli("fingerprint", "--compare", good, bad)
    assert code == 2 and "is not a JSON object" in err
