"""`plan` without typer (cli/app.py _fast_path, cli/request_options.py plain_values, issue 32):
the same request, the same output and exit code as through typer, and typer is left to
every command line it would read differently."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpufabric.cli import plan as plan_cli
from gpufabric.cli.app import main
from gpufabric.cli.output import ReportFormat
from tests.conftest import EXAMPLES, ROOT

LAB = str(EXAMPLES / "lab-2node.yaml")


def _through_typer(monkeypatch, argv: list[str]) -> tuple[object, object]:
    """The request and format typer builds for ``argv`` (the planner itself not run)."""
    seen: list[object] = []

    def stop(request, fmt):
        seen.append((request, fmt))
        return 0

    with monkeypatch.context() as patch:
        patch.setattr(plan_cli, "fast_path", lambda args: None)
        patch.setattr(plan_cli, "run", stop)
        assert main(argv) == 0
    ((request, fmt),) = seen
    return request, fmt


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", LAB],
        ["plan", LAB, "--format", "json"],
        ["plan", "--format=markdown", LAB],
        ["plan", LAB, "--top", "3"],
        ["plan", "--top=12", LAB, "--catalog", LAB, "--catalog=" + str(EXAMPLES / "gb200-nvl72-70b.yaml")],
        ["plan", "no/such/spec.yaml"],
    ],
)
def test_the_fast_path_builds_the_request_typer_builds(argv, monkeypatch):
    from gpufabric.cli.request_options import build_request

    typed = plan_cli.plain_values(plan_cli.PlanRequest, argv[1:], {"--format": ("fmt", ReportFormat)})
    assert typed is not None
    fmt = typed.pop("fmt", ReportFormat.text)
    request = build_request(plan_cli.PlanRequest, typed)
    typer_request, typer_fmt = _through_typer(monkeypatch, argv)
    assert (request, fmt) == (typer_request, typer_fmt)
    assert [type(p) for p in request.catalog_files] == [type(p) for p in typer_request.catalog_files]
    assert type(request.spec_file) is type(typer_request.spec_file) and type(fmt) is type(typer_fmt)


@pytest.mark.parametrize(
    "words",
    [
        [],  # the spec is required: typer's usage error
        ["--help"],
        [LAB, "--help"],
        [LAB, "-h"],
        ["--", LAB],
        [LAB, LAB],
        [LAB, "--top"],
        [LAB, "--top", "0"],  # below the range: typer's message
        [LAB, "--top", "007"],
        [LAB, "--top", "+3"],
        [LAB, "--top", "1_0"],
        [LAB, "--top", "٣"],  # a digit, not ASCII
        [LAB, "--top", "1", "--top", "2"],
        [LAB, "--format", "JSON"],
        [LAB, "--format", "yaml"],
        [LAB, "--bogus"],
        [LAB, "--catalog", "-"],
        [LAB, "--catalog="],
        [""],
        ["-"],
        ["a\0b"],
    ],
)
def test_anything_else_is_left_to_typer(words):
    assert plan_cli.fast_path(["plan", *words]) is None


@pytest.mark.parametrize("name", ["lab-2node.yaml", "llama3-70b-1k.yaml"])
@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_the_output_is_typers_byte_for_byte(name, fmt, monkeypatch, capsys):
    argv = ["plan", str(EXAMPLES / name), "--format", fmt, "--top", "5"]
    assert plan_cli.fast_path(argv) is not None
    fast_code = main(argv)
    fast = capsys.readouterr()
    monkeypatch.setattr(plan_cli, "fast_path", lambda args: None)
    assert main(argv) == fast_code
    slow = capsys.readouterr()
    assert (fast.out, fast.err) == (slow.out, slow.err)
    assert fast.out


def test_a_plan_imports_no_typer():
    probe = f"import sys; from gpufabric.cli.app import main; rc = main(['plan', {LAB!r}]); print(rc, 'typer' in sys.modules, file=sys.stderr)"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert done.stderr.split()[-2:] == ["0", "False"], done.stderr
