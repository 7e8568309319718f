"""Shared storage is sized by the bandwidth the data loader needs, as well as by capacity and checkpoints."""

from __future__ import annotations

import numpy as np

from gpufabric.catalog import load_catalog
from gpufabric.plan.evaluate import evaluate_table
from gpufabric.plan.table import Design, build_table
from gpufabric.spec import load_spec
from gpufabric.spec.models import Spec
from tests.conftest import EXAMPLES

CAT = load_catalog()


def test_units_cover_the_loaders_read_bandwidth():
    spec = load_spec(EXAMPLES / "roce-256gpu-8b.yaml").spec
    data = spec.model_dump()
    # Image- or video-like data: 20 kB per token, random reads.
    data["workload"]["dataset"].update(bytes_per_token=20000, pattern="random")
    heavy = Spec.model_validate(data)
    designs = [
        Design(fabric="roce-400g", topology="rail-optimized", oversubscription=1.0, storage=s)
        for s in ("nvmeof-rdma", "nfs", "pfs")
    ]
    light = evaluate_table(build_table(spec, CAT, designs, compute_efficiency=0.5))
    out = evaluate_table(build_table(heavy, CAT, designs, compute_efficiency=0.5))
    unit_r = np.array([CAT.storage_backend(d.storage).unit_read_gbps for d in designs])
    assert (out.storage_units >= np.ceil(out.dataset_read_gbps_needed / unit_r) - 1e-9).all()
    assert (out.storage_units > light.storage_units).all()
    assert (out.storage_capex_usd > light.storage_capex_usd).all()
