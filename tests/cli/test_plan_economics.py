"""`gpufabric plan` economics (issue 27): interval range errors, the commit column, H200 build vs rent."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLES

BVR = (EXAMPLES / "build-vs-rent-70b.yaml").read_text()


@pytest.mark.parametrize("value", ["0.05", "1e-300", "1e308", "43201", "0"])
def test_interval_outside_the_physical_range_is_a_located_error(cli, tmp_path, value):
    spec = tmp_path / "s.yaml"
    spec.write_text(BVR.replace("interval_min: auto", f"interval_min: {value}"))
    code, out, err = cli("plan", spec)
    assert code == 2 and out == ""
    line = err.strip().splitlines()[-1]
    assert f"{spec}:" in line and "workload.checkpoint.interval_min" in line
    assert ">= 1 and <= 43200" in line, line
    assert "Traceback" not in err


def test_h200_build_vs_rent_plans_and_the_text_table_shows_commitments(cli, tmp_path):
    spec = tmp_path / "h200.yaml"
    spec.write_text(BVR.replace("gpu: h100-sxm", "gpu: h200"))
    code, out, err = cli("plan", spec, "--top", "40")
    assert code == 0, err
    header = next(line for line in out.splitlines() if " capex " in line and " commit " in line).split()
    # Figures after the storage column: step p99 CV comm stall good days capex commit run.
    assert header[header.index("storage") + 8 : header.index("storage") + 11] == ["capex", "commit", "run"]
    rows = [line.split() for line in out.splitlines() if " rent 3y " in line]
    assert rows, out
    code, js, _ = cli("plan", spec, "--format", "json")
    doc = json.loads(js)
    by = {(c["rental"], c["term"], c["storage"]): c for c in doc["candidates"] if c["capacity"] == "rent"}
    for row in rows:
        at = row.index("rent")  # "[mark] market-h200 rent 3y pfs 4.35 ..."
        offer, storage = row[at - 1], row[at + 2]
        cand = by[(offer, "3y", storage)]
        assert row[at + 2 + 8] == "-"  # a rented row has no capex
        assert float(row[at + 2 + 9].replace(",", "")) == pytest.approx(cand["rent_commitment_usd"] / 1e6, abs=0.05)
        assert cand["rent_commitment_usd"] > 10e6  # three years of 1,024 GPUs
    built = [line.split() for line in out.splitlines() if " rail 1:1 " in line]
    assert built and all(r[r.index("rail") + 2 + 9] == "-" for r in built)  # no commitment when built
    assert "Build vs rent over a horizon of 12 months" in out  # the spec states its horizon


def test_plan_json_names_the_designed_storage_bandwidth_per_node(cli):
    code, out, _ = cli("plan", EXAMPLES / "llama3-70b-1k.yaml", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    best = next(c for c in doc["candidates"] if c["id"] == doc["recommended"])
    assert best["storage_read_gbps_per_node"] * 128 == pytest.approx(best["storage_read_gbps"])
    assert best["storage_write_gbps_per_node"] > 0
    assert [t["name"] for t in doc["storage_tiers"]][1:] == [
        "dgx-superpod-standard",
        "dgx-superpod-enhanced",
        "meta-llama3",
    ]


def test_the_recommendation_line_names_the_placement(cli, tmp_path):
    code, out, _ = cli("plan", EXAMPLES / "roce-256gpu-8b.yaml")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("Recommendation:"))
    assert line.endswith("(placement fragmented)")
    spec = tmp_path / "c.yaml"
    spec.write_text(
        (EXAMPLES / "roce-256gpu-8b.yaml").read_text().replace("options:\n", "options:\n  placement: contiguous\n")
    )
    code, out, _ = cli("plan", spec, "--format", "json")
    assert json.loads(out)["placement"] == "contiguous"


def test_rent_without_a_storage_the_offerings_have_is_a_located_error(cli, tmp_path):
    spec = tmp_path / "s.yaml"
    text = BVR.replace("gpu: h100-sxm", "gpu: h200").replace("storage: [local-nvme, pfs]", "storage: [nvmeof-rdma]")
    spec.write_text(text)
    code, out, err = cli("plan", spec)
    assert code == 2 and out == ""
    assert "options.storage" in err and "local-nvme, pfs" in err
