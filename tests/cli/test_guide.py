"""Every command in docs/guide.md runs, in order, in a scratch directory (issue 13).

Commands that need GPUs, several nodes or a storage target get ``--dry-run`` (they print
exactly what they would run); the files the guide assumes users already have (an
nccl-tests log, perftest and fio output, a second node's fingerprint) are real outputs
from tests/data.
"""

from __future__ import annotations

import re
import shlex
import shutil

from tests.conftest import DATA, ROOT

GUIDE = ROOT / "docs" / "guide.md"
#: Prefixes of commands that need GPUs, several nodes or a storage target: run with --dry-run.
DRY = (("bench", "collectives"), ("bench", "train"), ("bench", "--suite"))
#: Commands whose exit code 1 is a finding, not a failure (this host's live audit, a regression,
#: the study's partitions that admit every adapter: its spec lists no port GUIDs).
MAY_FAIL = (("audit", "--live"), ("audit", "--config"), ("compare",))
#: Files the guide assumes exist, from the corpus.
GIVEN = {
    "all_reduce_perf.log": "nccl-tests/public_h100_dgx_1node_llmb.txt",
    "ib_write_bw.txt": "perftest/public_cx7_ndr_ib_write_bw_gbits.txt",
    "fio.json": "fio/two_groups_two_jobs.jsonplus.json",
}


def guide_commands() -> list[tuple[list[str], str | None]]:
    """(argv without 'gpufabric', stdout file or None) for every command in the guide's sh blocks."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", GUIDE.read_text(), flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if not line.startswith("gpufabric "):
                continue
            redirect = None
            if " > " in line:
                line, redirect = (part.strip() for part in line.split(" > ", 1))
            commands.append((shlex.split(line)[1:], redirect))
    return commands


def test_the_guide_lists_the_whole_loop():
    verbs = {argv[0] for argv, _ in guide_commands()}
    assert {
        "init",
        "plan",
        "predict",
        "simulate",
        "config",
        "audit",
        "bench",
        "ingest",
        "report",
        "compare",
        "fingerprint",
        "calibrate",
    } <= verbs


def test_every_guide_command_runs(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUFABRIC_DB", str(tmp_path / "results.db"))
    for name, src in GIVEN.items():
        shutil.copy(DATA / src, tmp_path / name)
    for argv, redirect in guide_commands():
        if any(tuple(argv[: len(p)]) == p for p in DRY) and "--dry-run" not in argv:
            argv = [*argv, "--dry-run"]
        if argv[0] == "fingerprint" and "--compare" in argv and not (tmp_path / "node2.json").exists():
            shutil.copy(tmp_path / "node1.json", tmp_path / "node2.json")  # the second node's manifest
        code, out, err = cli(*argv)
        allowed = (0, 1) if any(tuple(argv[: len(p)]) == p for p in MAY_FAIL) else (0,)
        assert code in allowed, (argv, err[-500:])
        assert "Traceback" not in err, argv
        if redirect:
            (tmp_path / redirect).write_text(out)
    assert "catalog override applied: gpus.h100-sxm" in out  # the last command: plan --catalog calibrated.yaml
