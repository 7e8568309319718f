"""Shared options (issue 10): one declaration each, old spellings kept as deprecated
aliases, group options that would not reach a subcommand refused, options that would do
nothing refused (exit 2)."""

from __future__ import annotations

import json

import pytest
import typer

from gpufabric.cli.app import build_app
from gpufabric.cli.options import DB_HELP, DURATION_SYNTAX, HOSTS_HELP, RENAMED, rewrite_renamed


def _commands():
    root = typer.main.get_command(build_app())
    stack = [(("gpufabric",), root)]
    while stack:
        path, command = stack.pop()
        yield path, command
        for name, sub in (getattr(command, "commands", None) or {}).items():
            stack.append(((*path, name), sub))


def _options(flag):
    for path, command in _commands():
        for param in command.params:
            if param.param_type_name == "option" and flag in param.opts:
                yield path, param


def test_shared_options_have_one_help_text_each():
    dbs = list(_options("--db"))
    assert len(dbs) >= 9
    assert {p.help for _, p in dbs} == {DB_HELP}
    timeouts = list(_options("--timeout"))
    assert len(timeouts) >= 4 and all(DURATION_SYNTAX in p.help for _, p in timeouts)
    hosts = list(_options("--hosts"))
    assert hosts and {p.help for _, p in hosts} == {HOSTS_HELP}
    for path, param in _options("--format"):
        assert param.help.startswith("Output format:"), path
        default = getattr(param.default, "value", param.default)
        # report renders documents (markdown by default), export writes a payload (JSON lines);
        # every other command defaults to text
        documents = {("gpufabric", "report"): "markdown", ("gpufabric", "export"): "jsonl"}
        assert default == documents.get(path, "text"), path


def test_old_spellings_are_hidden_everywhere():
    for flag in ("--nproc", "--size", "--ranks-per-node", "--ranks-per-host"):
        assert not list(_options(flag)), flag


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["bench", "collectives", "--nproc", "8"], ["bench", "collectives", "--gpus-per-node", "8"]),
        (["bench", "--quiet", "collectives", "--nproc=8"], ["bench", "--quiet", "collectives", "--gpus-per-node=8"]),
        (
            ["bench", "checkpoint", "--size", "1M", "--", "--size"],
            ["bench", "checkpoint", "--bytes", "1M", "--", "--size"],
        ),
        (["lab", "slurm", "up", "x", "--hosts", "3"], ["lab", "slurm", "up", "x", "--num-hosts", "3"]),
        (["predict", "--nproc", "8"], ["predict", "--nproc", "8"]),  # not a spelling predict ever had
        (["bench", "--suite", "quick", "--size", "1"], ["bench", "--suite", "quick", "--size", "1"]),
    ],
)
def test_rewrite_renamed(argv, expected):
    notes = []
    assert rewrite_renamed(argv, notes.append) == expected
    assert len(notes) == (argv != expected)
    for note in notes:
        assert "deprecated" in note and "\n" not in note


def test_every_renamed_flag_maps_to_a_visible_option():
    commands = dict(_commands())
    for path, renames in RENAMED.items():
        command = commands[("gpufabric", *path)]
        visible = {o for p in command.params if not p.hidden for o in p.opts}
        for old, new in renames.items():
            assert new in visible and old not in visible, (path, old)


def test_deprecated_alias_still_works_with_a_note(cli):
    code, new_out, new_err = cli("lab", "up", "x1", "--num-hosts", "3", "--dry-run", "--format", "json")
    assert code == 0 and new_err == ""
    code, old_out, old_err = cli("lab", "up", "x1", "--hosts", "3", "--dry-run", "--format", "json")
    assert code == 0 and old_out == new_out and len(json.loads(old_out)["hosts"]) == 3
    assert old_err.strip() == "gpufabric: warning: lab up --hosts is deprecated; use --num-hosts (same meaning)"
    code, out, err = cli("bench", "collectives", "--nproc", "3", "--dry-run", "--format", "json")
    assert code == 0 and "deprecated; use --gpus-per-node" in err
    assert len(json.loads(out)["commands"]) == 3


def test_group_options_before_a_subcommand_are_refused(cli):
    code, out, err = cli("bench", "--format", "json", "collectives", "--dry-run")
    assert code == 2 and out == ""
    assert "--format before 'collectives'" in err and "gpufabric bench collectives --format" in err
    assert len(err.strip().splitlines()) == 1


def test_timeout_is_one_duration_syntax(cli):
    for value in ("600", "600s", "10min"):
        code, out, err = cli("bench", "--suite", "quick", "--dry-run", "--format", "json", "--timeout", value)
        assert code == 0, err
        assert {t["timeout_s"] for t in json.loads(out)["tests"]} == {600.0}
    code, _, err = cli("bench", "--suite", "quick", "--dry-run", "--timeout", "ten")
    assert code == 2 and "--timeout" in err and "cannot read duration" in err
    code, _, err = cli("bench", "--suite", "quick", "--dry-run", "--timeout", "nan")
    assert code == 2 and "--timeout" in err
    # the probes read the same syntax, bounded, for all three limits
    code, out, err = cli(
        "bench", "collectives", "--dry-run", "--format", "json", "--op-timeout", "2min", "--init-timeout", "90"
    )
    assert code == 0, err
    config = json.loads(out)["config"]
    assert (config["op_timeout_s"], config["init_timeout_s"]) == (120.0, 90.0)
    code, _, err = cli("bench", "collectives", "--dry-run", "--timeout", "200h")
    assert code == 2 and "--timeout '200h': give" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "--suite", "quick", "--dry-run", "--quiet"], "--quiet has no effect with --dry-run"),
        (["bench", "--suite", "quick", "--dry-run", "--force"], "--force has no effect without --target-dir"),
        (["bench", "collectives", "--stream"], "--stream has no effect without --format json"),
        (["bench", "collectives", "--format", "json", "--quiet"], "--quiet has no effect with --format json"),
        (
            ["bench", "collectives", "--dry-run", "--k8s-image", "img"],
            "--k8s-image has no effect without --launcher k8s",
        ),
        (
            ["bench", "collectives", "--dry-run", "--slurm-mode", "sbatch"],
            "--slurm-mode has no effect without --launcher slurm",
        ),
        (["bench", "train", "--dry-run", "--plane", "storage"], "--plane has no effect without --lab"),
        (["bench", "checkpoint", "--dir", "d", "--dry-run", "--db", "x.db"], "--db has no effect with --dry-run"),
        (["calibrate", "latest", "--dry-run", "--out", "c.yaml"], "--out has no effect with --dry-run"),
    ],
)
def test_an_option_without_effect_is_an_error(cli, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(*argv)
    assert code == 2 and out == "", err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "d").exists()


def test_lab_status_defaults_to_text(cli, monkeypatch):
    import gpufabric.cli.lab as lab_cli
    from gpufabric.lab import net

    monkeypatch.setattr(lab_cli, "_need_root", lambda: None)
    monkeypatch.setattr(net, "status", lambda name: {"name": name, "up": False, "hosts": []})
    code, out, _ = cli("lab", "status", "zz9")
    assert code == 1 and out == "lab zz9: down\n"
    code, out, _ = cli("lab", "status", "zz9", "--format", "json")
    assert code == 1 and json.loads(out)["up"] is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["simulate", "examples/llama3-70b-1k.yaml", "--compute-ms", "50"],
            "--compute-ms has no effect with a training SPEC",
        ),
        (
            ["simulate", "examples/llama3-70b-1k.yaml", "--requests", "10"],
            "--requests has no effect with a training SPEC",
        ),
        (["simulate", "--ranks", "8", "--compute-cv", "0.1"], "--compute-cv has no effect without a SPEC"),
        (
            ["simulate", "examples/serving/llama3-70b-serving.yaml", "--steps", "10"],
            "--steps has no effect with an inference spec",
        ),
    ],
)
def test_simulate_refuses_options_of_another_mode(cli, argv, message):
    from tests.conftest import ROOT

    argv = [str(ROOT / a) if a.startswith("examples/") else a for a in argv]
    code, out, err = cli(*argv)
    assert code == 2 and out == "" and message in err, err


def test_audit_and_fingerprint_refuse_options_without_effect(cli, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    code, _, err = cli("audit", "--diff", a, b, "--reachability")
    assert code == 2 and "--reachability has no effect with --diff" in err
    m = tmp_path / "m.json"
    m.write_text("{}")
    code, _, err = cli("fingerprint", "--compare", m, m, "--out", tmp_path / "o.json")
    assert code == 2 and "--out has no effect with --compare" in err and not (tmp_path / "o.json").exists()


def test_writers_report_in_json_too(cli, tmp_path):
    from tests.conftest import ROOT
    from tests.results.factories import make_db

    db = make_db(tmp_path / "r.db")
    code, out, err = cli("bench", "thresholds", "latest", "--out", tmp_path / "g.yaml", "--db", db, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["out"] == str(tmp_path / "g.yaml") and doc["run_id"] == 1 and (tmp_path / "g.yaml").exists()
    csv = tmp_path / "s.csv"
    code, out, err = cli(
        "sweep",
        ROOT / "examples" / "lab-2node.yaml",
        "--vary",
        "workload.recompute=none,full",
        "--out",
        csv,
        "--format",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["variants"] == 2 and doc["rows"] == len(csv.read_text().splitlines()) - 1


def test_lab_slurm_status_text(cli, monkeypatch):
    import gpufabric.cli.lab as lab_cli
    from gpufabric.lab import slurm

    monkeypatch.setattr(lab_cli, "_need_root", lambda: None)
    doc = {"name": "ln", "up": True, "nodes": [{"name": "n1", "addr": "10.0.0.1", "state": "idle"}]}
    monkeypatch.setattr(slurm, "status", lambda name: doc)
    code, out, _ = cli("lab", "slurm", "status", "ln")
    assert code == 0 and out == "slurm lab ln: up\n  n1: idle\n"
