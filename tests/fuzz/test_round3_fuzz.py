"""Seeded fuzz of issue 24's classes: the proof, the boundaries, the bundles.

* proof: random rulesets in nft JSON (with the issue's constructs: negated ``oifname``,
  set statements with stateful expressions, deep jumps, several base chains) and hostile
  shapes; the evaluator never raises and its three answers partition the source space;
  a rule behind a stateful set statement is never called decided.
* boundaries: nested JSON at random depths into every JSON reader, FIFOs without a
  writer for every file-reading command (in children with a timeout, so a hang fails),
  damaged values in every checked DB column, ``--vary`` products far beyond the cap.
* bundles: random ``rdma_tos``, HCA lists and interface names through ``config``: exit 0
  or 2, never a traceback; what is accepted never marks CE and never lists more than
  NCCL's 32 HCAs.

CI runs ``GPUFABRIC_FUZZ_EXAMPLES`` examples per property (default 60, derandomized under
CI); ``make fuzz`` runs thousands with fresh seeds.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufabric.audit import intervals as iv
from gpufabric.audit import nft, nfteval
from gpufabric.audit.nfteval import Packet
from gpufabric.boundary import MAX_JSON_DEPTH, json_too_deep, loads_json
from gpufabric.errors import InputError, ParseError
from gpufabric.plan.sweep import MAX_COMBINATIONS
from tests.fuzz.test_fuzz_cli import check, run_cli

EXAMPLES = int(os.environ.get("GPUFABRIC_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
LAB_IB = (ROOT / "tests" / "data" / "audit" / "lab-ib.yaml").read_text()

# ---- proof ------------------------------------------------------------------------------

SADDR = {"payload": {"protocol": "ip", "field": "saddr"}}
DPORT = {"payload": {"protocol": "tcp", "field": "dport"}}


def _m(left, right, op="=="):
    return {"match": {"op": op, "left": left, "right": right}}


MATCHES = st.sampled_from(
    [
        _m({"meta": {"key": "oifname"}}, "lo", "!="),
        _m({"meta": {"key": "oifname"}}, "eth0"),
        _m({"meta": {"key": "oif"}}, "lo", "!="),
        _m({"meta": {"key": "oifgroup"}}, 5, "!="),
        _m({"meta": {"key": "iifname"}}, "mgmt0"),
        _m({"meta": {"key": "iifname"}}, "mgmt0", "!="),
        _m({"meta": {"key": "mark"}}, 1, "!="),
        _m(SADDR, {"prefix": {"addr": "10.0.0.0", "len": 8}}),
        _m(SADDR, "10.1.2.3", "!="),
        _m(DPORT, 22),
        _m(DPORT, {"set": [22, {"range": [1000, 2000]}]}),
        _m({"ct": {"key": "state"}}, "new"),
        _m({"ct": {"key": "state"}}, ["established", "related"], "in"),
    ]
)
STATEFUL = st.sampled_from(
    [
        {
            "set": {
                "op": "update",
                "elem": SADDR,
                "set": "@flood",
                "stmt": [{"limit": {"rate": 10, "per": "second", "inv": True}}],
            }
        },
        {"set": {"op": "add", "elem": SADDR, "set": "@flood", "stmt": [{"ct count": {"val": 3, "inv": True}}]}},
        {
            "set": {
                "op": "add",
                "elem": SADDR,
                "set": "@flood",
                "stmt": [{"quota": {"val": 10, "val_unit": "mbytes", "inv": True}}],
            }
        },
        {"meter": {"key": SADDR, "stmt": {"limit": {"rate": 5, "per": "second"}}, "name": "m"}},
        {"limit": {"rate": 5, "per": "second"}},
    ]
)
VERDICTS = st.sampled_from(
    [
        {"accept": None},
        {"drop": None},
        {"reject": None},
        {"return": None},
        {"jump": {"target": "c1"}},
        {"goto": {"target": "c2"}},
        {"continue": None},
    ]
)
HOSTILE = st.sampled_from(
    [
        None,
        7,
        "x",
        [],
        [1, 2],
        {"match": None},
        {"match": {"left": None}},
        {"set": "@x"},
        {"set": {"stmt": "x"}},
        {"jump": {}},
        {"vmap": {"data": 5}},
    ]
)
RULE = st.lists(st.one_of(MATCHES, MATCHES, STATEFUL), max_size=4).flatmap(
    lambda exprs: st.one_of(st.just(exprs), VERDICTS.map(lambda v: [*exprs, v]))
)


def _ruleset(chains: dict[str, list], prios: list[int]) -> nft.Ruleset:
    items: list = [{"table": {"family": "inet", "name": "t"}}]
    items.append({"set": {"family": "inet", "table": "t", "name": "flood", "type": "ipv4_addr"}})
    for n, prio in enumerate(prios):
        items.append(
            {
                "chain": {
                    "family": "inet",
                    "table": "t",
                    "name": f"in{n}",
                    "hook": "input",
                    "prio": prio,
                    "policy": "drop" if n == 0 else "accept",
                }
            }
        )
    for name in chains:
        if not name.startswith("in"):
            items.append({"chain": {"family": "inet", "table": "t", "name": name}})
    for name, rules in chains.items():
        for expr in rules:
            items.append({"rule": {"family": "inet", "table": "t", "chain": name, "expr": expr}})
    return nft.parse({"nftables": items})


@FUZZ
@given(
    st.dictionaries(st.sampled_from(["in0", "in1", "c1", "c2"]), st.lists(RULE, max_size=5), min_size=1),
    st.lists(st.integers(-400, 400), min_size=1, max_size=2),
    st.sampled_from([22, 80, 1500, 65535]),
)
def test_evaluator_partitions_the_source_space(chains, prios, port):
    rs = _ruleset(chains, prios)
    got = nfteval.evaluate(rs, Packet(iif="mgmt0", proto="tcp", dport=port))
    unknown = got.unknown_spans()
    assert not iv.intersect(got.accept, got.drop)
    assert not iv.intersect(got.accept, unknown) and not iv.intersect(got.drop, unknown)
    assert iv.union(iv.union(got.accept, got.drop), unknown) == iv.IPV4_ALL


@FUZZ
@given(st.lists(st.one_of(MATCHES, HOSTILE), min_size=1, max_size=3), VERDICTS)
def test_hostile_rule_shapes_are_a_parse_error_or_evaluated(exprs, verdict):
    try:
        rs = _ruleset({"in0": [[*exprs, verdict]]}, [0])
    except ParseError as exc:
        assert "nft JSON rule" in str(exc)
        return
    got = nfteval.evaluate(rs, Packet(iif="mgmt0", proto="tcp", dport=22))
    assert iv.union(iv.union(got.accept, got.drop), got.unknown_spans()) == iv.IPV4_ALL


@FUZZ
@given(STATEFUL.filter(lambda e: "set" in e or "meter" in e), st.sampled_from([{"accept": None}, {"drop": None}]))
def test_a_verdict_behind_a_stateful_statement_is_never_decided(stmt, verdict):
    # the base chain's policy is the opposite verdict: only "unknown" is right for every source
    policy = "drop" if "accept" in verdict else "accept"
    items = [
        {"table": {"family": "inet", "name": "t"}},
        {"set": {"family": "inet", "table": "t", "name": "flood", "type": "ipv4_addr"}},
        {"chain": {"family": "inet", "table": "t", "name": "input", "hook": "input", "prio": 0, "policy": policy}},
        {"rule": {"family": "inet", "table": "t", "chain": "input", "expr": [stmt, verdict]}},
    ]
    got = nfteval.evaluate(nft.parse({"nftables": items}), Packet(iif="x", proto="tcp", dport=22))
    assert got.accept == () and got.drop == () and got.unknown_spans() == iv.IPV4_ALL


# ---- boundaries -------------------------------------------------------------------------


@FUZZ
@given(st.integers(1, 3000), st.sampled_from(["[", '{"a":']), st.booleans())
def test_nested_json_is_bounded(depth, opener, closed):
    closer = "]" if opener == "[" else "}"
    text = opener * depth + "1" + (closer * depth if closed else "")
    try:
        doc = loads_json(text, source="f.json", what="doc")
    except InputError as exc:
        assert "nests deeper" in str(exc) or not closed
        assert depth > MAX_JSON_DEPTH or not closed
        return
    except ValueError:  # JSONDecodeError: not closed, so not JSON
        assert not closed
        return
    assert closed and depth <= MAX_JSON_DEPTH and doc is not None
    assert json_too_deep(text) is False


@FUZZ
@given(st.integers(MAX_JSON_DEPTH + 1, 5000), st.sampled_from(["fio", "iperf3", "perftest", "nccl-tests"]))
def test_ingest_of_deep_json_is_exit_2(depth, tool):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.json"
        path.write_text('{"jobs": ' + "[" * depth + "]" * depth + "}")
        code, out, err = run_cli("ingest", str(path), "--tool", tool, "--db", str(Path(tmp) / "r.db"))
    check(code, out, err, json_out=False)
    assert code == 2 and "RecursionError" not in err


def test_parsers_refuse_deep_json_with_a_parse_error():
    from gpufabric.bench.parsers import load_json

    with pytest.raises(ParseError, match="nests deeper"):
        load_json('{"a": ' + "[" * 4000 + "]" * 4000 + "}", source="x", tool="fio")
    with pytest.raises(ParseError, match="nests deeper"):
        load_json('{"a": ' + "[" * 4000, source="x", tool="fio")


def _bundle(tmp: Path) -> Path:
    spec = tmp / "s.yaml"
    spec.write_text(LAB_IB)
    out = tmp / "b"
    code, _o, err = run_cli("config", str(spec), "--out", str(out))
    assert code == 0, err
    return out


@settings(max_examples=max(4, EXAMPLES // 10), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.integers(MAX_JSON_DEPTH + 1, 4000),
    st.sampled_from(["manifest.json", "hosts/storage-1/etc/nvmet/config.json", "policy.json"]),
)
def test_deep_json_in_a_bundle_is_never_a_traceback(depth, rel):
    with tempfile.TemporaryDirectory() as tmp:
        root = _bundle(Path(tmp))
        (root / rel).write_text("[" * depth + "]" * depth)
        code, out, err = run_cli("audit", "--config", str(root))
    check(code, out, err, json_out=False)
    assert "RecursionError" not in err and "maximum recursion" not in err


def test_every_file_reading_command_refuses_a_fifo_without_blocking(tmp_path):
    """Each command in a child with a timeout: the old behaviour hangs there, not the suite."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    spec = tmp_path / "s.yaml"
    spec.write_text(LAB_IB)
    commands = [
        ["plan", str(fifo)],
        ["simulate", str(fifo)],
        ["sweep", str(fifo), "--vary", "cluster.nodes=2"],
        ["ingest", str(fifo), "--tool", "fio", "--db", str(tmp_path / "r.db")],
        ["config", str(spec), "--key-file", str(fifo), "--out", str(tmp_path / "o1")],
        ["config", "--plan", str(fifo), "--out", str(tmp_path / "o2")],
        ["compare", str(fifo), str(fifo), "--db", str(tmp_path / "r.db")],
        ["fingerprint", "--compare", str(fifo), str(fifo)],
        ["simulate", "--ranks", "8", "--steps", "10", "--jitter", f"empirical:{fifo}"],
    ]
    # one child runs every command in turn: the old behaviour hangs there (and the timeout
    # fails the test), not the suite; one interpreter start instead of one per command
    script = (
        "import contextlib, io, json, sys\n"
        "from gpufabric.cli.app import main\n"
        "out = []\n"
        "for argv in json.loads(sys.argv[1]):\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):\n"
        "        code = main(argv)\n"
        "    out.append([code, err.getvalue()[-1500:]])\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(commands)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for argv, (code, err) in zip(commands, json.loads(done.stdout), strict=True):
        assert code in (1, 2), (argv, err)
        assert "Traceback" not in err, (argv, err)


COLUMNS = [
    ("run", "started_at"),
    ("run", "finished_at"),
    ("run", "meta"),
    ("run", "argv"),
    ("test_result", "duration_s"),
    ("test_result", "params"),
    ("metric", "value"),
    ("metric", "direction"),
    ("verdict", "measured"),
    ("verdict", "warnings"),
    ("verdict", "total_repeats"),
    ("meta", "value"),
]


@settings(max_examples=max(8, EXAMPLES // 4), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(COLUMNS),
    st.one_of(st.text(max_size=12), st.binary(max_size=8), st.just("{")),
    st.sampled_from(["runs", "report"]),
)
def test_damaged_db_values_are_one_line_exit_1(column, value, command):
    from gpufabric.results.store import Store
    from tests.results.factories import make_run

    table, col = column
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "r.db"
        with Store.open(db) as store:
            make_run(store)
        with sqlite3.connect(db) as conn:
            if table == "meta":
                conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (value,))
            else:
                conn.execute(f"UPDATE {table} SET {col}=?", (value,))
        argv = ["runs", "--db", str(db)] if command == "runs" else ["report", "latest", "--db", str(db)]
        code, out, err = run_cli(*argv)
    assert "Traceback" not in err and code in (0, 1), (column, value, err)
    if code == 1:
        assert len(err.strip().splitlines()) == 1, err


@FUZZ
@given(st.lists(st.integers(2, 40), min_size=2, max_size=9))
def test_sweep_products_are_refused_before_they_are_built(sizes):
    product = 1
    for n in sizes:
        product *= n
    varies = []
    for i, n in enumerate(sizes):
        varies += ["--vary", f"cluster.nodes={','.join(str(8 * (k + 1) + i) for k in range(n))}"]
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "s.yaml"
        spec.write_text(LAB_IB)
        if product <= MAX_COMBINATIONS:
            return  # the refusal is what is fuzzed here; small sweeps run in tests/plan
        code, out, err = run_cli("sweep", str(spec), *varies, "--out", str(Path(tmp) / "s.csv"))
        assert not (Path(tmp) / "s.csv").exists()
    assert code == 2 and f"{product:,} combinations" in err, err


# ---- bundles ----------------------------------------------------------------------------


def _config(text: str) -> tuple[int, str, Path]:
    tmp = Path(tempfile.mkdtemp(prefix="gf-fuzz-"))
    spec = tmp / "s.yaml"
    spec.write_text(text)
    code, out, err = run_cli("config", str(spec), "--out", str(tmp / "b"))
    check(code, out, err, json_out=False)
    return code, err, tmp / "b"


@settings(max_examples=max(6, EXAMPLES // 6), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 255))
def test_rdma_tos_never_marks_ce(tos):
    code, err, root = _config(LAB_IB.replace("  flows:\n", f"  rdma_tos: {tos}\n  flows:\n", 1))
    if tos & 3 == 3:
        assert code == 2 and "Congestion Experienced" in err
    else:
        assert code == 0, err
        policy = json.loads((root / "policy.json").read_text())["policy"]
        assert policy["rdma_tos"] & 3 != 3


@settings(max_examples=max(6, EXAMPLES // 6), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(1, 80))
def test_hca_lists_are_never_cut_silently(count):
    hcas = ", ".join(f'"mlx5_{i}:1"' for i in range(count))
    start = LAB_IB.index('hcas: ["mlx5_0:1"')
    end = LAB_IB.index("]}", start) + 1
    code, err, root = _config(LAB_IB[:start] + f"hcas: [{hcas}]" + LAB_IB[end:])
    if count > 32:
        assert code == 2 and "at most 32" in err
    else:
        assert code == 0, err
        env = (root / "roles" / "compute" / "etc" / "gpufabric" / "nccl.env").read_text()
        line = next(x for x in env.splitlines() if x.startswith("NCCL_IB_HCA="))
        assert line.count("mlx5_") == count


@settings(max_examples=max(6, EXAMPLES // 6), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["-data0", "--help", "-", "-x", "d-0", "data.0", "_d", "a" * 16, "da ta", "da/ta"]))
def test_interface_names_are_checked_where_the_spec_is_read(name):
    code, err, _root = _config(LAB_IB.replace("interface: data0", f"interface: '{name}'", 1))
    if name.startswith("-") or len(name) > 15 or " " in name or "/" in name:
        assert code == 2 and "s.yaml:" in err and "interface" in err, err
    else:
        assert code == 0, err
