"""bench train and bench checkpoint stream progress on stderr while they run (rank 0's records)."""

from __future__ import annotations

import pytest

from gpufabric.cli import probe_live
from gpufabric.cli.output import Format


def test_lines_from_records(capsys):
    steps = probe_live.train_steps(Format.text, steps=2, warmup=1)
    assert steps is not None
    steps({"type": "ready", "host": "h1", "device": "cpu"})
    steps({"type": "step", "step": 0, "warmup": True, "step_s": 0.0412, "loss": 6.93121})
    steps({"type": "step", "step": 2, "warmup": False, "step_s": 0.05, "loss": 6.5})
    steps({"type": "checksum", "sha256": "ab"})
    err = capsys.readouterr().err
    assert "rank 0 (h1, cpu)" in err
    assert "step 1/3 (warmup): 41.2 ms, loss 6.9312" in err and "step 3/3: 50.0 ms, loss 6.5000" in err
    assert "checksum" not in err
    formats = probe_live.checkpoint_formats(Format.text)
    assert formats is not None
    formats(
        {"type": "checkpoint", "format": "torch", "bytes": 64e6, "write_s": 0.4123, "read_s": 0.1, "wrong_tensors": 0}
    )
    assert "torch: 64.0 MB of rank 0 written in 0.412 s, read in 0.100 s, 0 wrong" in capsys.readouterr().err
    assert probe_live.train_steps(Format.json, steps=1, warmup=0) is None  # stdout stays one JSON document
    assert probe_live.checkpoint_formats(Format.json) is None


@pytest.mark.slow
def test_train_and_checkpoint_print_progress_while_running(cli, tmp_path):
    code, out, err = cli("bench", "train", "--steps", "2", "--warmup", "1", "--db", tmp_path / "r.db")
    assert code == 0, err + out
    assert "step 1/3 (warmup)" in err and "step 3/3:" in err
    code, out, err = cli(
        "bench",
        "checkpoint",
        "--dir",
        tmp_path / "ckpt",
        "--bytes",
        "1M",
        "--formats",
        "torch",
        "--db",
        tmp_path / "r.db",
    )
    assert code == 0, err + out
    assert "torch: 0.5 MB of rank 0 written in" in err  # 1M over 2 ranks
