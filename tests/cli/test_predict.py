"""`gpufabric predict collective` in-process."""

from __future__ import annotations

import json

import pytest


def test_predict_json_contract(cli):
    code, out, err = cli(
        "predict",
        "collective",
        "--op",
        "all_reduce",
        "--bytes",
        "1G",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--gpu",
        "h100-sxm",
        "--fabric",
        "ib-ndr",
        "--format",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    for key in ("op", "bytes", "ranks", "algorithm", "time_us", "algbw_gbps", "busbw_gbps"):
        assert key in doc
    assert (doc["op"], doc["bytes"], doc["ranks"]) == ("all_reduce", 2**30, 16)
    assert doc["algbw_gbps"] == pytest.approx(2**30 / (doc["time_us"] * 1e3))
    assert doc["busbw_gbps"] == pytest.approx(doc["algbw_gbps"] * 2 * 15 / 16)


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"])
def test_predict_every_op_text(cli, op):
    code, out, _ = cli("predict", "collective", "--op", op, "--bytes", "64K", "--nodes", "4", "--fabric", "roce-400g")
    assert code == 0
    assert op in out and "busbw" in out and "65536" not in out  # sizes print as 64 KiB


def test_forced_ring_over_nvlink(cli):
    code, out, _ = cli("predict", "collective", "--bytes", "8GiB", "--algorithm", "ring", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["algorithm"] == "ring"
    assert doc["busbw_gbps"] == pytest.approx(367.5, rel=0.05)  # nccl-tests #212


def test_bad_size(cli):
    code, out, err = cli("predict", "collective", "--bytes", "1Q")
    assert code == 2 and out == ""
    assert "cannot read size '1Q'" in err and "Traceback" not in err


def test_unknown_ids_and_op(cli):
    code, _, err = cli("predict", "collective", "--fabric", "ib-nd")
    assert code == 2 and "unknown fabric id 'ib-nd'" in err and "did you mean 'ib-ndr'" in err
    code, _, err = cli("predict", "collective", "--gpu", "h300")
    assert code == 2 and "unknown GPU id 'h300'" in err
    code, _, err = cli("predict", "collective", "--op", "gather")
    assert code == 2 and "unknown collective 'gather'" in err


def test_bad_catalog_file(cli, tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("gpus:\n  h100-sxm:\n    tdp_w: -5\n")
    code, _, err = cli("predict", "collective", "--catalog", bad)
    assert code == 2 and f"{bad}:3:5: gpus.h100-sxm.tdp_w" in err


def test_timing_sharp_and_breakdown_in_json(cli):
    base = ["predict", "collective", "--op", "all_reduce", "--bytes", "8", "--nodes", "2", "--format", "json"]
    eager = json.loads(cli(*base)[1])
    graph = json.loads(cli(*base, "--timing", "graph")[1])
    assert eager["timing"] == "eager" and graph["timing"] == "graph"
    # The catalog's H100 eager launch replaces the 1.0 us graph launch, plus ib-ndr's proxy x log2(2)
    from gpufabric.catalog import load_catalog

    cat = load_catalog()
    eager_us = cat.gpu("h100-sxm").eager_launch_us + cat.fabric("ib-ndr").proxy_us
    assert eager["time_us"] - graph["time_us"] == pytest.approx(eager_us - 1.0)
    assert eager["breakdown"]["launch_us"] == pytest.approx(eager_us)
    parts = eager["breakdown"]
    assert parts["launch_us"] + parts["latency_us"] + parts["bandwidth_us"] == pytest.approx(eager["time_us"])
    big = ["predict", "collective", "--bytes", "1G", "--nodes", "16", "--format", "json"]
    assert json.loads(cli(*big)[1])["algorithm"] != "collnet"
    sharp = json.loads(cli(*big, "--sharp")[1])
    assert sharp["algorithm"] == "collnet" and sharp["sharp"] is True
    code, _, err = cli(*base, "--timing", "lazy")
    assert code == 2 and "unknown timing 'lazy'" in err


def test_predict_does_not_build_the_spec_models():
    """The spec models (pydantic, field docstrings read from source) cost a third of the
    command's CPU and predict needs none of them (docs/performance.md)."""
    import subprocess
    import sys

    code = (
        "import sys; from gpufabric.cli.app import main; rc = main(['predict', 'collective', '--format', 'json']);"
        " print(rc, sorted(m for m in sys.modules if m.startswith('gpufabric.spec.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    # spec.cache: the catalog's cache (no models)
    assert done.stdout.splitlines()[-1] == "0 ['gpufabric.spec.cache', 'gpufabric.spec.loader', 'gpufabric.spec.types']"


def _json(cli, *args):
    code, out, err = cli("predict", "collective", *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_protocol_is_forced_like_nccl_proto(cli):
    tuner = _json(cli, "--bytes", "8")
    assert tuner["protocol"] == "LL"
    simple = _json(cli, "--bytes", "8", "--protocol", "Simple")
    assert simple["protocol"] == "Simple" and simple["time_us"] > tuner["time_us"]
    ll = _json(cli, "--bytes", "8G", "--protocol", "LL")
    assert ll["protocol"] == "LL" and ll["busbw_gbps"] < 0.5 * _json(cli, "--bytes", "8G")["busbw_gbps"]
    code, _, err = cli("predict", "collective", "--protocol", "LL256")
    assert code == 2 and "unknown protocol 'LL256'" in err
    code, _, err = cli("predict", "collective", "--algorithm", "nvls", "--protocol", "LL")
    assert code == 2 and "with protocol LL" in err and "Traceback" not in err


def test_harness_adds_the_launch_of_one_thread_driving_every_gpu(cli):
    from gpufabric.model.collectives import SINGLE_PROCESS_US, TORCH_OVERHEAD_US

    per_gpu = _json(cli, "--bytes", "8")
    single = _json(cli, "--bytes", "8", "--harness", "single-process")
    torch = _json(cli, "--bytes", "8", "--harness", "torch")
    assert single["harness"] == "single-process"
    assert single["time_us"] - per_gpu["time_us"] == pytest.approx(7 * SINGLE_PROCESS_US)
    assert torch["time_us"] - per_gpu["time_us"] == pytest.approx(TORCH_OVERHEAD_US)
    big = _json(cli, "--bytes", "8G"), _json(cli, "--bytes", "8G", "--harness", "single-process")
    assert big[1]["busbw_gbps"] == pytest.approx(big[0]["busbw_gbps"], rel=5e-3)  # launch only (7 x 4.8 us of ~17 ms)
    code, _, err = cli("predict", "collective", "--harness", "mpi")
    assert code == 2 and "unknown harness 'mpi'" in err


def test_nccl_version_removes_algorithms_it_does_not_have(cli):
    assert _json(cli, "--bytes", "8G")["algorithm"] == "nvls"
    assert _json(cli, "--bytes", "8G", "--nccl-version", "2.16.5")["algorithm"] != "nvls"
    assert _json(cli, "--bytes", "8G", "--nccl-version", "21803")["algorithm"] == "nvls"
    code, _, err = cli("predict", "collective", "--algorithm", "nvls_tree", "--nodes", "2", "--nccl-version", "2.17.1")
    assert code == 2 and "needs NCCL >= 2.18" in err
    code, _, err = cli("predict", "collective", "--nccl-version", "two")
    assert code == 2 and "is not like 2.18.3" in err


def test_json_reports_the_ceiling_the_prediction_respects(cli):
    doc = _json(cli, "--bytes", "8G", "--nodes", "2", "--gpu", "b200")
    assert doc["ceiling_algbw_gbps"] == pytest.approx(8 * 50 * 0.94)
    assert doc["algbw_gbps"] <= doc["ceiling_algbw_gbps"]
