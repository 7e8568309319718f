"""One status (issue 23): for every bench subcommand, with a failure forced, the exit code,
the stored status, `runs`, and `report` in JSON, Markdown, HTML and JUnit all say failed.

The subcommands are enumerated from the CLI itself: a new one without a case here fails
the test. The probes are failed by an impossible ``--thresholds`` (the bar: it must fail
them everywhere); the suite by a timeout no tool can meet (real tools, killed).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer

from gpufabric.cli.app import build_app
from gpufabric.results.store import Store
from tests.conftest import EXAMPLES, needs_tool

pytest.importorskip("torch")

#: bench subcommands that do not run or store anything.
NOT_RUNS = {"thresholds"}


def _impossible(tmp_path: Path, test: str, metric: str) -> Path:
    path = tmp_path / f"impossible-{test.replace('*', 'all')}.yaml"
    path.write_text(f"hardware: nothing real\ntests:\n  {test}:\n    {metric}: {{min: 1.0e12}}\n", encoding="utf-8")
    return path


def _cases(tmp_path: Path) -> dict[str, list]:
    """Per subcommand ('' = the suite): its arguments with a failure forced."""
    small = ["--iters", "2", "--warmup", "0"]
    return {
        "": ["--suite", "quick", "--repeats", "1", "--timeout", "0.2", "--target-dir", tmp_path / "target"],
        "collectives": [
            "collectives",
            "--ops",
            "all_reduce",
            "--sizes",
            "1K,64K",
            *small,
            "--master-port",
            "29581",
            "--thresholds",
            _impossible(tmp_path, "torch.all_reduce", "busbw_gbps"),
        ],
        "train": [
            "train",
            "--steps",
            "2",
            "--warmup",
            "0",
            "--scale",
            "256",
            "--blocks",
            "1",
            "--master-port",
            "29582",
            "--thresholds",
            _impossible(tmp_path, "torch.train", "tokens_per_s"),
        ],
        "checkpoint": [
            "checkpoint",
            "--dir",
            tmp_path / "ckpt",
            "--size",
            "1M",
            "--formats",
            "torch",
            "--master-port",
            "29583",
            "--thresholds",
            _impossible(tmp_path, "torch.checkpoint.*", "write_gbps"),
        ],
        "inference": [
            "inference",
            EXAMPLES / "serving" / "llama3-70b-serving.yaml",
            *small,
            "--master-port",
            "29584",
            "--thresholds",
            _impossible(tmp_path, "torch.send_recv", "busbw_gbps"),
        ],
        "gpu": [
            "gpu",
            "--spec",
            EXAMPLES / "lab-2node.yaml",
            "--device",
            "cpu",
            "--repeats",
            "1",
            "--thresholds",
            _impossible(tmp_path, "gpu.hbm.read", "bw_gbps"),
        ],
    }


def _bench_subcommands() -> set[str]:
    group = typer.main.get_command(build_app(("bench",)))
    bench = group.commands["bench"]  # type: ignore[attr-defined]
    return set(bench.commands) - NOT_RUNS


def test_every_run_subcommand_has_a_case(tmp_path):
    assert set(_cases(tmp_path)) - {""} == _bench_subcommands()


@needs_tool("fio")
@needs_tool("iperf3")
@pytest.mark.slow
@pytest.mark.parametrize("name", ["", "collectives", "train", "checkpoint", "inference", "gpu"])
def test_forced_failure_fails_everywhere(cli, tmp_path, name):
    db = tmp_path / "r.db"
    code, out, err = cli("bench", *_cases(tmp_path)[name], "--db", db, "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    assert doc["status"] == "failed"
    with Store.open(db) as store:
        runs = store.list_runs()
        run = store.get_run("latest")
    assert len(runs) == 1 and run.status == "failed"  # one run per command, stored as it exited
    assert run.duration_s is not None and run.duration_s > 0 and run.hosts  # where and how long (issue 23)
    if name:
        # The impossible bound was judged on what the probe measured, and failed.
        assert any(v.outcome == "failed" and v.source.startswith("thresholds:") for v in run.verdicts), run.verdicts
    code, listed, _ = cli("runs", "--db", db, "--format", "json")
    assert code == 0 and [r["status"] for r in json.loads(listed)["runs"]] == ["failed"]
    code, exported, _ = cli("report", "latest", "--db", db, "--format", "json")
    assert code == 0 and json.loads(exported)["run"]["status"] == "failed"
    code, junit, _ = cli("report", "latest", "--db", db, "--format", "junit")
    root = ET.fromstring(junit.encode())
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    assert int(suite.get("failures", "0")) + int(suite.get("errors", "0")) >= 1
    code, markdown, _ = cli("report", "latest", "--db", db, "--format", "markdown")
    assert code == 0 and "failed" in markdown
    code, html, _ = cli("report", "latest", "--db", db, "--format", "html")
    assert code == 0 and "failed" in html


def test_a_passing_probe_passes_everywhere(cli, tmp_path):
    """The other direction: exit 0, stored passed, JUnit with no failure or error."""
    db = tmp_path / "r.db"
    args = ["bench", "collectives", "--ops", "all_reduce", "--sizes", "1K", "--iters", "2", "--warmup", "0"]
    code, out, err = cli(*args, "--master-port", "29585", "--db", db, "--format", "json")
    assert code == 0 and json.loads(out)["status"] == "passed", err
    code, junit, _ = cli("report", "latest", "--db", db, "--format", "junit")
    suite = ET.fromstring(junit.encode()).find("testsuite")
    assert suite is not None and suite.get("failures") == "0" and suite.get("errors") == "0"
    with Store.open(db) as store:
        assert store.get_run("latest").status == "passed"
