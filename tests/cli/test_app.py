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
    code, out, _ = cli("schema", "--kind", "training")
    assert code == 0
    schema = json.loads(out)
    assert schema["title"] == "Spec"
    assert "workload" in schema["properties"]
    assert schema["$defs"]["Parallelism"]["properties"]["tp"]["description"].startswith("Tensor-parallel")
    # The example spec validates against its own schema's required keys.
    example = yaml.safe_load((EXAMPLES / "lab-2node.yaml").read_text())
    assert set(schema["required"]) <= set(example)


def test_schema_describes_both_workload_kinds(cli):
    code, out, _ = cli("schema")
    assert code == 0
    schema = json.loads(out)
    assert [ref["$ref"] for ref in schema["anyOf"]] == ["#/$defs/Spec", "#/$defs/InferenceSpec"]
    defs = schema["$defs"]
    kinds = {
        name: defs[defs[name]["properties"]["workload"]["$ref"].rsplit("/", 1)[1]]["properties"]["kind"]
        for name in ("Spec", "InferenceSpec")
    }
    assert kinds["Spec"]["const"] == "training" and kinds["InferenceSpec"]["const"] == "inference"
    code, out, _ = cli("schema", "--kind", "inference")
    inference = json.loads(out)
    assert inference["title"] == "InferenceSpec" and "traffic" in json.dumps(inference)


def test_init_inference_writes_an_annotated_inference_spec_that_plans(cli, tmp_path):
    from gpufabric.spec.inference import load_inference_spec, read_located

    target = tmp_path / "serve.yaml"
    code, out, err = cli("init", target, "--kind", "inference")
    assert code == 0, err
    text = target.read_text()
    assert "kind: inference" in text and "# 99th-percentile time to first token" in text and "null" not in text
    spec = load_inference_spec(read_located(target))
    assert spec.workload.traffic.rate_rps == 10 and spec.num_gpus == 64
    code, out, err = cli("plan", target, "--format", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert doc["kind"] == "inference"
    assert (code == 1) == (doc["recommended"] is None)  # exit 1 exactly when no candidate meets the SLO


def test_training_only_commands_refuse_an_inference_spec_in_one_line(cli, tmp_path):
    spec = EXAMPLES / "serving" / "llama3-70b-serving.yaml"
    for args in (
        ("config", spec, "--dry-run"),
        ("sweep", spec, "--vary", "cluster.nodes=4,8", "--out", tmp_path / "sweep.csv"),
    ):
        code, out, err = cli(*args)
        assert code == 2 and not out
        assert len(err.strip().splitlines()) == 1
        assert "workload.kind: this command takes training specs" in err and "Input should be" not in err
        assert "plan, simulate, bench inference" in err


def test_each_command_module_registers_the_command_of_its_name():
    """main() builds an app with only the module named on the command line (cli/app.py)."""
    import importlib

    import typer

    from gpufabric.cli.app import COMMAND_MODULES, command_module

    for name in COMMAND_MODULES:
        app = typer.Typer()
        importlib.import_module(command_module(name)).register(app)
        names = [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]
        assert names == [name]


def test_a_named_command_loads_no_other_command_module():
    import ast
    import subprocess
    import sys

    code = (
        "import sys; from gpufabric.cli.app import main; rc = main(['predict', 'collective', '--format', 'json']);"
        " print(rc, sorted(m for m in sys.modules if m.startswith('gpufabric.cli.') and m.count('.') == 2))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    last = done.stdout.splitlines()[-1]
    assert last.startswith("0 [")
    loaded = set(ast.literal_eval(last[2:]))
    assert "gpufabric.cli.predict" in loaded
    assert not {"gpufabric.cli.bench", "gpufabric.cli.ingest", "gpufabric.cli.plan", "gpufabric.cli.lab"} & loaded


def test_plan_loads_openblas_on_one_thread_and_leaves_no_variable_behind():
    """cli/app.py _import_numpy_serial: one thread in the process after `plan` (no OpenBLAS
    workers), the variable gone again; a user's own setting is kept as it was."""
    import os
    import subprocess
    import sys

    if not os.path.isdir("/proc/self/task"):
        import pytest

        pytest.skip("counts threads in /proc")
    code = (
        "import os, sys\n"
        "from gpufabric.cli.app import main\n"
        f"main(['plan', {str(EXAMPLES / 'lab-2node.yaml')!r}, '--format', 'json'])\n"
        "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr)\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    }
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.stderr.split()[-2:] == ["1", "None"], done.stderr
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "OPENBLAS_NUM_THREADS": "2"},
    )
    assert done.stderr.split()[-1] == "2", done.stderr
