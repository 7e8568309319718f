"""Catalog: shipped data complete and sourced; overrides merge; errors are located."""

from __future__ import annotations

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.errors import CatalogError, SpecError

IDS = {
    "gpus": {"a100-sxm", "h100-sxm", "h200", "b200", "l40s"},
    "fabrics": {
        "ib-hdr",
        "ib-ndr",
        "ib-xdr",
        "roce-100g",
        "roce-200g",
        "roce-400g",
        "roce-800g",
        "tcp-25g",
        "tcp-100g",
        "tcp-200g",
        "tcp-400g",
    },
    "storage": {"local-nvme", "nvmeof-rdma", "nvmeof-tcp", "nfs", "iscsi", "pfs"},
}


def test_shipped_ids_and_kinds():
    cat = load_catalog()
    for section, ids in IDS.items():
        assert ids <= set(getattr(cat, section))
    for fid, fab in cat.fabrics.items():
        assert fab.kind == fid.split("-")[0]


def test_every_figure_has_source_and_as_of():
    cat = load_catalog()
    entries = [
        *cat.gpus.values(),
        *cat.fabrics.values(),
        *cat.switches.values(),
        *cat.optics.values(),
        *cat.storage.values(),
        cat.site,
        *cat.rentals.values(),
    ]
    for entry in entries:
        for key in type(entry).model_fields:
            value = getattr(entry, key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                prov = entry.provenance[key]
                assert prov.source and prov.as_of and prov.tag in "VSUD", (entry.name, key)


def test_published_figures_are_tagged_verified():
    cat = load_catalog()
    assert cat.fabrics["ib-ndr"].provenance["rdma_write_lat_us"].tag == "V"
    assert "#290" in cat.fabrics["ib-ndr"].provenance["nic_efficiency"].source
    assert cat.storage["local-nvme"].client_write_gbps == 33.8


def test_override_changes_only_named_fields(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("fabrics:\n  ib-ndr:\n    nic_efficiency: 0.8\n")
    cat = load_catalog([f])
    fab = cat.fabrics["ib-ndr"]
    assert fab.nic_efficiency == 0.8
    assert fab.provenance["nic_efficiency"].tag == "user" and fab.provenance["nic_efficiency"].source == str(f)
    assert fab.nic_line_gbps == 50 and fab.provenance["nic_line_gbps"].tag == "V"
    assert load_catalog().fabrics["ib-ndr"].nic_efficiency == 0.94


def test_new_id_is_added(tmp_path):
    f = tmp_path / "mine.yaml"
    base = (
        load_catalog()
        .storage["nfs"]
        .model_dump(exclude={"provenance", "name", "source", "as_of", "tag", "commit_latency_ms"})
    )
    body = "\n".join(f"    {k}: {v}" for k, v in base.items())
    f.write_text(f"storage:\n  my-nfs:\n{body}\n    commit_latency_ms: 5\n")
    cat = load_catalog([f])
    assert cat.storage["my-nfs"].commit_latency_ms == 5


def test_incomplete_new_entry_is_located(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("gpus:\n  x100:\n    tdp_w: 500\n")
    with pytest.raises(SpecError) as info:
        load_catalog([f])
    assert info.value.file == str(f) and info.value.line == 2
    assert "required field is missing" in str(info.value)


def test_unknown_field_has_did_you_mean(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("fabrics:\n  ib-ndr:\n    nic_efficency: 0.9\n")
    with pytest.raises(
        SpecError, match=r"mine.yaml:3:5: fabrics.ib-ndr.nic_efficency: unknown field .*did you mean 'nic_efficiency'"
    ):
        load_catalog([f])


def test_bad_value_and_section(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("fabrics:\n  ib-ndr:\n    nic_efficiency: 2\n")
    with pytest.raises(SpecError, match=r":3:5: .*less than or equal to 1"):
        load_catalog([f])
    f.write_text("fabric:\n  ib-ndr: {}\n")
    with pytest.raises(SpecError, match=r"unknown catalog section 'fabric'.*did you mean 'fabrics'"):
        load_catalog([f])


def test_unknown_reference(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("fabrics:\n  ib-ndr:\n    switch: qm9800\n")
    with pytest.raises(SpecError, match=r"unknown switches id 'qm9800'.*did you mean 'qm9700'"):
        load_catalog([f])


def test_unknown_id_lookup():
    with pytest.raises(CatalogError, match="unknown GPU id 'h100'.*did you mean"):
        load_catalog().gpu("h100")


def test_rentals_every_price_is_sourced_and_unconfirmed_ones_say_so():
    cat = load_catalog()
    assert {"aws-p5", "azure-ndv5", "gcp-a3mega", "oci-h100", "cw-h100"} <= set(cat.rentals)
    for rid, r in cat.rentals.items():
        assert r.gpu in cat.gpus and r.fabric in cat.fabrics and set(r.storage) <= set(cat.storage)
        assert r.usd_per_hour_3y < r.usd_per_hour_1y < r.usd_per_hour_on_demand
        for key in ("usd_per_hour_on_demand", "usd_per_hour_1y", "usd_per_hour_3y"):
            prov = r.provenance[key]
            # An estimate says why; a read figure names where it was read.
            assert prov.tag in "SUVD" and prov.source and prov.as_of, (rid, key)
            if prov.tag == "U":
                assert any(w in prov.source for w in ("unconfirmed", "estimate", "placeholder")), (rid, key)
    assert cat.rentals["aws-p5"].provenance["usd_per_hour_on_demand"].tag == "S"
    assert cat.rentals["aws-p5"].usd_per_gpu_hour("on_demand") == pytest.approx(55.04 / 8)
    # Providers' fabrics are rented only; SHARP is a capability of the InfiniBand entries, priced.
    assert cat.fabrics["efa-p5"].rented_only and not cat.fabrics["ib-ndr"].rented_only
    assert cat.fabrics["ib-ndr"].in_network_reduction and not cat.fabrics["roce-400g"].in_network_reduction
    assert cat.fabrics["ib-ndr"].provenance["sharp_usd_per_node"].tag == "U"


def test_rental_override_merges_and_a_new_offering_is_checked(tmp_path):
    f = tmp_path / "quote.yaml"
    f.write_text("rentals:\n  aws-p5:\n    usd_per_hour_3y: 25.0\n")
    r = load_catalog([f]).rentals["aws-p5"]
    assert r.usd_per_hour_3y == 25.0 and r.provenance["usd_per_hour_3y"].tag == "user"
    assert r.usd_per_hour_on_demand == 55.04 and r.provenance["usd_per_hour_on_demand"].tag == "S"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "rentals:\n  mine:\n    provider: me\n    instance_type: x\n    gpu: h100-sxm\n    gpus: 8\n"
        "    fabric: efa-p6\n    fabric_gbps: 3200\n    local_nvme_tb: 0\n    storage: [local-nvme]\n"
        "    storage_usd_per_tb_month: 0\n    usd_per_hour_on_demand: 9\n    usd_per_hour_1y: 8\n"
        "    usd_per_hour_3y: 7\n"
    )
    with pytest.raises(SpecError, match="unknown fabrics id 'efa-p6'") as err:
        load_catalog([bad])
    assert err.value.line == 7 and "efa-p5" in str(err.value)


def test_shipped_catalog_cache_round_trips_and_falls_back(tmp_path, monkeypatch):
    """issue 32: the shipped catalog is validated once per content and read back from the
    user's cache; a corrupt, foreign-writable or missing cache validates afresh."""
    import os

    from gpufabric.catalog import loader

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    validated = loader._build(list(loader._shipped()), n_shipped=len(loader.DATA_FILES))
    loader._load_shipped.cache_clear()
    try:
        first = loader._load_shipped()  # a miss: validates and writes
        (path,) = (tmp_path / "gpufabric").glob("catalog-*.pickle")
        assert first == validated and oct(path.stat().st_mode & 0o777) == "0o600"
        assert loader._cache_read(path) == validated  # a hit: the same catalog
        os.chmod(path, 0o666)  # writable by others: not trusted
        assert loader._cache_read(path) is None
        os.chmod(path, 0o600)
        path.write_bytes(b"not a pickle")
        assert loader._cache_read(path) is None
        loader._load_shipped.cache_clear()
        assert loader._load_shipped() == validated  # validated again, and the cache rewritten
        assert loader._cache_read(path) == validated
    finally:
        loader._load_shipped.cache_clear()
