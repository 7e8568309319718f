"""Charts as inline SVG strings (matplotlib, Agg backend): nothing external, nothing fetched.

Each SVG gets its element ids prefixed, because several matplotlib SVGs inlined in one
page would otherwise share ids (``figure_1``, clip paths) and clip each other.

Titles and legend labels carry test, host and fio job names: every text is drawn with
matplotlib's math text off (a ``$RANK_$SIZE`` job name is a string, not a formula to parse
and fail on) and cut to ``LABEL_CHARS`` characters (a 20,000-character host name would
otherwise be laid out, measured and written into the SVG in full).
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence

import numpy as np

from gpufabric.report.series import Series

#: Longest title or legend label drawn, in characters; the tables carry the full names.
LABEL_CHARS = 80

#: Points kept per CDF curve: a 1M-sample CDF drawn point by point would be a 50 MB SVG.
CDF_POINTS = 400


def _figure(title: str, xlabel: str, ylabel: str):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    # 10.5 x 4 in at 96 dpi = 1008 x 384 px: fits the 1100 px page at 1280 px with the legend outside.
    fig = Figure(figsize=(10.5, 4.0), dpi=96, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def _label(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 3] + "..."


def _svg(fig, key: str) -> str:
    import matplotlib
    from matplotlib.text import Text

    for artist in fig.findobj(Text):  # title, axis labels, legend entries: the data-named texts
        artist.set_parse_math(False)
        artist.set_text(_label(artist.get_text()))
    if len(key) > 40:  # ids repeat the prefix hundreds of times: keep it short and still unique
        key = key[:32] + hashlib.sha256(key.encode()).hexdigest()[:8]
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": key}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: not allowed inside HTML
    # The RDF metadata block names purl.org/creativecommons URIs and a timestamp: noise, and not reproducible.
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    prefix = re.sub(r"\W", "_", key) + "_"
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', text)
    return text


def _plain_log_ticks(axis) -> None:
    """'12', '15', '20' on a log axis instead of matplotlib's '1.2 x 10^1' when the range is narrow."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    lo, hi = axis.get_view_interval()
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    if lo > 0 and hi / lo < 20:
        axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        axis.set_minor_formatter(NullFormatter())


def _legend(ax, n: int) -> None:
    """Outside the axes, on the right: a legend inside covered the curves (issue 16)."""
    if n:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


def _time_ticks(axis, unit: str) -> None:
    """Tick labels like '500 us', '1.2 ms', '3 s' for an axis whose data are in ``unit``."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from gpufabric.units import format_duration, seconds_per

    scale = seconds_per(unit)
    if scale is None:
        return
    if axis.get_scale() == "log":
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 100 us, 200 us, 500 us, 1 ms ...
    axis.set_major_formatter(FuncFormatter(lambda v, _: format_duration(v * scale) if v > 0 else "0"))
    lo, hi = axis.get_view_interval()
    if lo > 0 and hi / lo < 20:
        axis.set_minor_formatter(FuncFormatter(lambda v, _: format_duration(v * scale)))
    else:
        axis.set_minor_formatter(NullFormatter())


def _size_ticks(axis) -> None:
    """Message sizes as 1 KiB ... 1 GiB on a log2 axis, every other power of two labelled when crowded."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    from gpufabric.units import format_size

    lo, hi = axis.get_view_interval()
    powers = [2.0**k for k in range(max(0, int(np.floor(np.log2(max(lo, 1))))), int(np.ceil(np.log2(max(hi, 2)))) + 1)]
    step = max(1, len(powers) // 10)
    axis.set_major_locator(FixedLocator(powers[::step]))
    axis.set_major_formatter(FuncFormatter(lambda v, _: format_size(v)))
    axis.set_minor_formatter(NullFormatter())


def sweep_chart(test: str, bands, expected: Sequence[tuple[str, float]] = ()) -> str:
    """busbw against message size for one test: median of repeats as a line, min-max as a band,
    and each expected value (SLO from the plan's prediction) as a dashed line."""
    fig, ax = _figure(f"{test}: bus bandwidth", "message size", "busbw (GB/s)")
    for b in bands:
        (line,) = ax.plot(
            b.x,
            b.median,
            marker="o",
            markersize=3,
            label=f"{b.label} median" + (f" of {b.repeats}" if b.repeats > 1 else ""),
        )
        if b.repeats > 1:
            ax.fill_between(b.x, b.lo, b.hi, color=line.get_color(), alpha=0.2, linewidth=0, label=f"{b.label} min-max")
    for label, value in expected:
        ax.axhline(value, linestyle="--", color="#555", linewidth=1, label=label)
    ax.set_xscale("log", base=2)
    _size_ticks(ax.xaxis)
    _legend(ax, len(bands) + len(expected))
    return _svg(fig, "sweep_" + test)


def percentile_band_chart(test: str, bands) -> str:
    """Latency against percentile on a 'nines' axis for one test, repeats as median and min-max band."""
    unit = bands[0].unit if bands else ""
    fig, ax = _figure(f"{test}: latency percentiles", "percentile", "latency")
    ticks: set[float] = set()
    for b in bands:
        nines = [-np.log10(1 - p / 100) for p in b.x]
        (line,) = ax.plot(
            nines,
            b.median,
            marker="o",
            markersize=3,
            label=f"{b.label} median" + (f" of {b.repeats}" if b.repeats > 1 else ""),
        )
        if b.repeats > 1:
            ax.fill_between(
                nines, b.lo, b.hi, color=line.get_color(), alpha=0.2, linewidth=0, label=f"{b.label} min-max"
            )
        ticks.update(b.x)
    positions = sorted(ticks)
    ax.set_xticks([-np.log10(1 - p / 100) for p in positions], [f"p{p:g}" for p in positions])
    ax.set_yscale("log")
    _time_ticks(ax.yaxis, unit)
    _legend(ax, len(bands))
    return _svg(fig, "pctband_" + test)


def busbw_chart(series: Sequence[Series]) -> str:
    fig, ax = _figure("Bus bandwidth vs message size", "message size (bytes)", "busbw (GB/s, 1e9 B/s)")
    for s in series:
        ax.plot(s.x, s.y, marker="o", markersize=3, label=s.label)
    ax.set_xscale("log", base=2)
    _legend(ax, len(series))
    return _svg(fig, "busbw")


def cdf_chart(curves: Sequence[tuple[str, str, Sequence[float]]], *, title: str = "Latency CDF") -> str:
    """Empirical CDFs, x log-scaled: tails of latency distributions span decades."""
    fig, ax = _figure(title, "latency", "fraction of samples <=")
    for label, _unit, samples in curves:
        x = np.sort(np.asarray(samples, dtype=float))
        x = x[np.isfinite(x)]
        if x.size == 0:
            continue
        # quantiles on a grid dense in the tail (1 - 10^-k), so p99.9 is visible, not just the body
        q = np.unique(
            np.concatenate([np.linspace(0, 0.99, CDF_POINTS // 2), 1 - np.logspace(-2, -6, CDF_POINTS // 2), [1.0]])
        )
        idx = np.minimum((q * (x.size - 1)).round().astype(int), x.size - 1)
        ax.step(x[idx], q, where="post", label=f"{label} (n={x.size})")
    ax.set_xscale("log")
    _plain_log_ticks(ax.xaxis)
    if curves:
        _time_ticks(ax.xaxis, curves[0][1])
    ax.set_ylim(0, 1.01)
    _legend(ax, len(curves))
    return _svg(fig, "cdf" if title == "Latency CDF" else "cdf_" + title)


def percentile_chart(series: Sequence[Series], *, title: str = "Completion latency percentiles") -> str:
    """Latency against percentile on a 'nines' axis: x = -log10(1 - p/100), so p90, p99, p99.9 are evenly spaced."""
    fig, ax = _figure(title, "percentile", "latency" + (f" ({series[0].unit})" if series else ""))
    ticks: set[float] = set()
    for s in series:
        nines = [-np.log10(1 - p / 100) for p in s.x]
        ax.plot(nines, s.y, marker="o", markersize=3, label=s.label)
        ticks.update(s.x)
    positions = sorted(ticks)
    ax.set_xticks([-np.log10(1 - p / 100) for p in positions], [f"p{p:g}" for p in positions])
    ax.set_yscale("log")
    _plain_log_ticks(ax.yaxis)
    _legend(ax, len(series))
    return _svg(fig, "pct_" + title)
