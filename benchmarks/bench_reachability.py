"""Benchmark: reachability proof for 1,000 hosts in 10 roles on 4 planes, 20 ports per plane.

Target: under 5 s. The rulesets are the ones `gpufabric config` renders
(nft -j JSON form), one per host as a collector would gather them; hosts with identical
rulesets are evaluated once. Modes:

- shared: the collector hashes each host's JSON text and parses each distinct text once;
- per-host: every host's JSON is parsed on its own (1,000 parses); the proof still
  evaluates equal contents once (content fingerprint);
- unique: worst case, every host's ruleset differs (one extra host-specific rule each,
  which the intent does not allow), so nothing is shared: 1,000 rulesets evaluated.

Kernel mode (``--kernel``, root; target: under 30 s for one role): role r1's rendered
nftables.conf is loaded into a namespace with the 4 planes' interfaces and every cell of
the proof with r1 as destination is probed with real packets (audit.kernel.check_role).

Run: .venv/bin/python benchmarks/bench_reachability.py [--repeat 3] [--worst-case] [--kernel]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import time

from gpufabric.audit import nft
from gpufabric.audit.reachability import prove
from gpufabric.configure import nftables
from gpufabric.spec.security import Flow, Plane, Role, SecurityPolicy

KINDS = ["compute", "compute", "compute", "compute", "storage", "storage", "login", "scheduler", "compute", "storage"]


def build_policy(hosts: int = 1000, roles: int = 10, planes: int = 4, ports_per_plane: int = 20) -> SecurityPolicy:
    rng = random.Random(6)
    plane_kinds = ["management", "control", "compute-data", "storage"]
    plane_list = [
        Plane(name=f"p{i}", kind=plane_kinds[i % 4], cidr=f"10.{50 + i}.0.0/16", interface=f"pl{i}")
        for i in range(planes)
    ]
    per_role = hosts // roles
    role_list = [
        Role(name=f"r{i}", kind=KINDS[i % len(KINDS)], count=per_role, planes=[p.name for p in plane_list])
        for i in range(roles)
    ]
    flows = []
    for plane in plane_list:
        ports = rng.sample(range(1024, 60000), ports_per_plane)
        for port in ports:
            src, dst = rng.sample(range(roles), 2)
            flows.append(
                Flow(
                    src=f"r{src}",
                    dst=f"r{dst}",
                    plane=plane.name,
                    proto=rng.choice(["tcp", "udp"]),
                    ports=[port],
                    purpose="bench",
                )
            )
        # one range per plane, as real policies have (srun, ephemeral)
        flows.append(Flow(src="r0", dst="r1", plane=plane.name, proto="tcp", ports=["40000-40999"], purpose="range"))
    return SecurityPolicy(planes=plane_list, roles=role_list, flows=flows)


def collected_rulesets(policy: SecurityPolicy) -> dict[str, str]:
    """host -> nft -j JSON text, as gathered from each host."""
    per_role = {r.name: json.dumps(nftables.render_json(nftables.role_ruleset(policy, r.name))) for r in policy.roles}
    return {host: per_role[role] for host, role in policy.hosts()}


def unique_rulesets(texts: dict[str, str]) -> dict[str, str]:
    """Give every host one extra, host-specific accept rule (a per-host exporter port)."""
    out = {}
    for i, (host, text) in enumerate(texts.items()):
        doc = json.loads(text)
        doc["nftables"].append(
            {
                "rule": {
                    "family": "inet",
                    "table": "gpufabric",
                    "chain": "in_p0",
                    "expr": [
                        {
                            "match": {
                                "op": "==",
                                "left": {"payload": {"protocol": "tcp", "field": "dport"}},
                                "right": 61000 + i % 4000,
                            }
                        },
                        {"accept": None},
                    ],
                }
            }
        )
        out[host] = json.dumps(doc)
    return out


def run(policy: SecurityPolicy, texts: dict[str, str], dedup: bool) -> tuple[float, object]:
    start = time.perf_counter()
    parsed: dict[str, nft.Ruleset] = {}
    by_hash: dict[str, nft.Ruleset] = {}
    for host, text in texts.items():
        if dedup:
            digest = hashlib.sha256(text.encode()).hexdigest()
            if digest not in by_hash:
                by_hash[digest] = nft.parse(json.loads(text))
            parsed[host] = by_hash[digest]
        else:
            parsed[host] = nft.parse(json.loads(text))
    proof = prove(policy, parsed)
    return time.perf_counter() - start, proof


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--worst-case", action="store_true", help="also run the 'unique' mode (slow: ~40 s)")
    parser.add_argument("--kernel", action="store_true", help="also time the kernel cross-check of one role (root)")
    args = parser.parse_args()
    policy = build_policy(hosts=args.hosts)
    texts = collected_rulesets(policy)
    ports = {(f.plane, lo) for f in policy.flows for lo, _ in f.port_ranges()}
    print(
        f"hosts {len(texts)}, roles {len(policy.roles)}, planes {len(policy.planes)}, "
        f"flows {len(policy.flows)}, distinct (plane, port) {len(ports)}"
    )
    unique = unique_rulesets(texts)
    for mode in ("shared", "per-host", "unique") if args.worst_case else ("shared", "per-host"):
        times = []
        proof = None
        for _ in range(args.repeat if mode != "unique" else 1):
            seconds, proof = run(policy, unique if mode == "unique" else texts, dedup=mode == "shared")
            times.append(seconds)
        assert proof is not None
        if mode != "unique":
            assert not proof.violations(), "the rendered rulesets must equal the intent"
        print(
            f"{mode:9s} median {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f});"
            f" {proof.cells_evaluated} cells, {proof.evaluations} chain evaluations,"
            f" {proof.rulesets_evaluated} rulesets evaluated, {len(proof.violations())} violations"
        )

    if args.kernel:
        kernel_mode(policy, texts)


def kernel_mode(policy: SecurityPolicy, texts: dict[str, str]) -> None:
    import tempfile
    from pathlib import Path

    from gpufabric.audit import kernel
    from gpufabric.configure.bundle import template_env

    role = "r1"
    parsed = {host: nft.parse(json.loads(text)) for host, text in texts.items()}
    proof = prove(policy, parsed)
    text = nftables.render_text(
        nftables.role_ruleset(policy, role), env=template_env(), version="bench", spec_name="bench"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nftables.conf"
        path.write_text(text)
        start = time.perf_counter()
        check = kernel.check_role(policy, proof, role, path)
        seconds = time.perf_counter() - start
    opened = sum(p.kernel == "accept" for p in check.probes)
    print(
        f"kernel    role {role}: {seconds:.2f} s for {len(check.probes)} probes ({opened} accepted),"
        f" {len(check.disagreements())} disagreements"
    )


if __name__ == "__main__":
    main()
