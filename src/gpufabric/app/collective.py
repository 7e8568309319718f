"""The outcome of ``predict collective``: one prediction of what nccl-tests reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpufabric.app.requests import PredictCollectiveRequest
    from gpufabric.model.collectives import CollectivePrediction


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveOutcome:
    """The request (the cluster it names, what was forced) and the model's prediction."""

    kind: str = "collective"
    request: PredictCollectiveRequest
    prediction: CollectivePrediction
    exit_code: int = 0
    """A prediction always succeeds; bad input is an ``InputError`` (exit 2) before it."""

    def to_json(self) -> dict[str, Any]:
        """The JSON document (``cli.output.print_json`` adds the ``schema_version`` envelope)."""
        p = self.prediction
        return {
            "op": p.op,
            "bytes": p.size_bytes,
            "ranks": p.num_ranks,
            "algorithm": p.algorithm,
            "protocol": p.protocol,
            "time_us": p.time_us,
            "algbw_gbps": p.algbw_gbps,
            "busbw_gbps": p.busbw_gbps,
            "gpu": self.request.gpu,
            "fabric": self.request.fabric,
            "switch_hops": p.switch_hops,
            "timing": p.timing,
            "sharp": p.sharp,
            "harness": p.harness,
            "ceiling_algbw_gbps": p.ceiling_algbw_gbps,
            "breakdown": {"launch_us": p.launch_us, "latency_us": p.latency_us, "bandwidth_us": p.bandwidth_us},
        }
