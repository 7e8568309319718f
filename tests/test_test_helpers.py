"""The test helpers themselves: process markers, hang guards, golden normalisation and diffs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gpufabric import __version__
from tests import goldens
from tests.conftest import MARK_VAR, finishes, group_gone, marked_pids, wait_until


def test_marked_pids_finds_only_processes_carrying_the_mark(process_mark):
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    unmarked_env = {k: v for k, v in os.environ.items() if k != MARK_VAR}
    marked = subprocess.Popen(sleeper, start_new_session=True)  # inherits the fixture's mark
    unmarked = subprocess.Popen(sleeper, env=unmarked_env, start_new_session=True)
    try:
        wait_until(lambda: marked.pid in marked_pids(process_mark), what="marked child visible")
        assert unmarked.pid not in marked_pids(process_mark)
        assert not group_gone(marked.pid)
    finally:
        for proc in (marked, unmarked):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert marked_pids(process_mark) == []
    assert group_gone(marked.pid)


def test_finishes_returns_raises_and_guards_hangs():
    assert finishes(lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        finishes(lambda: 1 / 0)
    with pytest.raises(pytest.fail.Exception, match="hang guard"):
        finishes(lambda: time.sleep(5), limit_s=0.2)


def test_normalise_json_rounds_floats_and_masks_the_version():
    doc = {"gpufabric_version": __version__, "a": [0.1 + 0.2, 1.0, 3], "b": {"c": 123456789.123456, "d": "x"}}
    out = json.loads(goldens.normalise_json(json.dumps(doc)))
    assert out == {"gpufabric_version": "<version>", "a": [0.3, 1.0, 3], "b": {"c": 123456789.0, "d": "x"}}
    # A change in the 9th significant digit still shows.
    assert goldens.normalise_json("[1.00000001]") != goldens.normalise_json("[1.00000002]")
    assert goldens.mask_version(f"by gpufabric {__version__}.") == "by gpufabric <version>."


def test_check_fails_with_a_short_diff_and_updates_on_request(tmp_path, monkeypatch, request):
    monkeypatch.setattr(goldens, "GOLDEN", tmp_path)
    (tmp_path / "x.txt").write_text("".join(f"line {i}\n" for i in range(200)))
    changed = "".join(f"line {i}{' changed' if i % 2 else ''}\n" for i in range(200))
    with pytest.raises(pytest.fail.Exception) as info:
        goldens.check(request, "x.txt", changed)
    message = str(info.value)
    assert "--- golden/x.txt" in message and "+line 1 changed" in message
    assert message.count("\n") < goldens.DIFF_LINES + 5 and "more diff lines" in message
    goldens.check(request, "x.txt", "".join(f"line {i}\n" for i in range(200)))  # equal: passes
    with pytest.raises(pytest.fail.Exception, match="no golden file"):
        goldens.check(request, "missing.txt", "x")
    monkeypatch.setattr(goldens, "updating", lambda _request: True)
    goldens.check(request, "new/y.txt", "fresh\n")
    assert (tmp_path / "new" / "y.txt").read_text() == "fresh\n"


def test_html_structure_skips_svg_and_keeps_headings_charts_and_headers():
    html = (
        "<html><head><title>T</title></head><body><h1>Run</h1><h2>Charts</h2>"
        "<figure class='chart' aria-label='busbw vs size'><svg><title>svg junk</title><text>1 KiB</text></svg></figure>"
        "<table><tr><th>a</th><th>b &amp; c</th></tr><tr><td>1</td><td>2</td></tr></table></body></html>"
    )
    assert goldens.html_structure(html) == (
        "title: T\nh1: Run\nh2: Charts\nfigure: busbw vs size\ntable\n  header: a | b & c\n"
    )
