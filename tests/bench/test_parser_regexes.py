"""Speed-motivated parts of the nccl-tests parser, pinned to what they replaced: the
whole-text regexes start at a literal newline (C-speed skipping, docs/performance.md)
and must find exactly what the MULTILINE ``^`` forms found, on every corpus log and on
launcher-prefixed, CRLF, padded and truncated copies; the parse runs with the cyclic
garbage collector paused and leaves it as it was."""

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


#: The size-row regex before its character repeats became possessive (issue 32).
BACKTRACKING_ROW = re.compile(
    r"\n[ \t]*(\d+)[ \t]+(\d+)[ \t]+([A-Za-z]\w*)(?:[ \t]+([A-Za-z]\w*))?(?:[ \t]+(-?\d+))?"
    + r"[ \t]+(\S+)" * 8
    + r"[ \t]*(?=\n|\Z)"
)


def test_possessive_row_regex_finds_what_the_backtracking_one_finds():
    """Hostile rows: cells that look like a redop or a root (N/A, sum, -1), missing and extra
    cells, tabs, trailing blanks, signs, letters in numbers, non-ASCII digits and blanks."""
    import random

    rng = random.Random(32)
    tokens = ["8", "1024", "0", "-1", "float", "sum", "N/A", "n/a", "nan", "-nan", "inf", "1.5e3", "12.3", "x7"]
    tokens += ["-", "_", "\u0663", "1\u00a02", "#", "bf16", "0x10", "", "+4"]
    blanks = [" ", "\t", "  ", " \t ", "\u00a0", ""]
    lines = []
    for _ in range(4000):
        cells = [rng.choice(tokens) for _ in range(rng.randint(10, 14))]
        if rng.random() < 0.5:  # a well-formed head: size count type [redop [root]]
            cells[:3] = [str(rng.randint(0, 9999)), str(rng.randint(0, 9999)), rng.choice(["float", "half", "N"])]
        odd = rng.random() < 0.3  # mostly plain separators, sometimes none or a non-ASCII blank
        line = rng.choice(blanks) + "".join(cell + rng.choice(blanks if odd else blanks[:4]) for cell in cells)
        lines.append(line)
    text = "\n" + "\n".join(lines) + rng.choice(["", "\n"])
    found = nccl_tests._ROW.findall(text)
    assert found == BACKTRACKING_ROW.findall(text)
    assert len(found) > 200  # some rows matched: the comparison saw matches, not only misses


def test_parse_runs_with_the_collector_paused_and_restores_it(monkeypatch):
    import gc

    seen = []
    runs = nccl_tests._runs_nl

    def spy(text, source):
        seen.append(gc.isenabled())
        return runs(text, source)

    monkeypatch.setattr(nccl_tests, "_runs_nl", spy)
    text = LOGS[0].read_text()
    was = gc.isenabled()
    try:
        gc.enable()
        assert nccl_tests.parse_nccl_tests(text) and gc.isenabled()
        gc.disable()
        assert nccl_tests.parse_nccl_tests(text) and not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False, False]


def test_prefixes_are_stripped_a_chunk_of_lines_at_a_time_as_by_one_sub(monkeypatch):
    """issue 32: strip_all's sub() runs on about a megabyte of lines at a time (its pieces
    were ~200 MB for a 100 MB log); with chunks of a few characters, every launcher pattern
    gives what one sub() over the whole text gives, prefixes at chunk ends included."""
    import random

    rng = random.Random(5)
    heads = [" 0: ", "12:", "  3:\t", "[1,0]<stdout>:", "[rank3]:", "[2] ", "(head, rank=1, pid=3) ", "", " 7:", "\t9:"]
    heads += ["2024-03-04T10:11:12Z 0: ", "Mon Mar  4 10:11:12 2024 [1,2]<stderr>: ", "x"]
    bodies = ["# nThread 1", "  1024 256 float sum -1 1.0 2.0 3.0 0 1.0 2.0 3.0 0", "", "NCCL INFO x", ":", " "]
    patterns = (prefixes._PREFIX_NL, *prefixes._SIMPLE.values())
    for _ in range(2000):
        text = "\n".join(rng.choice(heads) + rng.choice(bodies) for _ in range(rng.randint(0, 12)))
        text += rng.choice(["", "\n"])
        monkeypatch.setattr(prefixes, "_CHUNK_CHARS", rng.randint(1, 20))
        for pattern in patterns:
            assert prefixes._sub_lines(pattern, text) == pattern.sub("\n", "\n" + text), (text, pattern.pattern)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_metric_rows_columns_are_the_metrics_fields(log):
    """issue 32: the store and the ingest JSON read a MetricRows' columns instead of its
    metrics; on every corpus log they are the very objects."""
    from operator import attrgetter

    from gpufabric.results.records import MetricRows

    seen = 0
    for parsed in nccl_tests.parse_nccl_tests(log.read_text(), source=log.name):
        metrics = parsed.metrics
        if type(metrics) is not MetricRows:
            continue
        seen += 1
        for field, column in zip(nccl_tests.METRIC_FIELDS, metrics.columns, strict=True):
            cells = list(map(attrgetter(field), metrics))
            assert len(column) == len(cells) and all(map(lambda a, b: a is b, column, cells)), field
    assert seen  # every corpus table takes the column path


def test_metric_rows_refuses_columns_that_are_not_its_metrics():
    from gpufabric.results.records import Metric, MetricRows

    m = Metric(name="x", value=1.0, unit="us")
    assert MetricRows.of([m], (["x"], [1.0], ["us"], [m.direction], [()])) == (m,)
    with pytest.raises(ValueError):
        MetricRows.of([m], (["x"], [1.0], ["us"], [m.direction]))
    with pytest.raises(ValueError):
        MetricRows.of([m, m], (["x"], [1.0], ["us"], [m.direction], [()]))
