"""``gpufabric bench inference``: the serving plan's KV transfers and weight load, measured.

Composes two existing probes rather than adding a worker: the ``collectives`` probe with
``send_recv`` at the KV message sizes the model implies (one per-layer message of one TP
rank for the mean and the longest prompt: ``prompt x kv_bytes_per_token / (tp x
layers)``), and the ``checkpoint`` probe's safetensors write + cache-defeated read of a
scaled-down weight file. Each stores its run like every probe run; this module derives
the sizes and judges the measured p99 per-message time against the model's prediction
for the plan's fabric (the SLO from the plan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpufabric.model import inference as m
from gpufabric.model.collectives import collective_times
from gpufabric.results.records import Direction, Outcome, Verdict

if TYPE_CHECKING:
    from gpufabric.bench.probes.outcomes import CollectiveRow

#: Allowance on the model's mean per-message time before a transfer fails its SLO [U]:
#: the catalog's per-message jitter on RDMA fabrics (2-3 us sigma) keeps a 1 MiB message's
#: p99 within 1.2x of its ~40 us mean; 1.5x leaves room for host noise. TCP's rare
#: retransmission hiccups are a tail the simulator judges, not this per-message check.
KV_SLO_FACTOR = 1.5


@dataclass(frozen=True, slots=True, kw_only=True)
class KvProbeSize:
    """One KV message size to measure and its model time on the plan's fabric."""

    label: str
    prompt_tokens: int
    size_bytes: int
    model_time_us: float


def kv_probe_sizes(spec: Any, catalog: Any, *, fabric: str, tp: int) -> list[KvProbeSize]:
    """Per-layer, per-rank KV messages for the mean and the longest prompt of ``spec``."""
    shape = m.shape_from_spec(spec.workload.model)
    prompt = spec.workload.traffic.prompt_tokens
    longest = prompt.max if prompt.max is not None else 8 * prompt.mean
    if prompt.cv == 0:
        longest = prompt.mean
    links = m.serving_links(catalog, spec.cluster.gpu, fabric, spec.cluster.gpus_per_node)
    out = []
    for label, tokens in (("mean prompt", round(prompt.mean)), ("longest prompt", round(longest))):
        size = max(1, round(tokens * shape.kv_bytes_per_token / (tp * shape.layers)))
        t_us = float(collective_times("send_recv", size, 2, tp, links).time_us)
        out.append(KvProbeSize(label=label, prompt_tokens=int(tokens), size_bytes=int(size), model_time_us=t_us))
    return out


def kv_verdicts(sizes: list[KvProbeSize], rows: Sequence[CollectiveRow], *, fabric: str) -> list[Verdict]:
    """Measured p99 per-message time against ``KV_SLO_FACTOR`` x the model's time on ``fabric``."""
    verdicts = []
    for probe in sizes:
        # The probe rounds sizes down to whole elements; take the closest measured size.
        row = min(rows, key=lambda r: abs(r.size_bytes - probe.size_bytes), default=None)
        limit = KV_SLO_FACTOR * probe.model_time_us
        if row is None:
            verdicts.append(
                Verdict(
                    test=f"kv {probe.label}",
                    metric="time_p99_us",
                    host="cluster",
                    outcome=Outcome.failed,
                    measured=None,
                    expected=limit,
                    direction=Direction.lower,
                    margin=None,
                    reason="no measurement",
                    unit="us",
                )
            )
            continue
        measured = row.time_p99_us
        ok = measured <= limit
        verdicts.append(
            Verdict(
                test=f"kv {probe.label} ({probe.prompt_tokens} tokens, {probe.size_bytes} B/message)",
                metric="time_p99_us",
                host="cluster",
                outcome=Outcome.passed if ok else Outcome.failed,
                measured=measured,
                expected=limit,
                direction=Direction.lower,
                margin=(limit - measured) / limit,
                unit="us",
                reason=f"p99 {measured:.1f} us {'<=' if ok else '>'} {limit:.1f} us ({KV_SLO_FACTOR} x the {fabric} model)",
                source=f"gpufabric plan: model/inference.py kv transfer on {fabric}",
            )
        )
    return verdicts
