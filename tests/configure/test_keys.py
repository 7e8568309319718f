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
    real = subprocess.run(
        ["nvme", "gen-dhchap-key", "-s", secret.hex(), "-l", "32", "-m", "0"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout.strip()
    assert encode_dhchap(secret, 0) == real


@needs_tool("nvme")
def test_generated_keys_pass_nvme_checks():
    keys = KeySource(seed=b"test-seed")
    dh = keys.dhchap("a")
    tls = keys.tls_psk("b")
    ok = subprocess.run(["nvme", "check-dhchap-key", "-k", dh], capture_output=True, text=True, timeout=10)
    assert ok.returncode == 0 and "HMAC 3, length 64" in ok.stdout
    ok = subprocess.run(["nvme", "check-tls-key", "-k", tls], capture_output=True, text=True, timeout=10)
    # ":01:" is HMAC 1 (SHA-256) and the PSK is 32 bytes: nvme-cli reports both once the CRC checks out
    assert ok.returncode == 0 and "HMAC 1, length 32" in ok.stdout, ok.stdout + ok.stderr


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


def test_key_file_is_read_capped(tmp_path):
    """A key file over the cap is refused (exit-2 InputError), not read whole; one at the cap is a seed."""
    from gpufabric.configure.keys import MAX_KEY_FILE_BYTES
    from gpufabric.errors import InputError

    key = tmp_path / "key"
    key.write_bytes(b"k" * (MAX_KEY_FILE_BYTES + 1))
    with pytest.raises(InputError, match=r"key file is larger than 65,536 bytes"):
        KeySource.from_options(key_file=key)
    key.write_bytes(b"k" * MAX_KEY_FILE_BYTES)
    assert KeySource.from_options(key_file=key).seed == b"k" * MAX_KEY_FILE_BYTES
    with pytest.raises(InputError, match=r"missing: cannot read key file: No such file"):
        KeySource.from_options(key_file=tmp_path / "missing")


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "directory"])
def test_key_file_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    """/dev/zero used to be read until memory ran out and a FIFO blocked forever; both are refused up front.

    Run in a child with a timeout so the old behaviour fails the test instead of hanging the suite.
    """
    import os
    import sys
    from pathlib import Path

    path = Path(kind) if kind.startswith("/") else tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    code = (
        "import sys\nfrom pathlib import Path\nfrom gpufabric.configure.keys import KeySource\n"
        "from gpufabric.errors import InputError\n"
        "try:\n    KeySource.from_options(key_file=Path(sys.argv[1]))\n"
        "except InputError as exc:\n    print(exc)\n    sys.exit(2)\n"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(src)},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout.strip() == (
        f"{path}: key file is not a regular file; write the key to a file "
        "(e.g. head -c 64 /dev/urandom > key && chmod 600 key)"
    )
