"""Parallel layouts: the spec's own, or every one a partial/auto spec allows (docs/planner.md, "Layout search").

A layout fixes tp, pp, dp, ep, the microbatch size and count, virtual stages, ZeRO stage
and recomputation. The search space (``parallelism: auto`` or any field ``auto``):

- tp: powers of two up to the NVLink domain (gpus_per_node) that divide the heads;
- pp: powers of two with pp x virtual_stages <= layers;
- dp: what is left of the GPUs; ep must divide it;
- microbatch size 1, 2, 4, 8 (at most the sequences each replica gets);
- virtual stages 1, 2, 4, 8 (only with pp > 1);
- ZeRO 0-3; stages 2 and 3 only without pipeline parallelism (DeepSpeed and Megatron do
  not combine them with pp: gradients would be re-sharded every microbatch);
- recomputation none, selective, full.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from gpufabric.model.flops import RECOMPUTE
from gpufabric.spec.models import AUTO, Spec

MICROBATCH_SIZES = (1, 2, 4, 8)
VIRTUAL_STAGES = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One parallel layout of the training job."""

    tp: int
    pp: int
    dp: int
    ep: int
    microbatch_size: int
    microbatches: int
    virtual_stages: int
    zero_stage: int
    recompute: str

    @property
    def text(self) -> str:
        v = f" v{self.virtual_stages}" if self.virtual_stages > 1 else ""
        ep = f" ep{self.ep}" if self.ep > 1 else ""
        return (
            f"tp{self.tp} pp{self.pp}{v} dp{self.dp}{ep} mbs{self.microbatch_size} x{self.microbatches}"
            f" zero{self.zero_stage} recompute {self.recompute}"
        )


def _pow2_upto(n: int) -> list[int]:
    out, k = [], 1
    while k <= n:
        out.append(k)
        k *= 2
    return out


def _fixed(value: int | str) -> int:
    """A layout field of a spec without auto (the validator has checked it is an int)."""
    return cast(int, value)


def _choices(value: int | str, searched: Sequence[int]) -> list[int]:
    """``searched`` for an auto field, else the spec's value."""
    return list(searched) if value == AUTO else [_fixed(value)]


def spec_layout(spec: Spec) -> Layout:
    """The layout a fully fixed spec names."""
    par = spec.workload.parallelism
    return Layout(
        tp=_fixed(par.tp),
        pp=_fixed(par.pp),
        dp=_fixed(par.dp),
        ep=par.ep,
        microbatch_size=_fixed(par.microbatch_size),
        microbatches=spec.microbatches,
        virtual_stages=_fixed(par.virtual_stages),
        zero_stage=_fixed(par.zero_stage),
        recompute=spec.workload.recompute,
    )


def heads_of(spec: Spec) -> int:
    m = spec.workload.model
    return m.heads or max(1, m.hidden // 128)


def enumerate_layouts(spec: Spec) -> list[Layout]:
    """Every layout the spec allows (its fixed fields kept, its auto fields searched)."""
    if not spec.searched:
        return [spec_layout(spec)]
    par = spec.workload.parallelism
    w = spec.workload
    G, gpn = spec.num_gpus, spec.cluster.gpus_per_node
    seqs = w.global_batch_tokens // w.model.seq_len
    heads = heads_of(spec)
    tps = _choices(par.tp, [t for t in _pow2_upto(gpn) if heads % t == 0])
    pps = _choices(par.pp, _pow2_upto(w.model.layers))
    mbss = _choices(par.microbatch_size, MICROBATCH_SIZES)
    vss = _choices(par.virtual_stages, VIRTUAL_STAGES)
    zeros = _choices(par.zero_stage, (0, 1, 2, 3))
    recs = [w.recompute] if w.recompute != AUTO else list(RECOMPUTE)
    out = []
    for tp in tps:
        for pp in pps:
            if G % (tp * pp):
                continue
            dp = G // (tp * pp)
            if (par.dp != AUTO and dp != par.dp) or dp % par.ep or seqs // dp < 1:
                continue
            for mbs in mbss:
                m = par.microbatches or (seqs // dp) // mbs
                if mbs > seqs // dp or m < 1:
                    continue
                for v in vss:
                    if (v > 1 and pp == 1) or pp * v > w.model.layers:
                        continue
                    if v > 1 and m % pp:  # Megatron's interleaved schedule needs microbatches divisible by pp
                        continue
                    for z in zeros:
                        if z >= 2 and pp > 1 and par.zero_stage == AUTO:
                            continue
                        for rc in recs:
                            out.append(
                                Layout(
                                    tp=tp,
                                    pp=pp,
                                    dp=dp,
                                    ep=par.ep,
                                    microbatch_size=mbs,
                                    microbatches=m,
                                    virtual_stages=v,
                                    zero_stage=z,
                                    recompute=rc,
                                )
                            )
    return out
