"""docs/cli.md is generated from the CLI (scripts/cli_doc.py) and must not drift from it (issue 10)."""

from __future__ import annotations

import importlib.util

from tests.conftest import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("cli_doc", ROOT / "scripts" / "cli_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_doc_is_up_to_date():
    script = _script()
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == script.render(), "docs/cli.md is out of date: run python scripts/cli_doc.py"


def test_cli_doc_lists_every_command_and_visible_option():
    import typer

    from gpufabric.cli.app import build_app

    text = _script().render()
    root = typer.main.get_command(build_app())
    stack = [(["gpufabric"], root)]
    seen = 0
    while stack:
        path, command = stack.pop()
        section = text.split(f"## `{' '.join(path)}`\n", 1)
        assert len(section) == 2, f"{' '.join(path)} missing from docs/cli.md"
        body = section[1].split("\n## ", 1)[0]
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden and param.name != "help":
                assert f"`{param.opts[0]}`" in body, (path, param.opts[0])
                seen += 1
            elif param.param_type_name == "option" and param.hidden:
                assert f"`{param.opts[0]}`" not in body, (path, param.opts[0])
        for name, sub in (getattr(command, "commands", None) or {}).items():
            if not sub.hidden:
                stack.append(([*path, name], sub))
    assert seen > 100


def test_check_mode_reports_drift(tmp_path, monkeypatch, capsys):
    script = _script()
    monkeypatch.setattr(script, "DOC", tmp_path / "cli.md")
    monkeypatch.setattr(script, "ROOT", tmp_path)
    (tmp_path / "cli.md").write_text("# stale\n", encoding="utf-8")
    assert script.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert script.main([]) == 0 and script.main(["--check"]) == 0
