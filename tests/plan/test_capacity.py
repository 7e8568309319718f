"""In-network reduction as a choice, and rented capacity beside built designs (issues 15.1, 19)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from gpufabric.catalog import load_catalog
from gpufabric.errors import InputError, SpecError
from gpufabric.model import cost
from gpufabric.model.collectives import ALGORITHMS, predict_collective
from gpufabric.model.step import GRAD_BYTES
from gpufabric.plan import make_plan
from gpufabric.plan.capacity import break_even, check_options
from gpufabric.plan.evaluate import evaluate_table
from gpufabric.plan.table import build_table, enumerate_designs
from gpufabric.spec import load_spec
from gpufabric.spec.models import Spec

CAT = load_catalog()

BASE = {
    "name": "rt-16",
    "cluster": {"nodes": 16, "gpus_per_node": 8, "gpu": "h100-sxm"},
    "workload": {
        "model": {"params": 8e9, "layers": 32, "hidden": 4096, "seq_len": 8192},
        "parallelism": {"tp": 8, "pp": 1, "dp": 16, "zero_stage": 1},
        "global_batch_tokens": 4194304,
        "total_tokens": 1e11,
    },
    "options": {"fabrics": ["ib-ndr"], "storage": ["local-nvme"]},
}


def spec_with(**options) -> Spec:
    data = {**BASE, "options": {**BASE["options"], **options}}
    return Spec.model_validate(data)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# -- in-network reduction ---------------------------------------------------------------

NICS_CARRY_GBPS = 8 * CAT.fabric("ib-ndr").nic_line_gbps  # 8 x 400G NDR per node


@pytest.mark.parametrize("timing", ["eager", "graph"])
def test_sharp_off_stays_under_what_the_nics_carry_and_on_exceeds_it(timing):
    def busbw(sharp: bool) -> float:
        return predict_collective(
            op="all_reduce",
            size_bytes=8 << 30,
            nodes=16,
            gpus_per_node=8,
            gpu="h100-sxm",
            fabric="ib-ndr",
            catalog=CAT,
            sharp=sharp,
            timing=timing,
        ).busbw_gbps

    off, on = busbw(False), busbw(True)
    assert off < NICS_CARRY_GBPS  # measured without SHARP: ~370-380 GB/s (issue 15)
    assert on > NICS_CARRY_GBPS > off


def test_planner_uses_sharp_only_on_designs_that_chose_it():
    spec = spec_with(in_network_reduction=[True, False])
    designs = enumerate_designs(spec, CAT)
    assert [d.sharp for d in designs] == [True, False]
    out = evaluate_table(build_table(spec, CAT, designs))
    algos = [ALGORITHMS[int(a)] for a in out.dp_algorithm]
    assert algos[0] == "collnet" and algos[1] != "collnet"
    # DP group: one GPU per node (tp = 8) over 16 nodes, one NIC each.
    grad = 8e9 / 8 * GRAD_BYTES["bf16"]
    n = 16
    # ZeRO-1 moves what an all-reduce moves (factor 1): busbw per the nccl-tests definition.
    busbw = grad * 2 * (n - 1) / n / out.dp_allreduce_s / 1e9
    carry = CAT.fabric("ib-ndr").nic_line_gbps  # one NIC per DP rank
    assert busbw[1] < carry < busbw[0]
    assert out.step_time_s[0] < out.step_time_s[1]


def test_sharp_default_is_off_everywhere():
    spec = spec_with()
    assert [d.sharp for d in enumerate_designs(spec, CAT)] == [False]
    out = evaluate_table(build_table(spec, CAT, enumerate_designs(spec, CAT)))
    assert ALGORITHMS[int(out.dp_algorithm[0])] != "collnet" and out.sharp_usd[0] == 0


def test_sharp_cost_is_the_licence_and_the_manager(tmp_path):
    over = write(
        tmp_path, "c.yaml", "fabrics:\n  ib-ndr:\n    sharp_usd_per_switch: 1000\n    sharp_usd_per_node: 700\n"
    )
    cat = load_catalog([over])
    spec = spec_with(in_network_reduction=[True, False])
    cands = {c.id: c for c in make_plan(spec, cat).candidates}
    on, off = cands["ib-ndr/rail-optimized/1:1/local-nvme/sharp"], cands["ib-ndr/rail-optimized/1:1/local-nvme"]
    licence = on.switches * 1000 + 16 * 700
    assert on.sharp_usd == pytest.approx(licence) and off.sharp_usd == 0
    assert on.network_capex_usd - off.network_capex_usd == pytest.approx(licence)
    assert on.capex_usd - off.capex_usd == pytest.approx(licence)
    assert on.in_network_reduction and not off.in_network_reduction


def test_sharp_is_stated_in_the_rationale():
    plan = make_plan(spec_with(in_network_reduction=[True, False]), CAT)
    assert "In-network reduction (SHARP)" in plan.rationale
    assert "aggregation manager" in plan.rationale


def test_sharp_true_on_incapable_fabric_is_a_located_error(tmp_path):
    path = write(
        tmp_path,
        "s.yaml",
        """name: rt
cluster: {nodes: 2}
workload:
  model: {params: 1e9, layers: 8, hidden: 2048, seq_len: 2048}
  parallelism: {tp: 8, dp: 2}
  global_batch_tokens: 65536
  total_tokens: 1e9
options:
  fabrics: [ib-ndr, roce-400g]
  in_network_reduction: true
""",
    )
    loaded = load_spec(path, known_ids=CAT.known_ids())
    with pytest.raises(SpecError, match="roce-400g cannot") as err:
        check_options(loaded.spec, CAT, loaded.located)
    assert err.value.line == 10 and "options.in_network_reduction" in str(err.value)
    # Both: the incapable fabric is enumerated without it, no error.
    both = loaded.spec.model_copy(
        update={"options": loaded.spec.options.model_copy(update={"in_network_reduction": [True, False]})}
    )
    check_options(both, CAT)
    sharp = [d for d in enumerate_designs(both, CAT) if d.sharp]
    assert {d.fabric for d in sharp} == {"ib-ndr"} and len(sharp) == 4  # one per storage backend
    assert all(d.id.endswith("/sharp") for d in sharp)


def test_provider_fabric_cannot_be_built():
    with pytest.raises(InputError, match="cannot be built"):
        check_options(spec_with(fabrics=["efa-p5"]), CAT)


# -- rented capacity ----------------------------------------------------------------------


def test_rented_cost_per_gpu_hour_is_the_catalog_price_times_utilisation(tmp_path):
    # Storage priced at 0 so the compute price stands alone; then with it.
    over = write(tmp_path, "c.yaml", "rentals:\n  aws-p5:\n    storage_usd_per_tb_month: 0\n")
    u = 0.7
    spec = spec_with(capacity=["build", "rent"], rentals=["aws-p5"], utilisation=u)
    for cat in (load_catalog([over]), CAT):
        offer = cat.rental("aws-p5")
        cands = {c.id: c for c in make_plan(spec, cat).candidates}
        od, y1, y3 = (cands[f"rent/aws-p5/{t}/local-nvme"] for t in ("on_demand", "1y", "3y"))
        storage = od.rent_storage_usd_per_gpu_hour / u  # paid every clock hour, charged per useful hour
        assert od.usd_per_gpu_hour == pytest.approx(offer.usd_per_hour_on_demand / 8 + storage)
        assert y1.usd_per_gpu_hour == pytest.approx(offer.usd_per_hour_1y / 8 / u + storage)
        assert y3.usd_per_gpu_hour == pytest.approx(offer.usd_per_hour_3y / 8 / u + storage)
        assert od.capex_usd == 0 and od.capacity == "rent" and od.rental == "aws-p5" and od.term == "on_demand"
        assert od.run_cost_usd == pytest.approx(od.usd_per_gpu_hour * 128 * od.time_to_train_days * 24)
        if cat is not CAT:
            assert storage == 0
        else:
            assert storage > 0
    built = next(c for c in cands.values() if c.capacity == "build")
    at_one = {c.id: c for c in make_plan(spec_with(capacity=["build", "rent"], rentals=["aws-p5"]), CAT).candidates}
    # A built cluster is paid whether busy or not: a useful hour costs 1/u more.
    assert built.usd_per_gpu_hour == pytest.approx(at_one[built.id].usd_per_gpu_hour / u)


def test_rented_candidates_have_the_same_columns_and_their_fabric():
    plan = make_plan(spec_with(capacity=["build", "rent"]), CAT)
    rented = [c for c in plan.candidates if c.capacity == "rent"]
    assert {c.rental for c in rented} == {"aws-p5", "azure-ndv5", "gcp-a3mega", "oci-h100", "cw-h100", "market-h100"}
    by = {(c.rental, c.term): c for c in rented}
    efa, ib = by[("aws-p5", "on_demand")], by[("azure-ndv5", "on_demand")]
    assert efa.fabric == "efa-p5" and ib.fabric == "ib-ndr"
    for c in (efa, ib):
        assert c.step_time_s > 0 and c.step_time_p99_s >= c.step_time_s and 0 < c.goodput <= 1 and c.step_time_cv > 0
    # EFA's per-step latency and jitter are above InfiniBand's: never faster, more jitter.
    assert efa.step_time_s >= ib.step_time_s
    assert efa.breakdown.jitter_per_step_s > ib.breakdown.jitter_per_step_s
    assert "gives up" in plan.rationale and "only host-side artefacts" in plan.rationale
    assert "partitions" in plan.rationale and "QoS" in plan.rationale


def _cumulative_crossing(capex: float, opex_month: float, rent_month: float, horizon: int = 100_000) -> float:
    """First month m where capex + opex m <= rent m, with linear interpolation inside the month."""
    m = np.arange(horizon + 1, dtype=float)
    gap = capex + opex_month * m - rent_month * m
    k = int(np.argmax(gap <= 0))
    if gap[k] > 0:
        return math.inf
    return k - 1 + gap[k - 1] / (gap[k - 1] - gap[k])


@pytest.mark.parametrize("u", [1.0, 0.6])
def test_break_even_months_computed_both_ways_agree(u):
    spec = spec_with(capacity=["build", "rent"], rentals=["aws-p5"], utilisation=u)
    plan = make_plan(spec, CAT)
    built = next(c for c in plan.candidates if c.capacity == "build")
    for c in (c for c in plan.candidates if c.capacity == "rent"):
        assert c.build_reference == built.id
        g = 128
        price_h = CAT.rental("aws-p5").usd_per_gpu_hour(c.term) * g
        storage_h = c.rent_storage_usd_per_gpu_hour * g
        paid_h = price_h * (u if c.term == "on_demand" else 1.0) + storage_h
        # From the rent side: cumulative rent crosses cumulative build cost.
        scan = _cumulative_crossing(built.capex_usd, built.opex_usd_per_gpu_hour * g * 730, paid_h * 730)
        assert c.break_even_months == pytest.approx(scan, rel=1e-6)
        if c.term == "on_demand":
            assert c.break_even_utilisation is not None
        else:
            assert c.break_even_utilisation is None  # both sides pay every hour: utilisation cancels


def test_break_even_utilisation_gives_the_amortisation_period():
    spec = spec_with(capacity=["build", "rent"], rentals=["cw-h100"], rent_terms=["on_demand"])
    plan = make_plan(spec, CAT)
    built = next(c for c in plan.candidates if c.capacity == "build")
    od = next(c for c in plan.candidates if c.capacity == "rent")
    u_star = od.break_even_utilisation
    assert 0 < u_star < 1
    at = spec.model_copy(update={"options": spec.options.model_copy(update={"utilisation": u_star})})
    _, months = break_even(od, built, at, CAT)
    years = CAT.site.amortization_years
    assert months == pytest.approx(12 * years, rel=1e-9)
    # Below u*, renting on demand is cheaper per useful hour; above, building.
    for u, building_cheaper in ((u_star * 0.9, False), (min(1.0, u_star * 1.1), True)):
        build_h = (
            built.capex_usd / (years * cost.HOURS_PER_YEAR)
            + built.opex_usd_per_gpu_hour * 128
            - od.rent_storage_usd_per_gpu_hour * 128
        ) / u
        rent_h = CAT.rental("cw-h100").usd_per_hour_on_demand * 16
        assert (build_h < rent_h) is building_cheaper


def test_rentals_follow_the_cluster_gpu_and_refuse_a_mismatch():
    spec = spec_with(capacity=["rent"])
    assert all(d.rented for d in enumerate_designs(spec, CAT))
    a100 = Spec.model_validate(
        {
            **BASE,
            "cluster": {**BASE["cluster"], "gpu": "a100-sxm"},
            "options": {**BASE["options"], "capacity": ["build", "rent"]},
        }
    )
    with pytest.raises(InputError, match="no rental offering"):
        check_options(a100, CAT)
    with pytest.raises(InputError, match="has 8 x h100-sxm"):
        check_options(a100.model_copy(update={"options": a100.options.model_copy(update={"rentals": ["aws-p5"]})}), CAT)


def test_rented_fabrics_enter_the_collective_model_with_their_alpha_beta():
    efa = CAT.fabric("efa-p5")
    assert efa.rented_only and efa.kind == "efa"
    small = {
        f: predict_collective(
            op="all_reduce", size_bytes=8192, nodes=16, gpus_per_node=8, gpu="h100-sxm", fabric=f, catalog=CAT
        ).time_us
        for f in ("efa-p5", "ib-ndr")
    }
    big = {
        f: predict_collective(
            op="all_reduce", size_bytes=8 << 30, nodes=16, gpus_per_node=8, gpu="h100-sxm", fabric=f, catalog=CAT
        ).busbw_gbps
        for f in ("efa-p5", "ib-ndr", "tcpx-a3mega")
    }
    assert small["efa-p5"] > small["ib-ndr"]  # alpha: SRD latency above IB
    assert big["efa-p5"] < big["ib-ndr"]  # beta: 0.8 x 50 GB/s per GPU vs 0.94 x 50
    assert big["tcpx-a3mega"] < big["efa-p5"]  # 200 Gb/s per GPU
    assert efa.cite("nic_line_gbps").endswith("[D]")


def test_config_on_a_rented_design_renders_host_side_artefacts_only(cli, tmp_path):
    spec = tmp_path / "rent.yaml"
    spec.write_text("""name: rt-rent
cluster: {nodes: 2, gpus_per_node: 8, gpu: h100-sxm}
workload:
  model: {params: 8e9, layers: 32, hidden: 4096, seq_len: 8192}
  parallelism: {tp: 8, pp: 1, dp: 2, zero_stage: 1}
  global_batch_tokens: 1048576
  total_tokens: 1e11
options:
  fabrics: [ib-ndr]
  storage: [local-nvme, nvmeof-rdma]
  capacity: [rent]
  rentals: [azure-ndv5]
  rent_terms: [on_demand]
""")
    out_dir = tmp_path / "bundle"
    code, out, err = cli("config", spec, "--out", out_dir, "--seed", "t")
    assert code == 0, err
    files = {str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file()}
    assert "roles/compute/etc/gpufabric/nccl.env" in files and "roles/compute/etc/nftables.conf" in files
    # Nothing for the provider's switches, subnet manager or storage targets.
    assert not any(f.startswith(("fabric/", "hosts/")) for f in files)
    assert not any("roce-qos" in f or "/nvme" in f or "nvmet" in f for f in files)
    assert "rented design: host-side artefacts only" in out and "provider owns the switches" in out
    assert "Rented fabric" in (out_dir / "README.md").read_text()
    # The same spec built (not rented) does render the subnet manager's files.
    spec.write_text(spec.read_text().replace("capacity: [rent]", "capacity: [build]"))
    code, out, err = cli("config", spec, "--dry-run", "--seed", "t", "--format", "json")
    assert code == 0, err
    assert any(f["path"].startswith("fabric/etc/opensm/") for f in json.loads(out)["files"])


def test_inference_specs_get_rented_offerings_beside_built_ones():
    from gpufabric.plan.inference import make_serving_plan
    from gpufabric.sim.serving import simulate_serving
    from gpufabric.spec.inference import InferenceSpec

    u = 0.5
    spec = InferenceSpec.model_validate(
        {
            "name": "rt-serve",
            "cluster": {"nodes": 4, "gpu": "h100-sxm"},
            "workload": {
                "kind": "inference",
                "model": {"params": 70.6e9, "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8},
                "traffic": {
                    "rate_rps": 5,
                    "prompt_tokens": {"mean": 1024, "cv": 0.5},
                    "output_tokens": {"mean": 128, "cv": 0.5},
                },
                "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.05},
                "replica": {"tp": 8},
                "disaggregation": "none",
            },
            "options": {
                "fabrics": ["ib-ndr"],
                "storage": ["local-nvme"],
                "capacity": ["build", "rent"],
                "rentals": ["aws-p5"],
                "rent_terms": ["on_demand", "1y"],
                "utilisation": u,
            },
        }
    )
    plan = make_serving_plan(spec, CAT, simulate=simulate_serving, requests=2000)
    by = {c.id: c for c in plan.candidates}
    od, y1 = by["colocated/rent-aws-p5-on_demand/local-nvme"], by["colocated/rent-aws-p5-1y/local-nvme"]
    offer = CAT.rental("aws-p5")
    assert od.usd_per_gpu_hour == pytest.approx(offer.usd_per_hour_on_demand / 8)
    assert y1.usd_per_gpu_hour == pytest.approx(offer.usd_per_hour_1y / 8 / u)
    assert od.capacity == "rent" and by["colocated/ib-ndr/local-nvme"].capacity == "build"
    assert od.fabric == "efa-p5"
    assert od.meets_slo and "Rented: colocated/rent-aws-p5-on_demand" in plan.rationale and "gives up" in plan.rationale


def test_budget_binds_a_rented_commitment_like_capex():
    spec = Spec.model_validate(
        {
            **BASE,
            "requirements": {"budget_usd": 10e6},
            "options": {**BASE["options"], "capacity": ["build", "rent"], "rentals": ["aws-p5"]},
        }
    )
    cands = {c.id: c for c in make_plan(spec, CAT).candidates}
    od, y3 = cands["rent/aws-p5/on_demand/local-nvme"], cands["rent/aws-p5/3y/local-nvme"]
    # 3 years x 8,760 h x 128 GPUs x the 3-year price: ~$12.7M, over the $10M budget (1 year: ~$5.4M).
    assert y3.rent_commitment_usd == pytest.approx(CAT.rental("aws-p5").usd_per_hour_3y / 8 * 128 * 3 * 8760)
    assert any(v.startswith("rent_commitment_usd") for v in y3.violations) and not y3.meets_requirements
    assert cands["rent/aws-p5/1y/local-nvme"].meets_requirements
    # On demand the obligation is the run itself (a day or so here): within budget.
    assert od.rent_commitment_usd == pytest.approx(od.run_cost_usd) and od.meets_requirements


def test_the_worked_example_in_docs_is_what_the_plan_prints():
    import re

    from tests.conftest import EXAMPLES, ROOT

    doc = (ROOT / "docs" / "planner.md").read_text()
    rows = re.findall(r"^\| `([^`]+)`[^|]*\| ([\d.]+) \| \$([\d.]+)M \| ([\d.]+) \|", doc, flags=re.M)
    assert len(rows) >= 6
    spec = load_spec(EXAMPLES / "build-vs-rent-70b.yaml", known_ids=CAT.known_ids()).spec
    plan = make_plan(spec, CAT)
    by = {c.id: c for c in plan.candidates}
    for cid, per_h, run_m, days in rows:
        c = by[cid]
        assert f"{c.usd_per_gpu_hour:.2f}" == per_h, cid
        assert f"{c.run_cost_usd / 1e6:.2f}" == run_m, cid
        assert f"{c.time_to_train_days:.1f}" == days, cid
    assert f"(the recommendation is `{plan.recommended}`)" in doc
    # Every price in the example's table names its source in the catalog.
    for rid in {c.rental for c in plan.candidates if c.rental}:
        assert f"`{rid}`" in doc
