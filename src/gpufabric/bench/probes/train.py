"""Training probe worker: ``python -m gpufabric.bench.probes.train CONFIG.json``.

A small decoder-style transformer (a few blocks) whose hidden size and sequence length
are scaled from the spec, trained for K steps under DDP (or FSDP2 ``fully_shard``) with
deterministic settings. Every rank records its step times; rank 0 writes the parameters
after the last step (``params.npy``) and their SHA-256, so two runs can be compared bit
for bit and, when they differ, by max abs/rel difference.

Determinism pinned here: one seed for weights and per-(rank, step) data,
``torch.use_deterministic_algorithms(True)``, ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` and
cuDNN deterministic on GPU (PyTorch "Reproducibility" notes). What the probe cannot pin
(NCCL algorithm/protocol/channels, rank placement, library versions) is reported by the
caller from the manifests (reference/models.md 1.6 item 4).
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any


def build_model(torch: Any, cfg: dict[str, Any]) -> Any:
    nn = torch.nn
    # torch arrives as a parameter (imported lazily by the worker): its Module is a value here,
    # so it is named as an Any-typed base rather than as the attribute of a module.
    module_base: Any = nn.Module

    class Probe(module_base):
        def __init__(self) -> None:
            super().__init__()
            h = cfg["hidden"]
            self.embed = nn.Embedding(cfg["vocab"], h)
            self.pos = nn.Parameter(torch.zeros(cfg["seq_len"], h))
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(
                    h, cfg["heads"], dim_feedforward=4 * h, dropout=0.0, batch_first=True, norm_first=True
                )
                for _ in range(cfg["layers"])
            )
            self.norm = nn.LayerNorm(h)
            self.head = nn.Linear(h, cfg["vocab"], bias=False)
            mask = torch.triu(torch.full((cfg["seq_len"], cfg["seq_len"]), float("-inf")), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, tokens: Any) -> Any:
            x = self.embed(tokens) + self.pos
            for block in self.blocks:
                x = block(x, src_mask=self.mask)
            return self.head(self.norm(x))

    return Probe()


def batch(torch: Any, cfg: dict[str, Any], rank: int, step: int, device: Any) -> tuple[Any, Any]:
    """Synthetic tokens, a pure function of (seed, rank, step): identical across repeats."""
    gen = torch.Generator().manual_seed(cfg["seed"] * 1_000_003 + rank * 10_007 + step)
    tokens = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq_len"] + 1), generator=gen)
    tokens = tokens.to(device)
    return tokens[:, :-1], tokens[:, 1:]


def train(w: Any) -> None:
    import numpy as np
    import torch

    cfg = w.config
    if cfg.get("deterministic", True):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    dist = w.init_dist(cfg["backend"])
    device = w.device()
    w.record(
        "ready", device=str(device), backend=cfg["backend"], deterministic=torch.are_deterministic_algorithms_enabled()
    )
    torch.manual_seed(cfg["seed"])
    model = build_model(torch, cfg).to(device)
    if cfg.get("mode") == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        model = fully_shard(model)
    else:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    delay_s = float(cfg.get("delay_rank_ms", 0)) / 1e3 if cfg.get("delay_rank") == w.rank else 0.0
    for step in range(int(cfg["warmup"]) + int(cfg["steps"])):
        w.arm(f"train step {step}", float(cfg["op_timeout_s"]))
        inputs, targets = batch(torch, cfg, w.rank, step, device)
        t0 = time.perf_counter()
        if delay_s:
            time.sleep(delay_s)  # test hook: a slow rank
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs).reshape(-1, cfg["vocab"]), targets.reshape(-1))
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        step_s = time.perf_counter() - t0
        w.disarm()
        w.record("step", step=step, warmup=step < int(cfg["warmup"]), step_s=step_s, loss=float(loss.item()))
    w.arm("parameter checksum", float(cfg["op_timeout_s"]))
    if cfg.get("mode") == "fsdp":
        params = [(n, p.full_tensor()) for n, p in model.named_parameters()]
    else:
        params = list(model.module.named_parameters())
    if w.rank == 0:
        digest = hashlib.sha256()
        flat = []
        for name, p in sorted(params):
            data = p.detach().to("cpu").contiguous()
            digest.update(name.encode())
            digest.update(data.numpy().tobytes())
            flat.append(data.reshape(-1).to(torch.float32).numpy())
        vector = np.concatenate(flat)
        np.save(os.path.join(cfg["out_dir"], "params.npy"), vector)
        w.record("checksum", sha256=digest.hexdigest(), num_params=int(vector.size))
    dist.barrier()
    w.disarm()


if __name__ == "__main__":
    import sys

    from gpufabric.bench.probes.worker import main

    sys.exit(main(train))
