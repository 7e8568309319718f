"""`gpufabric plan` in-process: JSON contract on every example, text, markdown, bad input."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLES

CONTRACT = (
    "id",
    "fabric",
    "topology",
    "storage",
    "step_time_s",
    "step_time_p99_s",
    "step_time_cv",
    "comm_exposed_s",
    "checkpoint_write_s",
    "checkpoint_stall_fraction",
    "goodput",
    "time_to_train_days",
    "capex_usd",
    "usd_per_gpu_hour",
    "run_cost_usd",
    "meets_requirements",
    "violations",
)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_plan_json_contract(cli, path):
    code, out, err = cli("plan", path, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema_version"] == 1 and doc["name"]
    for key in ("candidates", "pareto", "recommended", "rationale"):
        assert key in doc
    ids = {c["id"] for c in doc["candidates"]}
    assert doc["recommended"] in doc["pareto"] and doc["recommended"] in ids
    assert set(doc["pareto"]) <= ids
    for c in doc["candidates"]:
        assert all(k in c for k in CONTRACT)
        assert isinstance(c["violations"], list) and "oversubscription" in c and "breakdown" in c


def test_plan_text_fits_120_columns(cli):
    code, out, _ = cli("plan", EXAMPLES / "llama3-70b-1k.yaml")
    assert code == 0
    assert "Recommendation" in out and "Sensitivity" in out and "ib-ndr" in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_plan_top_and_markdown(cli):
    code, out, _ = cli("plan", EXAMPLES / "roce-256gpu-8b.yaml", "--format", "json", "--top", "3")
    doc = json.loads(out)
    assert code == 0 and len(doc["candidates"]) == 3
    code, out, _ = cli("plan", EXAMPLES / "roce-256gpu-8b.yaml", "--format", "markdown", "--top", "5")
    assert code == 0 and out.startswith("# Plan: roce-256gpu-8b") and out.count("\n| ") == 6


def test_catalog_override_changes_plan(cli, tmp_path):
    cheap = tmp_path / "cheap.yaml"
    cheap.write_text("switches:\n  qm9700:\n    price_usd: 1\n")
    _, base, _ = cli("plan", EXAMPLES / "lab-2node.yaml", "--format", "json")
    code, out, _ = cli("plan", EXAMPLES / "lab-2node.yaml", "--format", "json", "--catalog", cheap)
    assert code == 0
    before = {c["id"]: c["capex_usd"] for c in json.loads(base)["candidates"]}
    after = {c["id"]: c["capex_usd"] for c in json.loads(out)["candidates"]}
    key = "ib-ndr/rail-optimized/1:1/nvmeof-rdma"
    assert after[key] == pytest.approx(before[key] - 36000 + 1)


def test_unknown_catalog_id_in_spec_is_located(cli, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text((EXAMPLES / "lab-2node.yaml").read_text().replace("roce-400g", "roce-4000g"))
    code, out, err = cli("plan", spec)
    assert code == 2 and out == ""
    assert f"{spec}:22:" in err and "options.fabrics[1]: unknown catalog id 'roce-4000g'" in err
    assert "did you mean 'roce-400g'" in err and "Traceback" not in err


def test_bad_catalog_file(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("fabrics:\n  ib-ndr:\n    nic_efficiency: lots\n")
    code, _, err = cli("plan", EXAMPLES / "lab-2node.yaml", "--catalog", bad)
    assert code == 2
    assert f"{bad}:3:5: fabrics.ib-ndr.nic_efficiency:" in err and "valid number" in err
    code, _, err = cli("plan", EXAMPLES / "lab-2node.yaml", "--catalog", tmp_path / "missing.yaml")
    assert code == 2 and "cannot read catalog" in err
    bad.write_text("fabrics: [1, 2\n")
    code, _, err = cli("plan", EXAMPLES / "lab-2node.yaml", "--catalog", bad)
    assert code == 2 and "not valid YAML" in err


def test_plan_refuses_sharp_on_an_incapable_fabric_with_a_located_error(cli, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text((EXAMPLES / "roce-256gpu-8b.yaml").read_text() + "\n")
    text = spec.read_text()
    assert "options:" in text
    spec.write_text(text.replace("options:", "options:\n  in_network_reduction: true", 1))
    code, out, err = cli("plan", spec)
    assert code == 2 and out == ""
    assert "options.in_network_reduction" in err and "cannot" in err and f"{spec}:" in err
    assert "Traceback" not in err


def test_plan_shows_rented_and_sharp_designs(cli, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("""name: rt-cli
cluster: {nodes: 16, gpus_per_node: 8, gpu: h100-sxm}
workload:
  model: {params: 8e9, layers: 32, hidden: 4096, seq_len: 8192}
  parallelism: {tp: 8, pp: 1, dp: 16, zero_stage: 1}
  global_batch_tokens: 4194304
  total_tokens: 1e11
options:
  fabrics: [ib-ndr]
  storage: [local-nvme]
  in_network_reduction: [true, false]
  capacity: [build, rent]
  rentals: [aws-p5]
  rent_terms: [on_demand]
""")
    code, out, err = cli("plan", spec, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    by = {c["id"]: c for c in doc["candidates"]}
    assert set(by) == {
        "ib-ndr/rail-optimized/1:1/local-nvme",
        "ib-ndr/rail-optimized/1:1/local-nvme/sharp",
        "rent/aws-p5/on_demand/local-nvme",
    }
    rent = by["rent/aws-p5/on_demand/local-nvme"]
    assert rent["capacity"] == "rent" and rent["capex_usd"] == 0 and rent["break_even_months"] > 0
    assert rent["break_even_utilisation"] > 0 and rent["build_reference"] in by
    assert by["ib-ndr/rail-optimized/1:1/local-nvme/sharp"]["dp_algorithm"] == "collnet"
    code, out, _ = cli("plan", spec)
    assert code == 0 and "aws-p5" in out and "rent od" in out and "ib-ndr+S" in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_a_training_plan_loads_only_what_it_uses():
    """Issue 32: a text plan of a training spec imports neither the serving kind
    (app.workloads makes it on first use), nor another command's request record
    (app.requests loads each on first use), nor json (only JSON output and input load it)."""
    import subprocess
    import sys

    code = (
        "import sys; from gpufabric.cli.app import main; "
        f"rc = main(['plan', {str(EXAMPLES / 'llama3-70b-1k.yaml')!r}]); "
        "print(rc, sorted(m for m in sys.modules if m.startswith(('gpufabric.app.', 'json'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    rc, loaded = done.stdout.splitlines()[-1].split(" ", 1)
    assert rc == "0"
    assert "gpufabric.app.training" in loaded and "gpufabric.app.requests.plan" in loaded
    for unused in ("gpufabric.app.inference", "gpufabric.app.requests.simulate", "'json'"):
        assert unused not in loaded
