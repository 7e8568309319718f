"""live.Tail: records reach the callback while the file is still being written."""

from __future__ import annotations

import json
import threading

from gpufabric.bench.probes.live import Tail, size_row


def test_tail_delivers_each_complete_line_while_the_writer_runs(tmp_path):
    path = tmp_path / "rank0.jsonl"
    seen: list[dict] = []
    got = threading.Event()

    def on_record(rec):
        seen.append(rec)
        got.set()

    with Tail(path, on_record), open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "size", "n": 1}) + "\n")
        fh.flush()
        assert got.wait(5), "the first record did not arrive while the file was open"
        assert seen == [{"type": "size", "n": 1}]
        fh.write('{"type": "size", "n": 2')  # half a line: not delivered yet
        fh.flush()
        got.clear()
        assert not got.wait(0.3)
        fh.write("}\n")
    assert [r["n"] for r in seen] == [1, 2]


def test_size_row_is_nccl_tests_arithmetic():
    row = size_row(
        {
            "type": "size",
            "op": "all_reduce",
            "dtype": "float32",
            "size_bytes": 1_000_000,
            "times_us": [100.0, 200.0, 300.0],
            "wrong": 0,
            "rank": 0,
        },
        world=4,
    )
    assert row["time_p50_us"] == 200.0 and row["algbw_gbps"] == 5.0 and row["busbw_gbps"] == 5.0 * 2 * 3 / 4
    assert size_row({"type": "ready"}, world=2) is None
