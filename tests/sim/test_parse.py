"""Text syntax of distributions and effects; bad input is an InputError with a reason."""

from __future__ import annotations

import pytest

from gpufabric.errors import InputError
from gpufabric.sim import (
    CheckpointPolicy,
    Constant,
    Hiccup,
    LogNormal,
    Normal,
    ShiftedExponential,
    Stragglers,
    parse_checkpoint,
    parse_distribution,
    parse_stragglers,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("const:1ms", Constant(value_s=1e-3)),
        ("normal:2ms", Normal(mu_s=0.0, sigma_s=2e-3)),
        ("normal:10us:2us", Normal(mu_s=1e-5, sigma_s=2e-6)),
        ("lognormal:2ms:0.5", LogNormal(median_s=2e-3, sigma=0.5)),
        ("exp:1ms", ShiftedExponential(shift_s=0.0, mean_excess_s=1e-3)),
        ("exp:0.5:1", ShiftedExponential(shift_s=0.5e-3, mean_excess_s=1e-3)),
        ("hiccup:0.001:5ms", Hiccup(prob=0.001, delay_s=5e-3)),
    ],
)
def test_distribution_syntax(text, expected):
    got = parse_distribution(text)
    assert type(got) is type(expected)
    for name in expected.__dataclass_fields__:
        assert getattr(got, name) == pytest.approx(getattr(expected, name))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("gauss:2ms", "unknown distribution 'gauss'"),
        ("normal:-2ms", "must be >= 0"),
        ("normal:0ms", "std-dev must be > 0"),
        ("normal:1:2:3", "takes 1 or 2 argument"),
        ("lognormal:2ms:-1", "median and sigma must be > 0"),
        ("exp:0", "mean must be > 0"),
        ("hiccup:1.5:5ms", r"must be in \[0, 1\]"),
        ("hiccup:0.1:5parsecs", "cannot read duration"),
        ("const:nan", "cannot read duration|must be >= 0"),
        ("empirical:/nonexistent/file", "cannot read empirical samples"),
    ],
)
def test_bad_distributions(text, match):
    with pytest.raises(InputError, match=match):
        parse_distribution(text)


def test_stragglers_and_checkpoints():
    assert parse_stragglers("0.01x1.5") == Stragglers(fraction=0.01, factor=1.5)
    assert parse_checkpoint("500:8s:sync") == CheckpointPolicy(every_steps=500, write_s=8.0, mode="sync")
    assert parse_checkpoint("500:8s:async:1s:0.1") == CheckpointPolicy(
        every_steps=500, write_s=8.0, mode="async", snapshot_s=1.0, drain_slowdown=0.1
    )
    for bad, match in [
        ("1.5x2", r"in \[0, 1\]"),
        ("-0.1x2", r"in \[0, 1\]"),
        ("0.1x0.5", "factor must be >= 1"),
        ("0.1", "FRACTIONxFACTOR"),
    ]:
        with pytest.raises(InputError, match=match):
            parse_stragglers(bad)
    for bad, match in [
        ("0:8s", ">= 1 step"),
        ("500:8s:lazy", "sync or async"),
        ("500", "STEPS:WRITE"),
        ("500:8s:sync:1s", "async checkpoints only"),
        ("x:8s", "whole number"),
    ]:
        with pytest.raises(InputError, match=match):
            parse_checkpoint(bad)


def test_empirical_files(tmp_path):
    samples = tmp_path / "lat.txt"
    samples.write_text("# one per line\n10\n20\n30\n")
    e = parse_distribution(f"empirical:{samples}:us")
    assert e.values_s == pytest.approx((10e-6, 20e-6, 30e-6))
    hist = tmp_path / "hist.txt"
    hist.write_text("0 1 5\n1 2 5\n")
    h = parse_distribution(f"empirical:{hist}")  # bare numbers are ms
    assert float(h.isf(0.5)) == pytest.approx(1e-3)
    bad = tmp_path / "bad.txt"
    bad.write_text("1\nfast\n")
    with pytest.raises(InputError, match=r"bad.txt:2: not a number"):
        parse_distribution(f"empirical:{bad}")
    gap = tmp_path / "gap.txt"
    gap.write_text("0 1 5\n2 3 5\n")
    with pytest.raises(InputError, match="contiguous"):
        parse_distribution(f"empirical:{gap}")


def test_empirical_sample_files_are_capped_and_utf8(tmp_path, monkeypatch):
    from gpufabric.errors import InputError
    from gpufabric.sim import parse

    monkeypatch.setattr(parse, "MAX_SAMPLE_BYTES", 1024)
    big = tmp_path / "big.txt"
    big.write_text("1.0\n" * 300)
    with pytest.raises(InputError, match="larger than 1,024 bytes"):
        parse.parse_distribution(f"empirical:{big}")
    with pytest.raises(InputError, match="not a regular file"):  # a device is refused before any read
        parse.parse_distribution("empirical:/dev/zero")
    latin = tmp_path / "s.txt"
    latin.write_bytes(b"1.0\n2.0 \xe9\n")
    with pytest.raises(InputError, match="not UTF-8"):
        parse.parse_distribution(f"empirical:{latin}")
