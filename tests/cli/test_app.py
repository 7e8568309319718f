"""The CLI frame: version, help, init, schema, exit codes."""

from __future__ import annotations

import json

import yaml

from gpufabric import __version__
from gpufabric.spec import load_spec
from tests.conftest import EXAMPLES


def test_version(cli):
    code, out, _ = cli("--version")
    assert (code, out.strip()) == (0, f"gpufabric {__version__}")


def test_unknown_command_is_usage_error(cli):
    code, _, err = cli("no-such-command")
    assert code == 2
    assert "No such command" in err


def test_init_writes_annotated_valid_spec(cli, tmp_path):
    target = tmp_path / "g.yaml"
    code, out, _ = cli("init", target)
    assert code == 0 and "wrote" in out
    text = target.read_text()
    assert "# Tensor-parallel degree" in text
    # Unset optional fields are shown commented out, never as YAML null.
    assert "    # heads:\n" in text and "\n# security:\n" in text and "null" not in text
    assert load_spec(target).spec.num_gpus == 1024
    code, _, err = cli("init", target)
    assert code == 2 and "--force" in err


def test_schema_is_json_schema_of_spec(cli):
    code, out, _ = cli("schema")
    assert code == 0
    schema = json.loads(out)
    assert schema["title"] == "Spec"
    assert "workload" in schema["properties"]
    assert schema["$defs"]["Parallelism"]["properties"]["tp"]["description"].startswith("Tensor-parallel")
    # The example spec validates against its own schema's required keys.
    example = yaml.safe_load((EXAMPLES / "lab-2node.yaml").read_text())
    assert set(schema["required"]) <= set(example)
