"""Secret encodings match nvme-cli, NQNs follow the NQN rules."""

from __future__ import annotations

import subprocess

import pytest

from gpufabric.configure.keys import KeySource, encode_dhchap
from gpufabric.configure.nqn import nqn_problem, uuid_nqn
from tests.conftest import needs_tool


@needs_tool("nvme")
def test_dhchap_encoding_equals_nvme_gen_dhchap_key():
    secret = bytes(range(32))
    # hmac 0: nvme-cli stores the given secret untransformed, so the strings must match
    real = subprocess.run(["nvme", "gen-dhchap-key", "-s", secret.hex(), "-l", "32", "-m", "0"],
                          capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    assert encode_dhchap(secret, 0) == real


@needs_tool("nvme")
def test_generated_keys_pass_nvme_checks():
    keys = KeySource(seed=b"test-seed")
    dh = keys.dhchap("a")
    tls = keys.tls_psk("b")
    ok = subprocess.run(["nvme", "check-dhchap-key", "-k", dh], capture_output=True, text=True, timeout=10)
    assert ok.returncode == 0 and "HMAC 3, length 64" in ok.stdout
    ok = subprocess.run(["nvme", "check-tls-key", "-k", tls], capture_output=True, text=True, timeout=10)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_seeded_keys_are_reproducible_and_distinct():
    a, b = KeySource(seed=b"s"), KeySource(seed=b"s")
    assert a.dhchap("x") == b.dhchap("x")
    assert a.dhchap("y") != a.dhchap("x")
    assert KeySource().dhchap("x") != KeySource().dhchap("x")
    ib = a.ib_key("m_key")
    assert ib.startswith("0x") and int(ib, 16) > 1 and len(ib) == 18


@pytest.mark.parametrize(
    ("nqn", "problem"),
    [
        (uuid_nqn("spec", "host", "compute-1"), None),
        ("nqn.2014-08.org.nvmexpress.discovery", None),
        ("nqn.2024-13.io.example:x", "month 13"),
        ("nqn.2024-01.io.example:" + "x" * 220, "223 bytes"),
        ("iqn.2024-01.io.example:x", "nqn.yyyy-mm."),
        ("nqn.2014-08.org.nvmexpress:uuid:8E60925C-2065-50B5-8495-B757A9D43B57", "lowercase"),
        ("nqn.2024-01.io.example:a b", "printable ASCII"),
    ],
)
def test_nqn_rules(nqn, problem):
    got = nqn_problem(nqn)
    assert (got is None) if problem is None else (problem in got)
