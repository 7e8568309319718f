"""Parallel layouts: the spec's own, or every one a partial/auto spec allows (docs/planner.md, "Layout search").

A layout fixes tp, pp, dp, ep, the microbatch size and count, virtual stages, ZeRO stage
and recomputation. The search space (``parallelism: auto`` or any field ``auto``):

- tp: powers of two up to the NVLink domain (the catalog's ``nvlink_domain``: 72 GPUs in a
  GB200 NVL72 rack of 4-GPU trays, else gpus_per_node) that divide the heads;
- cp: powers of two that divide the sequence and leave each rank at
  least ``MIN_CP_TOKENS`` of it (ring attention hides its key/value passes behind the
  attention of a chunk only when chunks are long);
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

from gpufabric.errors import InputError
from gpufabric.model.flops import RECOMPUTE
from gpufabric.spec.loader import Located
from gpufabric.spec.models import AUTO, Spec

MICROBATCH_SIZES = (1, 2, 4, 8)
VIRTUAL_STAGES = (1, 2, 4, 8)
#: Shortest sequence slice per context-parallel rank the search considers [U, estimate:
#: Megatron's and NeMo's long-context recipes keep 4k-16k tokens per CP rank].
MIN_CP_TOKENS = 4096


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
    cp: int = 1

    @property
    def num_gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def text(self) -> str:
        v = f" v{self.virtual_stages}" if self.virtual_stages > 1 else ""
        ep = f" ep{self.ep}" if self.ep > 1 else ""
        cp = f" cp{self.cp}" if self.cp > 1 else ""
        return (
            f"tp{self.tp}{cp} pp{self.pp}{v} dp{self.dp}{ep} mbs{self.microbatch_size} x{self.microbatches}"
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
        cp=_fixed(par.cp),
    )


def check_nvlink_domain(spec: Spec, domain: int, located: Located | None = None) -> None:
    """A fixed tp must fit in the NVLink domain unless the spec allows TP across it.

    Raises:
        SpecError: tp exceeds the domain (``domain``: plan.table.nvlink_domain), located in
            the spec file when ``located`` is given; InputError without.
    """
    par = spec.workload.parallelism
    if par.tp == AUTO or par.allow_cross_node_tp:
        return
    tp = _fixed(par.tp)
    tiles = domain % tp == 0 or spec.num_gpus <= domain
    if tp <= domain and tiles:
        return
    what = "exceeds" if tp > domain else "does not tile (some groups would straddle two domains)"
    message = f"tp = {tp} {what} the NVLink domain of {domain} GPUs ({spec.cluster.gpu}, {spec.cluster.gpus_per_node} per node)"
    fix = "reduce tp or set workload.parallelism.allow_cross_node_tp: true"
    if located is not None:
        raise located.error(("workload", "parallelism", "tp"), message, fix)
    raise InputError(f"workload.parallelism.{message}; {fix}")


def heads_of(spec: Spec) -> int:
    m = spec.workload.model
    return m.heads or max(1, m.hidden // 128)


def enumerate_layouts(spec: Spec, nvlink_domain: int | None = None) -> list[Layout]:
    """Every layout the spec allows (its fixed fields kept, its auto fields searched).

    ``nvlink_domain``: GPUs of one NVLink domain (default gpus_per_node).
    """
    if not spec.searched:
        return [spec_layout(spec)]
    par = spec.workload.parallelism
    w = spec.workload
    G = spec.num_gpus
    dom = nvlink_domain or spec.cluster.gpus_per_node
    seqs = w.global_batch_tokens // w.model.seq_len
    heads = heads_of(spec)
    # A TP group must tile the NVLink domain (72 = 9 x 8: TP 16 would straddle two racks).
    tps = _choices(par.tp, [t for t in _pow2_upto(dom) if heads % t == 0 and (dom % t == 0 or dom >= G)])
    s = w.model.seq_len
    cps = _choices(par.cp, [c for c in _pow2_upto(max(1, s // MIN_CP_TOKENS)) if s % c == 0])
    pps = _choices(par.pp, _pow2_upto(w.model.layers))
    mbss = _choices(par.microbatch_size, MICROBATCH_SIZES)
    vss = _choices(par.virtual_stages, VIRTUAL_STAGES)
    zeros = _choices(par.zero_stage, (0, 1, 2, 3))
    recs = [w.recompute] if w.recompute != AUTO else list(RECOMPUTE)
    out = []
    for tp, cp in ((t, c) for t in tps for c in cps):
        for pp in pps:
            if G % (tp * cp * pp):
                continue
            dp = G // (tp * cp * pp)
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
                                    cp=cp,
                                )
                            )
    return out
