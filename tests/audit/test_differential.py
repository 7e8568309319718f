"""Differential test (issue 12): generated administrator-style rulesets through the static
proof and the kernel (real packets in namespaces). Zero probes where the static proof says
accept or drop and the kernel disagrees; the proof's merged cells agree with the per-address
static verdicts. CI runs a fixed seeded sample; ``make differential`` runs hundreds
(GPUFABRIC_DIFFERENTIAL_N)."""

from __future__ import annotations

import os
from collections import Counter

from gpufabric.audit import kernel, nft, nftinclude
from gpufabric.audit.collect import nft_text_to_json, read_file
from gpufabric.audit.reachability import cell_at, prove
from tests.audit.rulegen import Gen, policy
from tests.conftest import needs_root, needs_tool

#: CI sample size and first seed; make differential sets N to a few hundred.
COUNT = int(os.environ.get("GPUFABRIC_DIFFERENTIAL_N", "30"))
FIRST_SEED = int(os.environ.get("GPUFABRIC_DIFFERENTIAL_SEED", "1200"))
#: Construct families of issue 24 and a text that marks each in a generated ruleset.
FAMILIES = {
    "set statement": ("@flood {",),
    "negated meta": ("oifname != ", "oif != ", "iifname != ", "mark != ", "oifgroup != "),
    "jump depth": ("table inet deepjmp",),
    "base chains by priority": ("table ip multiprio",),
    "netdev egress": ("hook egress",),
}


@needs_root
@needs_tool("nft")
@needs_tool("ip")
def test_static_proof_agrees_with_the_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFABRIC_KERNEL_PREFIX", "fwd")
    pol = policy()
    ifaces = tuple(p.interface for p in pol.planes)
    tally: Counter = Counter()
    styles: Counter = Counter()
    families: Counter = Counter()
    wrong = []
    for seed in range(FIRST_SEED, FIRST_SEED + COUNT):
        style, text, included = Gen(seed, pol).ruleset()
        styles[style] += 1
        path = tmp_path / f"r{seed}.nft"
        incdir = tmp_path / f"inc{seed}"
        text = text.replace("@INCDIR@", str(incdir))
        path.write_text(text)
        files = {"/etc/nftables.conf": path}
        for rel, body in included.items():
            local = incdir / rel
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(body.replace("@INCDIR@", str(incdir)))
            files[str(local)] = local  # absolute names: the kernel's nft reads the same files
        if included:
            families["include"] += 1
        # the static side resolves includes itself (audit.nftinclude); the kernel side is
        # the real nft reading the original file
        flat = tmp_path / f"r{seed}.flat.nft"
        flat.write_text(nftinclude.flatten("/etc/nftables.conf", files, read_file))
        for family, markers in FAMILIES.items():
            families[family] += any(m in text for m in markers)
        doc, error = nft_text_to_json(flat, ifaces)
        assert doc is not None, f"seed {seed} ({style}): generator wrote a ruleset nft rejects: {error}\n{text}"
        proof = prove(pol, {"srv-1": nft.parse(doc)})
        check = kernel.check_role(pol, proof, "srv", path, tag=f"x{seed % 1000}")
        for p in check.probes:
            tally[(p.static, p.kernel)] += 1
            if not p.agrees:
                wrong.append((seed, style, p))
            cell = cell_at(proof, p.src, "srv", p.plane, p.proto, p.port)
            assert cell is not None
            if cell.allowed in ("all", "none") and p.static != ("accept" if cell.allowed == "all" else "drop"):
                wrong.append((seed, style, "cell", cell, p))
            if cell.allowed == "unknown" and p.src != "(other)":
                assert p.static != "accept" or cell.reason  # an unknown cell always names its rule
    print(f"differential: {COUNT} rulesets {dict(styles)}; families {dict(families)}; probes {dict(tally)}")
    assert wrong == [], wrong[:5]
    decided = sum(n for (static, _k), n in tally.items() if static != "unknown")
    assert tally[("accept", "accept")] > 0 and tally[("drop", "drop")] > 0
    assert decided > 0.8 * sum(tally.values())  # the proof decides the bulk, not a wall of unknowns
    assert len(styles) == 6 or COUNT < 20
    assert all(families[f] for f in (*FAMILIES, "include")) or COUNT < 30  # every construct family ran
