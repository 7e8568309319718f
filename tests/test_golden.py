"""Golden files pin the observable output: plan JSON/markdown of every shipped example, a
seeded config bundle, and the structure of an HTML report. Update: `pytest --update-golden`
(tests/golden/README.md says how to review it)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.conftest import DATA, EXAMPLES
from tests.goldens import check, html_structure, mask_version, normalise_json, reset_dir

PLAN_SPECS = sorted([*EXAMPLES.glob("*.yaml"), *EXAMPLES.glob("serving/*.yaml")])


def _slug(spec: Path) -> str:
    return spec.relative_to(EXAMPLES).with_suffix("").as_posix().replace("/", "--")


def test_every_example_is_pinned():
    # A new example gets a golden too (collected by glob; this guards against an empty glob).
    assert {_slug(s) for s in PLAN_SPECS} >= {"llama3-70b-1k", "lab-2node", "serving--llama3-70b-serving"}


@pytest.mark.parametrize("spec", PLAN_SPECS, ids=_slug)
def test_plan_json(cli, request, spec):
    code, out, err = cli("plan", spec, "--format", "json")
    assert code == 0, err
    check(request, f"plan/{_slug(spec)}.json", normalise_json(out))


@pytest.mark.parametrize("spec", PLAN_SPECS, ids=_slug)
def test_plan_markdown(cli, request, spec):
    code, out, err = cli("plan", spec, "--format", "markdown")
    assert code == 0, err
    check(request, f"plan/{_slug(spec)}.md", mask_version(out))


BUNDLE = "config/lab-2node-seed-golden"


def test_seeded_config_bundle(cli, request, tmp_path):
    """`config --seed golden`: the file list, every mode and every file's content. The seed
    makes the secrets deterministic, so they are pinned too (they are test-only keys)."""
    out_dir = tmp_path / "bundle"
    code, out, err = cli("config", EXAMPLES / "lab-2node.yaml", "--seed", "golden", "--out", out_dir)
    assert code == 0, err
    files = sorted(p for p in out_dir.rglob("*") if p.is_file())
    modes = {p.relative_to(out_dir).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in files}
    manifest = json.loads((out_dir / "manifest.json").read_text())
    secret = {f["path"] for f in manifest["files"] if f["secret"]}
    assert secret, "the NVMe-oF bundle carries DH-HMAC-CHAP secrets"
    assert {p for p, m in modes.items() if m == 0o600} == secret  # every secret and only secrets are 0600
    assert set(modes) == {f["path"] for f in manifest["files"]} | {"manifest.json"}
    reset_dir(request, BUNDLE)
    listing = "".join(f"{m:04o} {p}{'  (secret)' if p in secret else ''}\n" for p, m in modes.items())
    check(request, f"{BUNDLE}/FILES.txt", listing)
    for path in files:
        rel = path.relative_to(out_dir).as_posix()
        text = path.read_text()
        check(request, f"{BUNDLE}/tree/{rel}", normalise_json(text) if rel.endswith(".json") else mask_version(text))


# One run from real tool outputs in tests/data: a message-size sweep (busbw chart), fio
# latency percentiles, a sockperf full log (latency CDF) and an iperf3 stream.
REPORT_INPUTS = (
    "nccl-tests/all_reduce_8gpu.txt",
    "fio/psync_write_fsync.jsonplus.json",
    "sockperf/pingpong_udp_mps2000_fulllog.txt",
    "iperf3/loopback_P2.json",
)


def test_html_report_structure(cli, request, tmp_path):
    """Section headings, chart titles and table headers of the HTML report (not SVG bytes)."""
    db = tmp_path / "r.db"
    code, out, err = cli("ingest", "--tool", "auto", *[DATA / f for f in REPORT_INPUTS], "--host", "golden", "--db", db)
    assert code == 0, err
    html = tmp_path / "report.html"
    code, out, err = cli("report", "latest", "--format", "html", "--db", db, "--out", html)
    assert code == 0, err
    check(request, "report/ingested-run.structure.txt", html_structure(html.read_text()))
