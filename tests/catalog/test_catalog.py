"""Catalog: shipped data complete and sourced; overrides merge; errors are located."""

from __future__ import annotations

import pytest

from gpufabric.catalog import load_catalog
from gpufabric.errors import CatalogError, SpecError

IDS = {
    "gpus": {"a100-sxm", "h100-sxm", "h200", "b200", "l40s"},
    "fabrics": {"ib-hdr", "ib-ndr", "ib-xdr", "roce-100g", "roce-200g", "roce-400g", "roce-800g",
                "tcp-25g", "tcp-100g", "tcp-200g", "tcp-400g"},
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
    entries = [*cat.gpus.values(), *cat.fabrics.values(), *cat.switches.values(), *cat.optics.values(),
               *cat.storage.values(), cat.site]
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
    base = load_catalog().storage["nfs"].model_dump(exclude={"provenance", "name", "source", "as_of", "tag", "commit_latency_ms"})
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
    with pytest.raises(SpecError, match=r"mine.yaml:3:5: fabrics.ib-ndr.nic_efficency: unknown field .*did you mean 'nic_efficiency'"):
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
