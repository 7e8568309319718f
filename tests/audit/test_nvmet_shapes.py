"""A bundle's nvmetcli JSON that is not nvmetcli's shape (not JSON, nested beyond the bound,
a subsystem that is not an object) is an NVMF-01 finding, failing closed: before issue 24 it
was skipped (or a traceback), and the audit passed a config nvmetcli may still restore."""

from __future__ import annotations

import json

import pytest

from gpufabric.audit.collect import from_directory
from gpufabric.audit.runner import audit
from tests.audit.conftest import bundle_copy, clean_bundle  # noqa: F401  (fixtures)

NVMET = "hosts/storage-1/etc/nvmet/config.json"


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda d: "{not json", "not JSON"),
        (lambda d: json.dumps({**d, "junk": json.loads("[" * 300 + "]" * 300)}), "nests deeper than 128"),
        (lambda d: json.dumps({**d, "subsystems": [1]}), "subsystems is not a list of objects"),
        (lambda d: json.dumps({**d, "subsystems": [{**d["subsystems"][0], "attr": "x"}]}), "attr is not an object"),
        (lambda d: json.dumps({**d, "subsystems": [{**d["subsystems"][0], "allowed_hosts": "*"}]}), "not a list"),
    ],
)
def test_unreadable_nvmet_json_fails_closed(bundle_copy, mutate, words):  # noqa: F811
    path = bundle_copy / NVMET
    path.write_text(mutate(json.loads(path.read_text())))
    report = audit(from_directory(bundle_copy))
    found = [f for f in report.findings if f.check_id == "NVMF-01"]
    assert len(found) == 1 and words in found[0].evidence and found[0].severity.value == "high", found
    assert "storage-1" in found[0].subject


def test_clean_nvmet_json_passes(clean_bundle):  # noqa: F811
    assert "NVMF-01" in audit(from_directory(clean_bundle)).passed
