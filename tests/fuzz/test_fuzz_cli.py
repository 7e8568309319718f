"""Fuzz ``plan``, ``simulate`` and ``ingest`` in-process with mutated shipped inputs (issue 9 item 9).

Invariants on every example: the exit code is 0, 1 or 2; nothing raises out of ``main``
and no traceback is printed; every JSON document printed has only finite numbers.

CI runs ``GPUFABRIC_FUZZ_EXAMPLES`` examples per test (default 60; derandomized under
``CI`` like the rest of the suite); ``make fuzz`` runs thousands with a random seed.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufabric.cli.app import main
from tests.fuzz.strategies import hostile_values, json_numbers_finite, mutated_tool_output, spec_bytes

EXAMPLES = int(os.environ.get("GPUFABRIC_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def check(code: int, out: str, err: str, *, json_out: bool) -> None:
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out, err[-2000:]
    if code == 2:
        # A user error is one line (the CLI contract), never a dump of the input.
        assert len(err.strip().splitlines()) <= 4 and len(err) < 4000, err[-2000:]
    if json_out and code in (0, 1) and out.strip():
        assert json_numbers_finite(out)


@FUZZ
@given(spec=spec_bytes())
def test_plan_never_crashes(spec: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="sf-fuzz-") as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_bytes(spec)
        check(*run_cli("plan", str(path), "--format", "json"), json_out=True)


@FUZZ
@given(spec=spec_bytes())
def test_simulate_spec_never_crashes(spec: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="sf-fuzz-") as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_bytes(spec)
        check(*run_cli("simulate", str(path), "--steps", "200", "--format", "json"), json_out=True)


def _flag_value() -> st.SearchStrategy[str]:
    return st.one_of(
        hostile_values().map(str),
        st.sampled_from(
            [
                "normal:2ms",
                "exp:1ms",
                "lognormal:1ms:0.5",
                "const:1ms",
                "hiccup:0.001:5ms",
                "0.01x1.5",
                "500:8s:sync",
                "0.001:5ms",
                "normal:nan",
                "exp:-1ms",
                "1e999",
                "empirical:/etc/passwd",
                "empirical:../../x",
            ]
        ),
    )


@FUZZ
@given(
    ranks=st.one_of(st.integers(min_value=-5, max_value=4096), st.sampled_from([10**30, 2**31, 2**63])),
    steps=st.integers(min_value=-5, max_value=300),
    flags=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "--jitter",
                    "--hiccup",
                    "--straggler",
                    "--leaf-jitter",
                    "--comm-latency",
                    "--slow-links",
                    "--checkpoint-every",
                    "--compute-ms",
                    "--node-mttf-h",
                    "--ring-steps",
                    "--gpus-per-node",
                    "--ranks-per-leaf",
                    "--runs",
                    "--seed",
                ]
            ),
            _flag_value(),
        ),
        max_size=3,
        unique_by=lambda f: f[0],
    ),
)
def test_simulate_synthetic_never_crashes(ranks: int, steps: int, flags: list[tuple[str, str]]) -> None:
    argv = ["simulate", "--ranks", str(ranks), "--steps", str(steps), "--format", "json"]
    for flag, value in flags:
        argv += [flag, value]
    check(*run_cli(*argv), json_out=True)


def _ingest(sample: tuple[str, bytes]) -> None:
    tool, data = sample
    with tempfile.TemporaryDirectory(prefix="sf-fuzz-") as tmp:
        path = Path(tmp) / "output.txt"
        path.write_bytes(data)
        check(
            *run_cli("ingest", "--tool", tool, str(path), "--db", str(Path(tmp) / "r.db"), "--format", "json"),
            json_out=True,
        )


@FUZZ
@given(sample=mutated_tool_output(json_values=False))
def test_ingest_damaged_text_never_crashes(sample: tuple[str, bytes]) -> None:
    _ingest(sample)


@settings(FUZZ, report_multiple_bugs=False)
@given(sample=mutated_tool_output(text=False))
def test_ingest_mutated_json_values_never_crash(sample: tuple[str, bytes]) -> None:
    _ingest(sample)


@pytest.mark.parametrize("source", ["/dev/zero", "oversize"])
def test_ingest_reads_files_capped(tmp_path, monkeypatch, source):
    """ingest reads at most MAX_INGEST_BYTES of a file: /dev/zero or a huge file is a one-line exit 2.

    The cap is lowered to 1 MiB so the test reads little; a real nccl-tests log well under the
    cap still ingests.
    """
    from gpufabric.bench import ingest

    monkeypatch.setattr(ingest, "MAX_INGEST_BYTES", 1 << 20)
    path = Path(source) if source.startswith("/") else tmp_path / "huge.txt"
    if source == "oversize":
        path.write_bytes(b"#" * ((1 << 20) + 1))
    code, out, err = run_cli("ingest", "--tool", "nccl-tests", str(path), "--db", str(tmp_path / "r.db"))
    assert code == 2 and out == "", err
    if source == "/dev/zero":  # a device is refused before the first read (issue 24)
        assert err.strip() == (
            f"gpufabric: error: {path}: tool output is not a regular file (a character device); give a file"
            " (copy it first)"
        )
    else:
        assert err.strip() == f"gpufabric: error: {path}: tool output file is larger than 1,048,576 bytes"
    sample = next(
        p
        for p in sorted((Path(__file__).parents[1] / "data" / "nccl-tests").iterdir())
        if p.stat().st_size < (1 << 20) and p.suffix in (".txt", ".log", ".json")
    )
    code, _, err = run_cli("ingest", "--tool", "nccl-tests", str(sample), "--dry-run")
    assert code in (0, 1), err


_CAPPED = [
    ("gpufabric.spec.plan_file", "MAX_PLAN_BYTES", ["config", "{spec}", "--dry-run", "--plan", "{file}"]),
    ("gpufabric.report", "MAX_REPORT_BYTES", ["compare", "{file}", "{file}"]),
    ("gpufabric.bench.manifests", "MAX_MANIFEST_BYTES", ["fingerprint", "--compare", "{file}", "{file}"]),
]


# compare takes a report only from a regular file or a *.json name (else a run id): no /dev/zero case.
@pytest.mark.parametrize(
    ("module", "cap", "argv", "source"),
    [
        (*c, s)
        for c in _CAPPED
        for s in ("/dev/zero", "oversize.json")
        if not (c[2][0] == "compare" and s == "/dev/zero")
    ],
)
def test_user_json_files_are_read_capped(tmp_path, monkeypatch, module, cap, argv, source):
    """--plan, compare's JSON reports and fingerprint manifests: a file over the cap (or a device)
    is a one-line exit 2, never read whole. Caps lowered to 1 MiB so the test reads little."""
    import importlib

    from tests.conftest import EXAMPLES

    monkeypatch.setattr(importlib.import_module(module), cap, 1 << 20)
    if source.startswith("/"):
        path = Path(source)
    else:
        path = tmp_path / source
        path.write_bytes(b" " * ((1 << 20) + 1))
    args = [a.format(spec=EXAMPLES / "lab-2node.yaml", file=path) for a in argv]
    code, out, err = run_cli(*args)
    assert code == 2 and "Traceback" not in err, err[-2000:]
    want = (
        "is not a regular file (a character device)" if source == "/dev/zero" else "file is larger than 1,048,576 bytes"
    )
    assert f"{path}: " in err and want in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_audited_directory_files_are_read_capped(tmp_path, monkeypatch):
    """`audit --config DIR` reads each file of DIR capped: an oversize file is a one-line exit 2."""
    from gpufabric.audit import collect

    monkeypatch.setattr(collect, "MAX_AUDIT_FILE_BYTES", 1 << 20)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "hostname").write_bytes(b"h" * ((1 << 20) + 1))
    code, out, err = run_cli("audit", "--config", str(tmp_path))
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert err.strip() == f"gpufabric: error: {etc / 'hostname'}: audited file is larger than 1,048,576 bytes"


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_audited_directory_refuses_fifos_and_devices(tmp_path, kind):
    """A FIFO (blocks forever when opened) or a link to /dev/zero in the audited directory is refused.

    In a child with a timeout so the old behaviour fails the test instead of hanging the suite.
    """
    import subprocess
    import sys

    etc = tmp_path / "etc"
    etc.mkdir()
    if kind == "fifo":
        os.mkfifo(etc / "hostname")
    else:
        (etc / "hostname").symlink_to(kind)
    src = Path(__file__).resolve().parents[2] / "src"
    done = subprocess.run(
        [sys.executable, "-m", "gpufabric", "audit", "--config", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(src)},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip() == (
        f"gpufabric: error: {etc / 'hostname'}: not a regular file; an audited directory holds copies of files only"
    )
