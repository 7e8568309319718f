"""Issue 24, bar 2: the three administrator edits that passed ``audit --reachability`` with
exit 0 (``oifname !=`` on input, a set statement with a limit, a glob include resolved
against the auditing machine's /etc) now fail the audit or come out not proven, and
includes resolve inside the bundle (``/etc/...`` of a role is ``roles/<role>/etc/...``)."""

from __future__ import annotations

import json
import shutil

import pytest

from gpufabric.audit.collect import from_directory
from gpufabric.audit.runner import audit
from gpufabric.cli.app import main
from tests.audit.conftest import bundle_copy, clean_bundle  # noqa: F401  (fixtures)

pytestmark = pytest.mark.skipif(
    shutil.which("nft") is None or shutil.which("unshare") is None or shutil.which("ip") is None,
    reason="nft/unshare/ip not installed",
)

HOOK = "\t\ticmp type { echo-request, destination-unreachable, time-exceeded, parameter-problem } accept\n"


def _edit(bundle, role: str, add: str, head: str = "") -> None:
    conf = bundle / "roles" / role / "etc" / "nftables.conf"
    text = conf.read_text()
    assert text.count(HOOK) == 1
    conf.write_text(head + text.replace(HOOK, HOOK + add))
    (bundle / "roles" / role / "etc" / "gpufabric" / "nftables.json").unlink()  # the text is the truth here


def _cells(report, dst: str, port: int):
    assert report.proof is not None
    return [c for c in report.proof.cells if c.dst == dst and c.proto == "tcp" and c.port_lo <= port <= c.port_hi]


def _exit(bundle) -> int:
    return main(["audit", "--config", str(bundle), "--reachability", "--format", "json"])


def test_oifname_not_lo_opens_the_port_on_input(bundle_copy, capsys):  # noqa: F811
    _edit(bundle_copy, "storage", '\t\toifname != "lo" tcp dport 9200 accept\n')
    report = audit(from_directory(bundle_copy), reachability=True)
    cells = _cells(report, "storage", 9200)
    assert cells and all(c.allowed == "all" and c.verdict == "beyond-intent" for c in cells)
    assert _exit(bundle_copy) == 1


def test_set_statement_with_a_limit_is_not_proven(bundle_copy, capsys):  # noqa: F811
    _edit(
        bundle_copy,
        "storage",
        "\t\tupdate @flood { ip saddr limit rate over 10/second } drop\n\t\ttcp dport 9200 accept\n",
    )
    conf = bundle_copy / "roles" / "storage" / "etc" / "nftables.conf"
    conf.write_text(
        conf.read_text().replace("\tchain input {", "\tset flood { type ipv4_addr; flags dynamic; }\n\tchain input {")
    )
    report = audit(from_directory(bundle_copy), reachability=True)
    # 9200 is open while the source stays under the rate: never "isolated", never "open"
    cells = _cells(report, "storage", 9200)
    assert cells and all(c.allowed == "unknown" and "limit" in c.reason for c in cells)
    assert _exit(bundle_copy) == 1


def test_glob_include_resolves_inside_the_bundle(bundle_copy, capsys):  # noqa: F811
    extra = bundle_copy / "roles" / "storage" / "etc" / "nftables.d"
    extra.mkdir()
    (extra / "50-search.nft").write_text("add rule inet gpufabric in_stor tcp dport 9200 accept\n")
    (extra / ".hidden.nft").write_text("add rule inet gpufabric in_stor tcp dport 9300 accept\n")
    conf = bundle_copy / "roles" / "storage" / "etc" / "nftables.conf"
    conf.write_text(conf.read_text() + 'include "/etc/nftables.d/*.nft"\n')
    (bundle_copy / "roles" / "storage" / "etc" / "gpufabric" / "nftables.json").unlink()
    report = audit(from_directory(bundle_copy), reachability=True)
    open_cells = [c for c in _cells(report, "storage", 9200) if c.plane == "stor"]
    assert open_cells and all(c.allowed == "all" and c.verdict == "beyond-intent" for c in open_cells)
    assert all(c.allowed == "none" for c in _cells(report, "storage", 9300))  # glob(3) skips dotfiles
    assert _exit(bundle_copy) == 1


@pytest.mark.parametrize(
    "include",
    ['include "/etc/nftables.d/*.nft"', 'include "/etc/missing.nft"', 'include "./local.nft"'],
)
def test_include_the_audit_cannot_see_is_fw08(bundle_copy, capsys, include):  # noqa: F811
    conf = bundle_copy / "roles" / "storage" / "etc" / "nftables.conf"
    conf.write_text(conf.read_text() + include + "\n")
    (bundle_copy / "roles" / "storage" / "etc" / "gpufabric" / "nftables.json").unlink()
    report = audit(from_directory(bundle_copy), reachability=True)
    fw08 = [f for f in report.findings if f.check_id == "FW-08"]
    assert fw08 and all("include" in f.evidence for f in fw08)
    assert _exit(bundle_copy) == 1


def test_include_nesting_and_cycles_are_bounded(bundle_copy, capsys):  # noqa: F811
    etc = bundle_copy / "roles" / "storage" / "etc"
    (etc / "loop.nft").write_text('include "loop.nft"\n')  # bare name: nft's include dir /etc
    conf = etc / "nftables.conf"
    conf.write_text(conf.read_text() + 'include "/etc/loop.nft"\n')
    (etc / "gpufabric" / "nftables.json").unlink()
    report = audit(from_directory(bundle_copy), reachability=True)
    assert any(f.check_id == "FW-08" and "deeper than 16" in f.evidence for f in report.findings)


def test_an_include_resolves_per_host(bundle_copy, capsys):  # noqa: F811
    # hosts/<host>/etc/... holds each host's own files: one storage host opens 9200, the other not
    for host, body in (
        ("storage-1", "add rule inet gpufabric in_stor tcp dport 9200 accept\n"),
        ("storage-2", "# none\n"),
    ):
        d = bundle_copy / "hosts" / host / "etc" / "nftables.d"
        d.mkdir(parents=True)
        (d / "50-local.nft").write_text(body)
    conf = bundle_copy / "roles" / "storage" / "etc" / "nftables.conf"
    conf.write_text(conf.read_text() + 'include "/etc/nftables.d/*.nft"\n')
    (bundle_copy / "roles" / "storage" / "etc" / "gpufabric" / "nftables.json").unlink()
    report = audit(from_directory(bundle_copy), reachability=True)
    cells = [c for c in _cells(report, "storage", 9200) if c.plane == "stor"]
    assert cells and all(c.allowed == "partial" and c.verdict == "beyond-intent" for c in cells)
    assert report.proof is not None and report.proof.rulesets_evaluated >= 2


@pytest.mark.parametrize("doc", ['{"nftables": 5}', '{"nftables": [{"chain": {"family": 1}}]}', "[1, 2"])
def test_an_unreadable_json_ruleset_is_fw08_not_a_pass(bundle_copy, capsys, doc):  # noqa: F811
    etc = bundle_copy / "roles" / "storage" / "etc"
    (etc / "nftables.conf").unlink()
    (etc / "gpufabric" / "nftables.json").write_text(doc)
    report = audit(from_directory(bundle_copy), reachability=True)
    assert any(f.check_id == "FW-08" and "nftables.json unreadable" in f.evidence for f in report.findings)
    assert _exit(bundle_copy) == 1


def test_a_policy_document_of_the_wrong_shape_is_not_a_traceback(bundle_copy, capsys):  # noqa: F811
    doc = json.loads((bundle_copy / "policy.json").read_text())
    (bundle_copy / "policy.json").write_text(json.dumps({**doc, "design": 3}))
    assert _exit(bundle_copy) in (0, 1)
    (bundle_copy / "policy.json").write_text("[]")
    assert _exit(bundle_copy) == 2
    assert "not a JSON object" in capsys.readouterr().err
