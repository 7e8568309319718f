"""The one unit registry: parse and format of sizes, durations and rates."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from gpufabric.errors import InputError
from gpufabric.units import (
    DURATION_UNITS,
    format_duration,
    format_rate,
    format_size,
    is_time_unit,
    parse_duration_s,
    parse_rate_bps,
    parse_size,
    seconds_per,
)


def test_sizes_binary_suffix_and_decimal_si() -> None:
    assert parse_size("64K") == 65536
    assert parse_size("8GiB") == 8 * 1024**3
    assert parse_size("100MB") == 100_000_000
    assert format_size(1024**3) == "1 GiB"
    with pytest.raises(InputError, match="cannot read size"):
        parse_size("12 parsecs")


def test_durations_round_trip_through_format() -> None:
    assert parse_duration_s("500us") == pytest.approx(5e-4)
    assert parse_duration_s("30min") == 1800.0
    assert parse_duration_s("2", default_unit="ms") == pytest.approx(2e-3)
    assert format_duration(parse_duration_s("11.6ms")) == "11.6 ms"
    with pytest.raises(InputError, match="ns, us, ms, s, min, h"):
        parse_duration_s("3 fortnights")


def test_metric_time_units_accept_tool_spellings_but_user_input_does_not() -> None:
    assert seconds_per("usec") == seconds_per("us") == 1e-6
    assert seconds_per("sec") == 1.0
    assert is_time_unit("ms") and not is_time_unit("GB/s") and not is_time_unit("B")
    with pytest.raises(InputError):
        parse_duration_s("5usec")
    assert DURATION_UNITS == ("ns", "us", "ms", "s", "min", "h")


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("25GB/s", 25e9),
        ("100Gbit/s", 12.5e9),
        ("400 Gb/s", 50e9),
        ("10MiB/s", 10 * 1024**2),
        ("1e9", 1e9),
    ],
)
def test_rates_bytes_versus_bits(text: str, bps: float) -> None:
    assert parse_rate_bps(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["3 GX/s", "-1GB/s", "nanGB/s", "GB/s", "1e999GB/s"])
def test_bad_rates_are_refused(text: str) -> None:
    with pytest.raises(InputError, match="rate"):
        parse_rate_bps(text)


def test_format_rate_picks_a_decimal_prefix() -> None:
    assert format_rate(12.3e9) == "12.3 GB/s"
    assert format_rate(999) == "999 B/s"
    assert math.isclose(parse_rate_bps(format_rate(2.5e9).replace(" ", "")), 2.5e9)


def test_no_other_module_keeps_a_time_unit_table() -> None:
    # The registry is the only place a time-unit name maps to a factor or is listed as one.
    src = Path(__file__).resolve().parents[1] / "src" / "gpufabric"
    table = re.compile(r"[{(]\s*\"ns\"\s*[:,]")
    offenders = [
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if p.name != "units.py" and table.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_to_jsonable_numeric_arrays_keep_values_and_turn_non_finite_into_none():
    import numpy as np

    from gpufabric.jsonable import to_jsonable

    assert to_jsonable(np.array([1.5, 2.0])) == [1.5, 2.0]
    assert to_jsonable(np.array([1.0, np.nan, np.inf])) == [1.0, None, None]
    assert to_jsonable(np.array([[1, 2], [3, 4]])) == [[1, 2], [3, 4]]
    assert to_jsonable(np.float64(np.nan)) is None
