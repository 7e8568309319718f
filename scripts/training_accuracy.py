"""Training throughput: the planner against published per-run figures (run from the repo root).

    PYTHONPATH=src python scripts/training_accuracy.py            # print the table
    PYTHONPATH=src python scripts/training_accuracy.py --write    # rewrite it in docs/accuracy.md
    PYTHONPATH=src python scripts/training_accuracy.py --fit      # refit FRAMEWORK_EFFICIENCY

Every row of ``ROWS`` is a published training run: its model, GPUs, layout and the
throughput it reached. Each row is predicted twice: with no throughput figure (the
compute-efficiency model, model.efficiency) and anchored on another row of the same
table (``measured_at`` with that row's layout, batch and sequence). The figure is read
as the step time it implies (``step = F x batch / (GPUs x TFLOP/s)`` in the row's own
FLOP convention), so conventions never mix. Rows marked *fit* set
``FRAMEWORK_EFFICIENCY`` (``fit()``); the rest are held out. NVIDIA NeMo's performance
summaries, the Megatron-Bridge performance archive and torchtitan's performance.md are
not used at all: they judge the model from outside. tests/model/test_training_accuracy.py
fails when docs/accuracy.md drifts from this script or a bar breaks. An experiment
script, not library code.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpufabric.catalog import Catalog
from gpufabric.model import efficiency
from gpufabric.model.flops import RECOMPUTE, flops_per_token
from gpufabric.plan import evaluate_candidates
from gpufabric.spec.models import Spec

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "accuracy.md"
BEGIN = "<!-- training-accuracy:begin (scripts/training_accuracy.py --write) -->"
END = "<!-- training-accuracy:end -->"


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One published run: shape, layout, and its throughput in its own convention."""

    table: str
    name: str
    split: str  # fit | held-out
    gpu: str
    fabric: str
    params: float
    layers: int
    hidden: int
    heads: int
    seq_len: int
    batch_seqs: int
    tp: int
    pp: int
    dp: int
    convention: str  # megatron | 6pt
    counts_recompute: bool  # the figure's FLOPs include the recomputation (hardware FLOPs)
    tflops: float = 0.0  # published TFLOP/s per GPU (MFU x peak where a MFU was published)
    step_s: float | None = None  # published iteration time, where the source gives it instead
    cp: int = 1
    kv_heads: int | None = None
    ffn_hidden: int | None = None
    gated: bool = False
    dropout: bool = True
    vocab: int = 51200
    virtual_stages: int = 1
    microbatch_size: int = 1
    zero_stage: int = 0
    recompute: str = "full"
    sequence_parallel: bool = False
    precision: str = "bf16"
    flash_attention: bool = True
    attention_counted: float = 1.0  # share of the 12 L h s attention term the figure counts (0.5: causal)
    placement: str = "fragmented"  # options.placement of the run's allocation (the planner's default unless sourced)
    note: str = ""

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def batch_tokens(self) -> int:
        return self.batch_seqs * self.seq_len


def _gpt(L: int, h: int, V: int = 51200) -> float:
    """GPT parameters as the planner reads them: 12 L h^2 in the layers plus untied V h embeddings."""
    return 12.0 * L * h * h + 2.0 * V * h


# Narayanan et al. SC'21 (arXiv:2104.04473) Table 1: GPT weak scaling on Selene (DGX A100
# 80GB, 8 x HDR 200G per node), mixed precision, sequence 2048, full recomputation, FLOPs by
# eq. 3 (hardware FLOPs, recomputation counted). Microbatch size and interleaving are not in
# the table: 1 and none assumed.
_N = dict(
    table="Narayanan SC'21 Table 1",
    gpu="a100-sxm",
    fabric="ib-hdr",
    seq_len=2048,
    convention="megatron",
    counts_recompute=True,
    flash_attention=False,
)
NARAYANAN = [
    Row(
        name="1.7B",
        split="fit",
        params=_gpt(24, 2304),
        layers=24,
        hidden=2304,
        heads=24,
        batch_seqs=512,
        tp=1,
        pp=1,
        dp=32,
        tflops=137,
        **_N,
    ),
    Row(
        name="3.6B",
        split="held-out",
        params=_gpt(30, 3072),
        layers=30,
        hidden=3072,
        heads=32,
        batch_seqs=512,
        tp=2,
        pp=1,
        dp=32,
        tflops=138,
        **_N,
    ),
    Row(
        name="7.5B",
        split="fit",
        params=_gpt(36, 4096),
        layers=36,
        hidden=4096,
        heads=32,
        batch_seqs=512,
        tp=4,
        pp=1,
        dp=32,
        tflops=142,
        **_N,
    ),
    Row(
        name="18.4B",
        split="held-out",
        params=_gpt(40, 6144),
        layers=40,
        hidden=6144,
        heads=48,
        batch_seqs=1024,
        tp=8,
        pp=1,
        dp=32,
        tflops=135,
        **_N,
    ),
    Row(
        name="39.1B",
        split="fit",
        params=_gpt(48, 8192),
        layers=48,
        hidden=8192,
        heads=64,
        batch_seqs=1536,
        tp=8,
        pp=2,
        dp=32,
        tflops=138,
        **_N,
    ),
    Row(
        name="76.1B",
        split="held-out",
        params=_gpt(60, 10240),
        layers=60,
        hidden=10240,
        heads=80,
        batch_seqs=1792,
        tp=8,
        pp=4,
        dp=32,
        tflops=140,
        **_N,
    ),
    Row(
        name="145.6B",
        split="fit",
        params=_gpt(80, 12288),
        layers=80,
        hidden=12288,
        heads=96,
        batch_seqs=2304,
        tp=8,
        pp=8,
        dp=24,
        tflops=148,
        **_N,
    ),
    Row(
        name="310.1B",
        split="held-out",
        params=_gpt(96, 16384),
        layers=96,
        hidden=16384,
        heads=128,
        batch_seqs=2160,
        tp=8,
        pp=16,
        dp=15,
        tflops=155,
        **_N,
    ),
    Row(
        name="529.6B",
        split="fit",
        params=_gpt(105, 20480),
        layers=105,
        hidden=20480,
        heads=128,
        batch_seqs=2520,
        tp=8,
        pp=35,
        dp=9,
        tflops=163,
        **_N,
    ),
    Row(
        name="1008B",
        split="held-out",
        params=_gpt(128, 25600),
        layers=128,
        hidden=25600,
        heads=160,
        batch_seqs=3072,
        tp=8,
        pp=64,
        dp=6,
        tflops=163,
        **_N,
    ),
]

# Korthikanti et al. 2022 (arXiv:2205.05198) Tables 3 and 5: the same GPT family on Selene,
# iteration times with full recomputation and with sequence parallelism + selective
# recomputation. Microbatch and interleaving as Calculon's validation configs
# (calculon-ai/calculon validation/seqsel/tab5/*.json [S]): 22B one microbatch of 4, 175B
# and 530B 3 virtual stages.
_K = dict(
    table="Korthikanti 2022 Table 5",
    gpu="a100-sxm",
    fabric="ib-hdr",
    seq_len=2048,
    convention="megatron",
    counts_recompute=False,
    flash_attention=False,
)
_K22 = dict(params=_gpt(48, 6144), layers=48, hidden=6144, heads=64, batch_seqs=4, microbatch_size=4, tp=8, pp=1, dp=1)
_K175 = dict(
    params=_gpt(96, 12288), layers=96, hidden=12288, heads=96, batch_seqs=64, tp=8, pp=8, dp=1, virtual_stages=3
)
_K530 = dict(
    params=_gpt(105, 20480), layers=105, hidden=20480, heads=128, batch_seqs=280, tp=8, pp=35, dp=1, virtual_stages=3
)
_K1T = dict(params=_gpt(128, 25600), layers=128, hidden=25600, heads=160, batch_seqs=512, tp=8, pp=64, dp=1)
_SEQSEL = dict(recompute="selective", sequence_parallel=True)
KORTHIKANTI = [
    Row(name="22B full", split="held-out", step_s=1.42, **_K22, **_K),
    Row(name="22B seq+sel", split="held-out", step_s=1.10, **_K22, **_K, **_SEQSEL),
    Row(name="175B full", split="held-out", step_s=18.13, **_K175, **_K),
    Row(name="175B seq+sel", split="held-out", step_s=13.75, **_K175, **_K, **_SEQSEL),
    Row(name="530B full", split="held-out", step_s=49.05, **_K530, **_K),
    Row(name="530B seq+sel", split="held-out", step_s=37.83, **_K530, **_K, **_SEQSEL),
    Row(name="1T full", split="held-out", step_s=94.42, **_K1T, **_K),
    Row(name="1T seq+sel", split="held-out", step_s=71.49, **_K1T, **_K, **_SEQSEL),
]

# Dubey et al. 2024, "The Llama 3 Herd of Models" (arXiv:2407.21783), Table 4: Llama 3 405B
# on H100 80GB over RoCE, BF16, 16M-token batches, no recomputation at 8k; TFLOP/s per GPU
# (attention counted, as the 131k row requires). Interleaving depth 4 assumed (not given).
_L = dict(
    table="Llama 3 Table 4",
    gpu="h100-sxm",
    fabric="roce-400g",
    params=405e9,
    layers=126,
    hidden=16384,
    heads=128,
    kv_heads=8,
    ffn_hidden=53248,
    gated=True,
    dropout=False,
    vocab=128256,
    convention="megatron",
    counts_recompute=False,
    attention_counted=0.5,
    recompute="none",
    sequence_parallel=True,
    virtual_stages=4,
    zero_stage=1,
    tp=8,
    pp=16,
    # Meta places its jobs with a network-topology-aware scheduler (Dubey et al. 2024,
    # arXiv:2407.21783, sec. 3.3.1), as examples/llama3-405b-16k.yaml and
    # tests/plan/test_throughput.py's Table 4 rows do.
    placement="contiguous",
)
LLAMA3 = [
    Row(name="8,192 GPUs", split="fit", seq_len=8192, batch_seqs=2048, dp=64, tflops=430, **_L),
    Row(name="16,384 GPUs", split="held-out", seq_len=8192, batch_seqs=2048, dp=128, tflops=400, **_L),
    Row(name="16,384 GPUs cp16 131k", split="held-out", seq_len=131072, batch_seqs=128, cp=16, dp=8, tflops=380, **_L),
]

ROWS = [*NARAYANAN, *KORTHIKANTI, *LLAMA3]


def spec_of(row: Row, *, anchor: Row | None = None) -> Spec:
    """The row as a spec: its layout fixed; no throughput, or ``anchor``'s figure at its own point."""
    gpn = 8
    workload: dict[str, Any] = {
        "model": {
            "params": row.params,
            "layers": row.layers,
            "hidden": row.hidden,
            "heads": row.heads,
            "seq_len": row.seq_len,
            "vocab": row.vocab,
            "kv_heads": row.kv_heads,
            "ffn_hidden": row.ffn_hidden,
            "gated_mlp": row.gated,
            "dropout": row.dropout,
        },
        "parallelism": {
            "tp": row.tp,
            "cp": row.cp,
            "pp": row.pp,
            "dp": row.dp,
            "virtual_stages": row.virtual_stages,
            "microbatch_size": row.microbatch_size,
            "zero_stage": row.zero_stage,
            "sequence_parallel": row.sequence_parallel,
        },
        "recompute": row.recompute,
        "flash_attention": row.flash_attention,
        "global_batch_tokens": row.batch_tokens,
        "precision": row.precision,
        "total_tokens": 1e12,
    }
    if anchor is not None:
        workload["throughput"] = {
            "tflops_per_gpu": tool_tflops(anchor),
            "flops": "megatron",
            "measured_at": {
                "gpus": anchor.gpus,
                "tp": anchor.tp,
                "cp": anchor.cp,
                "pp": anchor.pp,
                "dp": anchor.dp,
                "virtual_stages": anchor.virtual_stages,
                "microbatch_size": anchor.microbatch_size,
                "zero_stage": anchor.zero_stage,
                "recompute": anchor.recompute,
                "fabric": anchor.fabric,
                "global_batch_tokens": anchor.batch_tokens,
                "seq_len": anchor.seq_len,
            },
        }
    return Spec.model_validate(
        {
            "name": "row",
            "cluster": {"nodes": row.gpus // gpn, "gpus_per_node": gpn, "gpu": row.gpu},
            "workload": workload,
            "options": {
                "fabrics": [row.fabric],
                "storage": ["local-nvme"],
                "oversubscription": [1],
                "placement": row.placement,
            },
        }
    )


def _flops_per_token(row: Row, *, convention: str, recompute: str) -> float:
    return float(
        flops_per_token(
            params_active=row.params,
            layers=row.layers,
            hidden=row.hidden,
            seq_len=row.seq_len,
            vocab=row.vocab,
            recompute=RECOMPUTE.index(recompute),
            convention=convention,
        )
    )


def published_step_s(row: Row) -> float:
    """The step time the published figure implies, in the row's own convention (or as published)."""
    if row.step_s is not None:
        return row.step_s
    rc = row.recompute if row.counts_recompute else "none"
    f = _flops_per_token(row, convention=row.convention, recompute=rc)
    if row.convention == "megatron":  # the attention term the figure leaves out (causal counting)
        f -= (1.0 - row.attention_counted) * 12.0 * row.layers * row.hidden * row.seq_len
    return f * row.batch_tokens / (row.gpus * row.tflops * 1e12)


def published_tflops(row: Row) -> float:
    """The published throughput in the row's convention (from its iteration time where given)."""
    if row.step_s is None:
        return row.tflops
    rc = row.recompute if row.counts_recompute else "none"
    f = _flops_per_token(row, convention=row.convention, recompute=rc)
    return f * row.batch_tokens / (row.gpus * row.step_s * 1e12)


def tool_tflops(row: Row) -> float:
    """The row's figure in the planner's megatron convention (its recomputation counted): same step time."""
    return (
        _flops_per_token(row, convention="megatron", recompute=row.recompute)
        * row.batch_tokens
        / (row.gpus * published_step_s(row) * 1e12)
    )


def predicted_step_s(row: Row, catalog: Catalog, *, anchor: Row | None = None) -> float:
    return evaluate_candidates(spec_of(row, anchor=anchor), catalog)[0].step_time_s


def error_pct(row: Row, step_s: float) -> float:
    """Throughput error: predicted / published - 1 (a shorter step is a higher throughput)."""
    return (published_step_s(row) / step_s - 1.0) * 100.0


def anchor_for(row: Row) -> Row | None:
    """The row's anchor: the nearest other row of the same table and model (the previous one;
    the first takes the next); None when the table has no other row of the model
    (``measured_at`` names a layout of the spec's own model)."""
    model = [r for r in ROWS if r.table == row.table and r.params == row.params]
    same = [r for r in model if r.seq_len == row.seq_len]
    same = same if len(same) > 1 else model  # the same sequence where the table has it
    if len(same) < 2:
        return None
    i = same.index(row)
    return same[i - 1] if i else same[1]


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    row: Row
    model_pct: float
    anchored_pct: float | None
    anchor: Row | None


def results(catalog: Catalog) -> list[Result]:
    out = []
    for row in ROWS:
        a = anchor_for(row)
        out.append(
            Result(
                row=row,
                model_pct=error_pct(row, predicted_step_s(row, catalog)),
                anchored_pct=None if a is None else error_pct(row, predicted_step_s(row, catalog, anchor=a)),
                anchor=a,
            )
        )
    return out


def summary(res: list[Result]) -> dict[str, dict[str, float]]:
    out = {}
    for split in ("fit", "held-out"):
        sel = [r for r in res if r.row.split == split]
        anch = [abs(r.anchored_pct) for r in sel if r.anchored_pct is not None]
        out[split] = {
            "n": len(sel),
            "model_median": statistics.median(abs(r.model_pct) for r in sel),
            "model_max": max(abs(r.model_pct) for r in sel),
            "anchored_n": len(anch),
            "anchored_median": statistics.median(anch) if anch else 0.0,
            "anchored_max": max(anch) if anch else 0.0,
        }
    return out


#: The grids fit() searches: FRAMEWORK_EFFICIENCY, ELEMENTWISE_PASSES, SOFTMAX_PASSES.
ETA_GRID = tuple(round(0.70 + 0.01 * k, 2) for k in range(31))
ELEMENTWISE_GRID = (1.0, 2.0, 3.0, 4.0, 6.0)
SOFTMAX_GRID = (2.0, 4.0, 6.0, 8.0)


def fit_error(catalog: Catalog, eta: float, elementwise: float, softmax: float) -> float:
    """Median |error| of the fit rows without a figure under these constants."""
    saved = (efficiency.FRAMEWORK_EFFICIENCY, efficiency.ELEMENTWISE_PASSES, efficiency.SOFTMAX_PASSES)
    try:
        efficiency.FRAMEWORK_EFFICIENCY, efficiency.ELEMENTWISE_PASSES, efficiency.SOFTMAX_PASSES = (
            eta,
            elementwise,
            softmax,
        )
        return statistics.median(abs(error_pct(r, predicted_step_s(r, catalog))) for r in ROWS if r.split == "fit")
    finally:
        efficiency.FRAMEWORK_EFFICIENCY, efficiency.ELEMENTWISE_PASSES, efficiency.SOFTMAX_PASSES = saved


def fit(catalog: Catalog) -> tuple[float, float, float]:
    """(FRAMEWORK_EFFICIENCY, ELEMENTWISE_PASSES, SOFTMAX_PASSES) minimising the fit rows' median |error|."""
    best, best_err = (ETA_GRID[0], ELEMENTWISE_GRID[0], SOFTMAX_GRID[0]), np.inf
    for ew in ELEMENTWISE_GRID:
        for sm in SOFTMAX_GRID:
            for eta in ETA_GRID:
                err = fit_error(catalog, eta, ew, sm)
                if err < best_err - 1e-9:
                    best, best_err = (eta, ew, sm), err
    return best


def render(catalog: Catalog) -> str:
    res = results(catalog)
    s = summary(res)
    lines = [
        BEGIN,
        "",
        "| table | run | split | GPUs | layout | published TFLOP/s | no figure | anchored | anchor |",
        "|---|---|---|---:|---|---:|---:|---:|---|",
    ]
    for r in res:
        row = r.row
        cp = f" cp{row.cp}" if row.cp > 1 else ""
        lay = f"tp{row.tp}{cp} pp{row.pp} dp{row.dp}, {row.seq_len:,} x {row.batch_seqs:,}, recompute {row.recompute}"
        lines.append(
            f"| {row.table} | {row.name} | {row.split} | {row.gpus:,} | {lay} | {published_tflops(row):.0f} |"
            f" {r.model_pct:+.1f}% | {'-' if r.anchored_pct is None else f'{r.anchored_pct:+.1f}%'} |"
            f" {'-' if r.anchor is None else r.anchor.name} |"
        )
    lines += [""]
    for split, v in s.items():
        lines.append(
            f"- {split} ({v['n']:.0f} rows): no figure median |error| {v['model_median']:.1f}%"
            f" (max {v['model_max']:.1f}%); anchored ({v['anchored_n']:.0f} rows) median {v['anchored_median']:.1f}%"
            f" (max {v['anchored_max']:.1f}%)."
        )
    lines += [
        "",
        f"Fitted on the fit rows only (``--fit``): FRAMEWORK_EFFICIENCY = {efficiency.FRAMEWORK_EFFICIENCY:g},"
        f" ELEMENTWISE_PASSES = {efficiency.ELEMENTWISE_PASSES:g}, SOFTMAX_PASSES = {efficiency.SOFTMAX_PASSES:g}.",
        "",
        END,
    ]
    return "\n".join(lines)


def regenerate(text: str, catalog: Catalog) -> str:
    i, j = text.index(BEGIN), text.index(END) + len(END)
    return text[:i] + render(catalog) + text[j:]


if __name__ == "__main__":
    from gpufabric.catalog import load_catalog

    cat = load_catalog()
    if "--fit" in sys.argv:
        eta, ew, sm = fit(cat)
        print(f"FRAMEWORK_EFFICIENCY = {eta}\nELEMENTWISE_PASSES = {ew}\nSOFTMAX_PASSES = {sm}")
    elif "--write" in sys.argv:
        DOC.write_text(regenerate(DOC.read_text(), cat))
    else:
        print(render(cat))

__all__ = ["ROWS", "Row", "fit", "regenerate", "render", "results", "summary"]
