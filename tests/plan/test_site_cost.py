"""Site cost inputs: overrides of the catalog's site entry and the total cost of ownership."""

from __future__ import annotations

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.plan import evaluate_candidates
from gpufabric.spec import load_spec
from gpufabric.spec.models import Spec
from tests.conftest import EXAMPLES

CAT = load_catalog()
SPEC = load_spec(EXAMPLES / "llama3-70b-1k.yaml").spec


def _site(**site) -> Spec:
    data = SPEC.model_dump()
    data["site"] = site
    return Spec.model_validate(data)


def test_tco_adds_facility_staff_and_networks():
    base = evaluate_candidates(SPEC, CAT)[0]
    tco = evaluate_candidates(_site(tco=True), CAT)[0]
    s = CAT.site
    nodes, gpus = SPEC.cluster.nodes, SPEC.num_gpus
    networks = nodes * (s.frontend_network_usd_per_node + s.storage_network_usd_per_node)
    assert tco.capex_usd == pytest.approx(base.capex_usd + networks)
    extra = (
        s.facility_usd_per_mw * base.power_kw / 1e3 / (s.facility_years * 8760)
        + s.staff_usd_per_gpu_year * gpus / 8760
        + networks / (s.amortization_years * 8760)
    ) / gpus
    assert tco.usd_per_gpu_hour == pytest.approx(base.usd_per_gpu_hour + extra)
    assert tco.run_cost_usd > base.run_cost_usd


def test_site_overrides_the_catalog():
    base = evaluate_candidates(SPEC, CAT)[0]
    dear = evaluate_candidates(_site(usd_per_kwh=2 * CAT.site.usd_per_kwh), CAT)[0]
    energy = base.power_kw * CAT.site.pue * CAT.site.usd_per_kwh / SPEC.num_gpus
    assert dear.usd_per_gpu_hour == pytest.approx(base.usd_per_gpu_hour + energy)
    # Without tco, a given TCO figure still counts (the user asked for it); others stay 0.
    staff = evaluate_candidates(_site(staff_usd_per_gpu_year=876), CAT)[0]
    assert staff.usd_per_gpu_hour == pytest.approx(base.usd_per_gpu_hour + 0.1)
    assert staff.capex_usd == base.capex_usd
