"""The whole-text regexes of the nccl-tests parser start at a literal newline (C-speed
skipping, docs/performance.md); they must find exactly what the MULTILINE ``^`` forms
they replaced found, on every corpus log and on launcher-prefixed, CRLF and padded copies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufabric.bench.parsers import nccl_tests, prefixes

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
LOGS = sorted(DATA.glob("*.txt"))

#: The forms replaced (gpufabric before docs/performance.md "Ingest and predict", round 3).
OLD_ROW = re.compile(
    r"^[ \t]*(\d+)[ \t]+(\d+)[ \t]+([A-Za-z]\w*)(?:[ \t]+([A-Za-z]\w*))?(?:[ \t]+(-?\d+))?"
    + r"[ \t]+(\S+)" * 8
    + r"[ \t]*$",
    re.MULTILINE,
)
OLD_DEVICE = re.compile(
    r"^[ \t]*#[ \t]+Rank[ \t]+(\d+)[ \t]+(?:Group[ \t]+\d+[ \t]+)?Pid[ \t]+\d+[ \t]+on[ \t]+(\S+)[ \t]+device[ \t]+(\d+)"
    r"[ \t]+\[[^\]\n]*\][ \t]*(.*?)[ \t]*$",
    re.MULTILINE,
)
OLD_SRUN = re.compile(r"^[ \t]*\d+:(?:[ \t]|$)", re.MULTILINE)


def variants(text: str) -> dict[str, str]:
    lines = text.splitlines()
    return {
        "as is": text,
        "srun": "".join(f"{i % 13:>3}: {line}\n" for i, line in enumerate(lines)),
        "srun, empty lines bare": "".join(f"{i % 3}:{' ' + line if line else ''}\n" for i, line in enumerate(lines)),
        "mpi": "".join(f"[1,{i % 3}]<stdout>:{line}\n" for i, line in enumerate(lines)),
        "torch": "".join(f"[rank{i % 3}]:{line}\n" for i, line in enumerate(lines)),
        "timestamped, mixed": "".join(
            f"2024-03-04T10:11:12Z {'[rank1]:' if i % 2 else '[0] '}{line}\n" for i, line in enumerate(lines)
        ),
        "padded": "\n".join(f"{line} \t" for line in lines),
        # cut after the last size row, no newline: the row ends the text
        "ends on a row": "\n".join(
            lines[: max((i for i, line in enumerate(lines) if OLD_ROW.match(line)), default=0) + 1]
        ),
    }


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_prefix_stripping_matches_the_multiline_forms(log):
    for name, text in variants(log.read_text()).items():
        old = OLD_SRUN.sub("", text) if name.startswith("srun") else prefixes._PREFIX_M.sub("", text)
        assert prefixes.strip_all(text) == old, name


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_row_and_device_regexes_match_the_multiline_forms(log):
    for name, text in variants(log.read_text()).items():
        clean = prefixes.strip_all(text)
        assert nccl_tests._ROW.findall("\n" + clean) == OLD_ROW.findall(clean), name
        new_devices = [(r, h, d, m.rstrip(" \t")) for r, h, d, m in nccl_tests._DEVICE_NL.findall("\n" + clean)]
        assert new_devices == OLD_DEVICE.findall(clean), name
    assert OLD_ROW.findall(prefixes.strip_all(log.read_text()))  # every corpus log has rows: some were compared
