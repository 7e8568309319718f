from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.results.factories import make_db


@pytest.fixture
def db(tmp_path):
    return make_db(tmp_path / "r.db")


def test_markdown_to_stdout_is_default(cli, db):
    code, out, _ = cli("report", "latest", "--db", db)
    assert code == 0
    assert out.startswith("# gpufabric run 1: failed")
    assert "| iperf3.data | node1 | throughput_gbps | **failed** | 9.4 Gb/s | 20 | -47.8% | 0/1 |" in out
    assert "nccl.all_reduce [size_bytes=1024]" in out
    # a report is a document: --format text used to be a silent alias of markdown; now refused (issue 10)
    code, text_out, err = cli("report", "1", "--db", db, "--format", "text")
    assert code == 2 and text_out == "" and "use markdown" in err


def test_json_report_has_schema_version_and_samples(cli, db):
    code, out, _ = cli("report", "1", "--db", db, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["schema_version"] == 2  # v2: per-rank data typed (issue 10 item 2)
    run = data["run"]
    assert run["argv"] == ["gpufabric", "bench", "--suite", "quick"]
    assert run["fingerprint"]["nccl_env"] == {"NCCL_IB_HCA": "mlx5"}
    sockperf = next(r for r in run["results"] if r["name"] == "sockperf.data")
    assert len(sockperf["metrics"][0]["samples"]) == 2000
    assert {v["outcome"] for v in run["verdicts"]} == {"passed", "failed", "skipped"}


def test_junit_is_valid_xml_with_failures_and_skips(cli, db, tmp_path):
    out_file = tmp_path / "junit" / "r.xml"
    code, out, _ = cli("report", "latest", "--db", db, "--format", "junit", "--out", out_file)
    assert code == 0 and "wrote" in out
    root = ET.parse(out_file).getroot()
    assert root.tag == "testsuites"
    [suite] = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == int(root.get("tests"))
    failures = [c for c in cases if c.find("failure") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failures] == [("iperf3.data", "throughput_gbps@node1")]
    assert int(suite.get("failures")) == 1 and int(suite.get("skipped")) == len(skipped) == 1
    assert "want >= 18" in failures[0].find("failure").get("message")
    names = [(c.get("classname"), c.get("name")) for c in cases]
    assert len(names) == len(set(names))  # sweep sizes stay distinguishable
    assert suite.get("timestamp").count("T") == 1
    for case in cases:
        float(case.get("time"))


def test_html_report_to_file(cli, db, tmp_path):
    out_file = tmp_path / "r.html"
    code, _, _ = cli("report", "latest", "--db", db, "--format", "html", "--out", out_file)
    html = out_file.read_text()
    assert code == 0 and html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") == 4 and "<script" not in html and "<link" not in html
    assert "nccl.all_reduce: bus bandwidth" in html and "NCCL_IB_HCA" in html


def test_unknown_run_and_format(cli, db):
    code, _, err = cli("report", "42", "--db", db)
    assert code == 2 and "no run 42" in err
    code, _, err = cli("report", "latest", "--db", db, "--format", "pdf")
    assert code == 2
