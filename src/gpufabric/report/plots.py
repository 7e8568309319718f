"""Charts as inline SVG strings (matplotlib, Agg backend): nothing external, nothing fetched.

Each SVG gets its element ids prefixed, because several matplotlib SVGs inlined in one
page would otherwise share ids (``figure_1``, clip paths) and clip each other.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import numpy as np

from gpufabric.report.series import Series

#: Points kept per CDF curve: a 1M-sample CDF drawn point by point would be a 50 MB SVG.
CDF_POINTS = 400


def _figure(title: str, xlabel: str, ylabel: str):  # noqa: ANN202
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    fig = Figure(figsize=(7.5, 3.8), dpi=96, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def _svg(fig, key: str) -> str:  # noqa: ANN001
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": key}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    text = text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: not allowed inside HTML
    # The RDF metadata block names purl.org/creativecommons URIs and a timestamp: noise, and not reproducible.
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    prefix = re.sub(r"\W", "_", key) + "_"
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', text)
    return text


def _plain_log_ticks(axis) -> None:  # noqa: ANN001
    """'12', '15', '20' on a log axis instead of matplotlib's '1.2 x 10^1' when the range is narrow."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    lo, hi = axis.get_view_interval()
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    if lo > 0 and hi / lo < 20:
        axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        axis.set_minor_formatter(NullFormatter())


def _legend(ax, n: int) -> None:  # noqa: ANN001
    if n:
        ax.legend(fontsize=8, loc="best")


def busbw_chart(series: Sequence[Series]) -> str:
    fig, ax = _figure("Bus bandwidth vs message size", "message size (bytes)", "busbw (GB/s, 1e9 B/s)")
    for s in series:
        ax.plot(s.x, s.y, marker="o", markersize=3, label=s.label)
    ax.set_xscale("log", base=2)
    _legend(ax, len(series))
    return _svg(fig, "busbw")


def cdf_chart(curves: Sequence[tuple[str, str, Sequence[float]]]) -> str:
    """Empirical CDFs, x log-scaled: tails of latency distributions span decades."""
    fig, ax = _figure("Latency CDF", "latency" + (f" ({curves[0][1]})" if curves else ""), "fraction of samples <=")
    for label, _unit, samples in curves:
        x = np.sort(np.asarray(samples, dtype=float))
        x = x[np.isfinite(x)]
        if x.size == 0:
            continue
        # quantiles on a grid dense in the tail (1 - 10^-k), so p99.9 is visible, not just the body
        q = np.unique(np.concatenate([np.linspace(0, 0.99, CDF_POINTS // 2), 1 - np.logspace(-2, -6, CDF_POINTS // 2), [1.0]]))
        idx = np.minimum((q * (x.size - 1)).round().astype(int), x.size - 1)
        ax.step(x[idx], q, where="post", label=f"{label} (n={x.size})")
    ax.set_xscale("log")
    _plain_log_ticks(ax.xaxis)
    ax.set_ylim(0, 1.01)
    _legend(ax, len(curves))
    return _svg(fig, "cdf")


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
