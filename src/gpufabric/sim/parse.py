"""Text syntax of distributions and effects, shared by the CLI and spec overrides.

Durations take a unit (ns, us, ms, s, min, h); a bare number means ``default_unit``.

    const:1ms             always 1 ms
    normal:2ms            mean 0, std-dev 2 ms (added to a base time; total truncated at 0)
    normal:10us:2us       mean 10 us, std-dev 2 us
    lognormal:2ms:0.5     median 2 ms, log-space sigma 0.5
    exp:1ms               exponential, mean 1 ms
    exp:0.5ms:1ms         shift 0.5 ms + exponential with mean 1 ms
    hiccup:0.001:5ms      with probability 0.001 an extra 5 ms
    empirical:FILE[:UNIT] one sample per line (unit default ms), a sockperf --full-log CSV
                          (latency column, usec), or "lo hi count" histogram lines
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Literal

import numpy as np

from gpufabric.boundary import read_capped
from gpufabric.errors import InputError
from gpufabric.results.samples import sockperf_full_log_samples
from gpufabric.sim.config import CheckpointPolicy, Stragglers
from gpufabric.sim.distributions import (
    Constant,
    Distribution,
    Empirical,
    Hiccup,
    LogNormal,
    Normal,
    ShiftedExponential,
)
from gpufabric.units import DURATION_UNITS, parse_duration_s

#: Argument counts of each kind but ``empirical`` (which takes FILE[:UNIT]).
_ARITY = {"const": (1,), "normal": (1, 2), "lognormal": (2,), "exp": (1, 2), "hiccup": (2,)}
KINDS = (*_ARITY, "empirical")
#: Checkpoint modes as typed values (CheckpointPolicy.mode is a Literal).
_CKPT_MODES: dict[str, Literal["sync", "async"]] = {"sync": "sync", "async": "async"}


def _dur(text: str, what: str, spec: str, unit: str) -> float:
    if text.strip().startswith("-"):
        raise InputError(f"{spec!r}: {what} must be >= 0, got {text.strip()}")
    try:
        value = parse_duration_s(text, default_unit=unit)
    except InputError as exc:
        raise InputError(f"{spec!r}: {what}: {exc}") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{spec!r}: {what} must be >= 0")
    return value


def _num(text: str, what: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{spec!r}: {what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise InputError(f"{spec!r}: {what} must be finite")
    return value


def _prob(text: str, what: str, spec: str) -> float:
    value = _num(text, what, spec)
    if not 0.0 <= value <= 1.0:
        raise InputError(f"{spec!r}: {what} must be in [0, 1], got {value:g}")
    return value


def parse_distribution(spec: str, *, default_unit: str = "ms") -> Distribution:
    """Parse ``KIND:ARGS`` (see the module docstring) into a distribution."""
    kind, _, rest = spec.strip().partition(":")
    kind = kind.lower()
    if kind == "empirical":
        return load_empirical(rest, spec=spec)
    args = rest.split(":") if rest else []
    if kind not in _ARITY:
        raise InputError(f"unknown distribution {kind!r} in {spec!r}: use one of {', '.join(KINDS)}")
    if len(args) not in _ARITY[kind]:
        raise InputError(f"{spec!r}: {kind} takes {' or '.join(map(str, _ARITY[kind]))} argument(s); see --help")
    if kind == "const":
        return Constant(value_s=_dur(args[0], "value", spec, default_unit))
    if kind == "normal":
        mean = _dur(args[0], "mean", spec, default_unit) if len(args) == 2 else 0.0
        sigma = _dur(args[-1], "std-dev", spec, default_unit)
        if sigma <= 0:
            raise InputError(f"{spec!r}: std-dev must be > 0 (use const: for no jitter)")
        return Normal(mu_s=mean, sigma_s=sigma)
    if kind == "lognormal":
        median = _dur(args[0], "median", spec, default_unit)
        sigma = _num(args[1], "sigma", spec)
        if median <= 0 or sigma <= 0:
            raise InputError(f"{spec!r}: median and sigma must be > 0")
        return LogNormal(median_s=median, sigma=sigma)
    if kind == "exp":
        shift = _dur(args[0], "shift", spec, default_unit) if len(args) == 2 else 0.0
        mean = _dur(args[-1], "mean", spec, default_unit)
        if mean <= 0:
            raise InputError(f"{spec!r}: mean must be > 0")
        return ShiftedExponential(shift_s=shift, mean_excess_s=mean)
    return parse_hiccup(rest, spec=spec, default_unit=default_unit)


def parse_hiccup(text: str, *, spec: str = "", default_unit: str = "ms") -> Hiccup:
    """``Q:D``: with probability Q per rank per step, an extra delay D."""
    spec = spec or text
    parts = text.split(":")
    if len(parts) != 2:
        raise InputError(f"{spec!r}: a hiccup is PROB:DELAY, e.g. 0.001:5ms")
    return Hiccup(prob=_prob(parts[0], "probability", spec), delay_s=_dur(parts[1], "delay", spec, default_unit))


def parse_stragglers(text: str) -> Stragglers:
    """``FRACTIONxFACTOR``, e.g. ``0.01x1.5``: 1% of nodes run 1.5x slower."""
    match = re.fullmatch(r"\s*([^xX]+)[xX]([^xX]+)\s*", text)
    if not match:
        raise InputError(f"{text!r}: stragglers are FRACTIONxFACTOR, e.g. 0.01x1.5")
    fraction = _prob(match.group(1), "straggler fraction", text)
    factor = _num(match.group(2), "straggler factor", text)
    if factor < 1:
        raise InputError(f"{text!r}: straggler factor must be >= 1 (a slowdown), got {factor:g}")
    return Stragglers(fraction=fraction, factor=factor)


def parse_checkpoint(text: str) -> CheckpointPolicy:
    """``STEPS:WRITE[:sync|async[:SNAPSHOT[:SLOWDOWN]]]``, e.g. ``500:8s:sync``,
    ``500:8s:async:1s:0.1`` (durations default to seconds)."""
    parts = text.split(":")
    if not 2 <= len(parts) <= 5:
        raise InputError(f"{text!r}: checkpoints are STEPS:WRITE[:sync|async[:SNAPSHOT[:SLOWDOWN]]]")
    try:
        every = int(parts[0])
    except ValueError:
        raise InputError(f"{text!r}: checkpoint interval must be a whole number of steps") from None
    if every < 1:
        raise InputError(f"{text!r}: checkpoint interval must be >= 1 step")
    mode = _CKPT_MODES.get(parts[2].lower() if len(parts) > 2 else "sync")
    if mode is None:
        raise InputError(f"{text!r}: checkpoint mode must be sync or async")
    if mode == "sync" and len(parts) > 3:
        raise InputError(f"{text!r}: snapshot time and slowdown apply to async checkpoints only")
    slowdown = _num(parts[4], "drain slowdown", text) if len(parts) > 4 else 0.0
    if not 0 <= slowdown < 10:
        raise InputError(f"{text!r}: drain slowdown must be in [0, 10)")
    return CheckpointPolicy(
        every_steps=every,
        write_s=_dur(parts[1], "write time", text, "s"),
        mode=mode,
        snapshot_s=_dur(parts[3], "snapshot time", text, "s") if len(parts) > 3 else 0.0,
        drain_slowdown=slowdown,
    )


#: Largest sample file read: a sockperf --full-log of a 10-minute run at 100k messages/s
#: is ~2 GB; a tenth of that is plenty for a distribution and bounds the memory used.
MAX_SAMPLE_BYTES = 256 * 1024 * 1024


def load_empirical(arg: str, *, spec: str = "") -> Empirical:
    """``FILE[:UNIT]``: samples, a sockperf ``--full-log`` CSV, or ``lo hi count`` lines."""
    unit = "ms"
    path_text = arg
    head, sep, tail = arg.rpartition(":")
    if sep and tail.lower() in DURATION_UNITS:
        path_text, unit = head, tail.lower()
    if not path_text:
        raise InputError(f"{spec or arg!r}: empirical needs a file: empirical:FILE[:UNIT]")
    path = Path(path_text)
    raw = read_capped(path, MAX_SAMPLE_BYTES, "empirical samples")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: empirical samples are not UTF-8 text (byte {exc.start})") from None
    if "latency(usec)" in text:
        return _sockperf_full_log(text, str(path))
    scale = parse_duration_s(1, default_unit=unit)
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            rows.append([float(v) for v in re.split(r"[\s,]+", line)])
        except ValueError:
            raise InputError(f"{path}:{lineno}: not a number: {line[:60]!r}") from None
    widths = {len(r) for r in rows}
    if widths == {1}:
        return Empirical.from_samples(np.array(rows)[:, 0] * scale, source=str(path))
    if widths == {3}:
        a = np.array(rows)
        edges = np.concatenate([a[:1, 0], a[:, 1]])
        if np.any(a[1:, 0] != a[:-1, 1]):
            raise InputError(f"{path}: histogram bins must be contiguous (each lo equals the previous hi)")
        return Empirical.from_histogram(edges * scale, a[:, 2], source=str(path))
    raise InputError(f"{path}: expected one sample per line or 'lo hi count' per line")


def _sockperf_full_log(text: str, source: str) -> Empirical:
    # Per-packet latency (RTT/2) in microseconds, read by the same reader the bench parser uses.
    samples = sockperf_full_log_samples(text, source=source) or ()
    if not samples:
        raise InputError(f"{source}: the sockperf full log has no per-packet rows")
    return Empirical.from_samples(np.array(samples) * 1e-6, source=source)
