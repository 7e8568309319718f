"""What ``bench gpu`` measures for a spec: GEMM shapes, HBM, decode, prefill, host copies.

Pure: builds a :class:`GpuPlan` from a training or inference spec, enough for
``--dry-run``. The worker (``bench/probes/gpu.py``) runs it on one device.

GEMM shapes are those of one transformer layer's forward pass under tensor parallelism
(Megatron-LM column/row split, Shoeybi et al. 2019, arXiv:1909.08053 section 3): with
``T`` tokens per microbatch (microbatch x sequence), hidden ``h``, ``q`` query-and-KV width
and FFN width ``f``, each TP rank multiplies

- QKV:       (T x h) by (h x q/tp)
- attn out:  (T x h/tp) by (h/tp x h)
- MLP up:    (T x h) by (h x 2f/tp)   (gate and up projections fused, SwiGLU as in Llama)
- MLP down:  (T x f/tp) by (f/tp x h)

On a CPU (the CI path) every shape is scaled down on its own to a fixed FLOP budget, keeping
its aspect ratio, so the orchestration, recording and calibration run in seconds; the
scaled shape is what is timed and what is stored beside the spec's shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: FLOPs of one scaled GEMM on the CPU path: ~0.05 s at 10 GFLOP/s, so a spec's dozen
#: shapes x (warm-up + repeats) stay within seconds on the 2-core CI machine.
CPU_GEMM_FLOPS = 5e8
#: Dimensions are rounded to this multiple (tensor-core tiles want multiples of 8/16;
#: cuBLAS heuristics, NVIDIA "Matrix Multiplication Background" user guide).
DIM_MULTIPLE = 16
#: Layers of the decode/prefill model actually built (times scale to the spec's layers
#: linearly: every layer does the same work).
GPU_LAYERS = 2
CPU_LAYERS = 1
#: Hidden size cap of the CPU decode/prefill model (its weights then fit in tens of MiB).
CPU_MAX_HIDDEN = 512
#: Buffer sizes of the HBM and host-copy measurements. 1 GiB on a GPU is far above the
#: 50-60 MB L2 of H100/H200 (NVIDIA Hopper tuning guide), so the figure is HBM's, not L2's.
GPU_HBM_BYTES = 1 << 30
CPU_HBM_BYTES = 64 << 20
GPU_COPY_BYTES = 1 << 30
CPU_COPY_BYTES = 32 << 20
#: Decode batches and prefill lengths tried when the spec does not pin them.
DECODE_BATCHES = (1, 8, 32, 64)
CPU_DECODE_BATCHES = (1, 4)
PREFILL_TOKENS = (512, 2048, 8192)
CPU_PREFILL_TOKENS = (64, 256)


@dataclass(frozen=True, slots=True, kw_only=True)
class Gemm:
    """One matrix multiply: (m x k) by (k x n), as the spec has it and as it is timed."""

    name: str  # "qkv", "attn_out", "mlp_up", "mlp_down"
    tp: int
    m: int
    n: int
    k: int
    dtype: str  # bf16 | fp8 | fp32
    spec_m: int
    spec_n: int
    spec_k: int

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def label(self) -> str:
        return f"{self.name} tp={self.tp} {self.m}x{self.n}x{self.k} {self.dtype}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerShape:
    """The transformer layer the decode and prefill measurements build (random weights)."""

    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    layers_built: int
    layers_spec: int
    dtype: str

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuPlan:
    """Everything one ``bench gpu`` run measures, in order."""

    device: str  # cuda | cpu
    gemms: tuple[Gemm, ...]
    hbm_bytes: int
    layer: LayerShape
    decode_batches: tuple[int, ...]
    decode_context_tokens: int
    prefill_tokens: tuple[int, ...]
    copy_bytes: int
    warmup: int
    repeats: int
    spec_name: str
    gpu: str  # the spec's catalog GPU id (what the figures are compared with)

    def describe(self) -> list[str]:
        """One line per measurement, as ``--dry-run`` prints them."""
        lines = [f"gemm {g.label} (spec {g.spec_m}x{g.spec_n}x{g.spec_k})" for g in self.gemms]
        lines.append(f"hbm copy {self.hbm_bytes} B")
        lines.append(f"hbm read {self.hbm_bytes} B")
        lay = self.layer
        model = (
            f"hidden {lay.hidden}, {lay.heads} heads ({lay.kv_heads} KV), ffn {lay.ffn}, "
            f"{lay.layers_built} of {lay.layers_spec} layers, {lay.dtype}"
        )
        lines += [f"decode batch {b} context {self.decode_context_tokens} ({model})" for b in self.decode_batches]
        lines += [f"prefill {t} tokens ({model})" for t in self.prefill_tokens]
        kinds = ("pinned", "pageable") if self.device == "cuda" else ("pageable",)
        lines += [f"copy {way} {kind} {self.copy_bytes} B" for kind in kinds for way in ("h2d", "d2h")]
        return lines

    def as_config(self) -> dict[str, Any]:
        """The JSON the worker reads (plain types only)."""
        lay = self.layer
        return {
            "device": self.device,
            "gemms": [
                {"name": g.name, "tp": g.tp, "m": g.m, "n": g.n, "k": g.k, "dtype": g.dtype, "label": g.label}
                for g in self.gemms
            ],
            "hbm_bytes": self.hbm_bytes,
            "layer": {
                "hidden": lay.hidden,
                "heads": lay.heads,
                "kv_heads": lay.kv_heads,
                "ffn": lay.ffn,
                "layers_built": lay.layers_built,
                "layers_spec": lay.layers_spec,
                "dtype": lay.dtype,
            },
            "decode_batches": list(self.decode_batches),
            "decode_context_tokens": self.decode_context_tokens,
            "prefill_tokens": list(self.prefill_tokens),
            "copy_bytes": self.copy_bytes,
            "warmup": self.warmup,
            "repeats": self.repeats,
        }


def _round(x: float) -> int:
    return max(DIM_MULTIPLE, int(round(x / DIM_MULTIPLE)) * DIM_MULTIPLE)


def _scaled(m: int, n: int, k: int, budget: float) -> tuple[int, int, int]:
    """(m, n, k) shrunk by one common factor to at most ``budget`` FLOPs (never grown)."""
    factor = min(1.0, (budget / (2.0 * m * n * k)) ** (1.0 / 3.0))
    return _round(m * factor), _round(n * factor), _round(k * factor)


def ffn_width(*, params: float, layers: int, hidden: int, kv_width: int, vocab: int) -> int:
    """FFN width implied by the parameter count of a Llama-style (SwiGLU) model.

    params = 2 vocab h (embedding + output) + layers (2 h^2 + 2 h kv + 3 h f) (Llama 2,
    Touvron et al. 2023, arXiv:2307.09288: gated MLP of three h x f matrices; GQA's K and V
    are h x kv each), solved for f and bounded to [h, 8h] for specs whose count includes
    something else (MoE experts, biases).
    """
    per_layer = (params - 2.0 * vocab * hidden) / layers
    f = (per_layer - 2.0 * hidden * hidden - 2.0 * hidden * kv_width) / (3.0 * hidden)
    # Released widths are multiples of 256 (Llama 3: 14336, 28672, 53248; config.json files).
    return max(256, int(round(min(8.0 * hidden, max(float(hidden), f)) / 256)) * 256)


def _tp_degrees(tp: Any, gpus_per_node: int) -> tuple[int, ...]:
    if isinstance(tp, int):
        return (tp,)
    return tuple(t for t in (1, 2, 4, 8) if t <= gpus_per_node) or (1,)


def plan_for_spec(spec: Any, *, device: str, repeats: int | None = None) -> GpuPlan:
    """The measurements for ``spec`` (training or inference) on ``device`` (cuda or cpu)."""
    cpu = device == "cpu"
    wl = spec.workload
    model = wl.model
    inference = getattr(wl, "kind", "training") == "inference"
    hidden = int(model.hidden)
    heads = int(model.heads or max(1, hidden // 128))
    kv_heads = int(getattr(model, "kv_heads", None) or heads)
    head_dim = hidden // heads
    kv_width = kv_heads * head_dim
    vocab = int(getattr(model, "vocab", 128256))
    ffn = ffn_width(params=model.params, layers=model.layers, hidden=hidden, kv_width=kv_width, vocab=vocab)
    if inference:
        precision = model.precision
        tokens = int(wl.traffic.prompt_tokens.mean)
        tps = _tp_degrees(wl.replica.tp, spec.cluster.gpus_per_node)
    else:
        precision = wl.precision
        mbs = wl.parallelism.microbatch_size
        tokens = (mbs if isinstance(mbs, int) else 1) * int(model.seq_len)
        tps = _tp_degrees(wl.parallelism.tp, spec.cluster.gpus_per_node)
    dtypes = ["bf16"] if precision in ("bf16", "fp16") else [precision]
    if precision == "fp8":
        dtypes = ["bf16", "fp8"]  # fp8 recipes still run part of the layer in bf16 (Transformer Engine)
    if cpu:
        dtypes = ["fp32"]  # CPU GEMMs in bf16 run far below fp32 on most x86 parts; the CI path times orchestration
    gemms = []
    for tp in tps:
        for name, (m, n, k) in (
            ("qkv", (tokens, (hidden + 2 * kv_width) // tp, hidden)),
            ("attn_out", (tokens, hidden, hidden // tp)),
            ("mlp_up", (tokens, 2 * ffn // tp, hidden)),
            ("mlp_down", (tokens, hidden, ffn // tp)),
        ):
            tm, tn, tk = _scaled(m, n, k, CPU_GEMM_FLOPS) if cpu else (m, n, k)
            for dtype in dtypes:
                gemms.append(Gemm(name=name, tp=tp, m=tm, n=tn, k=tk, dtype=dtype, spec_m=m, spec_n=n, spec_k=k))
    if cpu:
        shrink = min(1.0, CPU_MAX_HIDDEN / hidden)
        lay_hidden = _round(hidden * shrink)
        lay_heads = max(1, min(heads, lay_hidden // 64))
        lay_kv = max(1, min(kv_heads, lay_heads))
        while lay_heads % lay_kv:
            lay_kv -= 1
        layer = LayerShape(
            hidden=lay_hidden,
            heads=lay_heads,
            kv_heads=lay_kv,
            ffn=_round(ffn * shrink),
            layers_built=CPU_LAYERS,
            layers_spec=int(model.layers),
            dtype="fp32",
        )
    else:
        layer = LayerShape(
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            ffn=ffn,
            layers_built=min(GPU_LAYERS, int(model.layers)),
            layers_spec=int(model.layers),
            dtype="bf16",
        )
    prompt: tuple[int, ...] = ()
    if inference:
        context = int(wl.traffic.prompt_tokens.mean + wl.traffic.output_tokens.mean / 2)
        prompt = (int(wl.traffic.prompt_tokens.mean),)
    else:
        context = int(model.seq_len)
    # The spec's own prompt length joins the standard lengths on a GPU; the CPU path keeps its small ones.
    prefill = CPU_PREFILL_TOKENS if cpu else tuple(sorted({*PREFILL_TOKENS, *prompt}))
    return GpuPlan(
        device=device,
        gemms=tuple(gemms),
        hbm_bytes=CPU_HBM_BYTES if cpu else GPU_HBM_BYTES,
        layer=layer,
        decode_batches=CPU_DECODE_BATCHES if cpu else DECODE_BATCHES,
        decode_context_tokens=min(context, 512) if cpu else context,
        prefill_tokens=prefill,
        copy_bytes=CPU_COPY_BYTES if cpu else GPU_COPY_BYTES,
        warmup=1 if cpu else 3,
        repeats=repeats or (3 if cpu else 10),
        spec_name=spec.name,
        gpu=spec.cluster.gpu,
    )
