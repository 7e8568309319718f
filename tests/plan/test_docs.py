"""docs/spec.md documents every spec field and every candidate key."""

from __future__ import annotations

import dataclasses

from gpufabric.plan.evaluate import Candidate
from tests.conftest import ROOT

SPEC_DOC = (ROOT / "docs" / "spec.md").read_text()


def test_every_candidate_key_documented():
    for f in dataclasses.fields(Candidate):
        assert f"`{f.name}`" in SPEC_DOC, f.name


def test_every_spec_field_documented():
    from gpufabric.spec.models import Options, Requirements, Workload

    for model, prefix in ((Workload, "workload."), (Requirements, "requirements."), (Options, "options.")):
        for name in model.model_fields:
            if name in ("model", "parallelism", "checkpoint", "dataset"):
                continue
            assert f"`{prefix}{name}`" in SPEC_DOC, prefix + name
