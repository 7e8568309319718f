"""Collective sweep worker: ``python -m gpufabric.bench.probes.collectives CONFIG.json``.

Runs under torchrun, mpirun or srun (one process per rank). For every op, dtype and size
it warms up, times ``iters`` blocking iterations (CUDA events on GPU; on CPU a barrier,
then the monotonic clock around the op), then runs one check iteration on freshly filled
buffers and counts wrong elements, like nccl-tests' ``#wrong``.

Inputs are small integers stored as floats: element i of "pattern a" is (7a + i) mod 5,
so every sum over <= 51 ranks stays below 256 and is exact even in bf16 (8-bit
mantissa); the exact expected result is known without any reference computation.
"""

from __future__ import annotations

import time
from typing import Any

from gpufabric.bench.probes.stats import element_count

DTYPES = ("float32", "float16", "bfloat16", "float64")

_MOD = 5


def pattern(torch: Any, a: int, count: int, *, offset: int = 0, dtype: Any = None, device: Any = None) -> Any:
    """Pattern ``a`` for element indices ``offset .. offset+count-1``."""
    idx = torch.arange(offset, offset + count, dtype=torch.int64, device=device)
    return ((7 * a + idx) % _MOD).to(dtype)


def summed(torch: Any, n: int, count: int, *, offset: int = 0, dtype: Any = None, device: Any = None) -> Any:
    """Exact sum over ranks k < n of pattern(k) for the given element range (depends on i mod 5)."""
    table = torch.tensor([sum((7 * k + j) % _MOD for k in range(n)) for j in range(_MOD)], dtype=torch.float64)
    idx = torch.arange(offset, offset + count, dtype=torch.int64) % _MOD
    return table[idx].to(dtype=dtype, device=device)


class Op:
    """Buffers and calls for one collective at one size; ``expected()`` is the exact result."""

    def __init__(
        self, torch: Any, dist: Any, name: str, count: int, dtype: Any, device: Any, rank: int, world: int
    ) -> None:
        self.t, self.dist, self.name, self.count = torch, dist, name, count
        self.dtype, self.device, self.rank, self.n = dtype, device, rank, world
        self.chunk = count // world if name in ("all_gather", "reduce_scatter", "all_to_all") else count

        def empty(c: int) -> Any:
            return torch.empty(c, dtype=dtype, device=device)

        if name == "all_gather":
            self.inp, self.out = empty(self.chunk), empty(count)
        elif name == "reduce_scatter":
            self.inp, self.out = empty(count), empty(self.chunk)
        elif name in ("all_to_all", "send_recv"):
            self.inp, self.out = empty(count), empty(count)
        else:  # all_reduce, broadcast: in place
            self.inp = empty(count)
            self.out = self.inp

    def fill(self) -> None:
        t, r, n, c = self.t, self.rank, self.n, self.chunk
        kw = {"dtype": self.dtype, "device": self.device}
        if self.name == "all_to_all":
            for j in range(n):
                self.inp[j * c : (j + 1) * c] = pattern(t, r * n + j, c, **kw)
        elif self.name == "broadcast" and r != 0:
            self.inp.fill_(-1)
        elif self.name == "all_gather":
            self.inp.copy_(pattern(t, r, c, **kw))
        else:
            self.inp.copy_(pattern(t, r, self.count, **kw))
        if self.out is not self.inp:
            self.out.fill_(-1)

    def expected(self) -> Any:
        t, r, n, c = self.t, self.rank, self.n, self.chunk
        kw = {"dtype": self.dtype, "device": self.device}
        if self.name == "all_reduce":
            return summed(t, n, self.count, **kw)
        if self.name == "broadcast":
            return pattern(t, 0, self.count, **kw)
        if self.name == "all_gather":
            return t.cat([pattern(t, j, c, **kw) for j in range(n)])
        if self.name == "reduce_scatter":
            return summed(t, n, c, offset=r * c, **kw)
        if self.name == "all_to_all":
            return t.cat([pattern(t, j * n + r, c, **kw) for j in range(n)])
        return pattern(t, (r - 1) % n, self.count, **kw)  # send_recv from the previous rank

    def run(self) -> None:
        d = self.dist
        if self.name == "all_reduce":
            d.all_reduce(self.inp)
        elif self.name == "broadcast":
            d.broadcast(self.inp, src=0)
        elif self.name == "all_gather":
            d.all_gather_into_tensor(self.out, self.inp)
        elif self.name == "reduce_scatter":
            d.reduce_scatter_tensor(self.out, self.inp)
        elif self.name == "all_to_all":
            d.all_to_all_single(self.out, self.inp)
        else:
            ops = [
                d.P2POp(d.isend, self.inp, (self.rank + 1) % self.n),
                d.P2POp(d.irecv, self.out, (self.rank - 1) % self.n),
            ]
            for req in d.batch_isend_irecv(ops):
                req.wait()

    def wrong(self) -> int:
        return int((self.out != self.expected()).sum().item())


def time_iterations(
    torch: Any, dist: Any, op: Op, *, iters: int, warmup: int, gpu: bool, arm: Any = lambda: None
) -> list[float]:
    """Blocking per-iteration times in us: barrier, then the op alone on the clock.

    GPU: CUDA events around the op and a synchronize each iteration, so queued work
    never overlaps the next iteration. CPU: gloo ops complete before returning, so the
    monotonic clock around the call is the op's time.
    """
    times_us = []
    for it in range(warmup + iters):
        arm()
        dist.barrier()
        if gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            op.run()
            end.record()
            end.synchronize()
            elapsed_us = start.elapsed_time(end) * 1e3
        else:
            t0 = time.perf_counter_ns()
            op.run()
            elapsed_us = (time.perf_counter_ns() - t0) / 1e3
        if it >= warmup:
            times_us.append(elapsed_us)
    return times_us


def sweep(w: Any) -> None:
    """The body of one rank: every op x dtype x size in the config."""
    import warnings

    import torch

    # torch 2.13 deprecates the *_tensor names in favour of *_single; both run the same kernel.
    warnings.filterwarnings("ignore", category=FutureWarning)
    cfg = w.config
    dist = w.init_dist(cfg["backend"])
    device = w.device()
    gpu = device.type == "cuda"
    w.record("ready", device=str(device), backend=cfg["backend"])
    op_timeout = float(cfg["op_timeout_s"])
    for op_name in cfg["ops"]:
        if op_name == "send_recv" and w.world < 2:
            continue
        for dtype_name in cfg["dtypes"]:
            dtype = getattr(torch, dtype_name)
            elem = torch.tensor([], dtype=dtype).element_size()
            for size in cfg["sizes"]:
                count = element_count(op_name, int(size), elem, w.world)
                if count == 0:
                    continue
                label = f"{op_name} {dtype_name} {count * elem} B"
                op = Op(torch, dist, op_name, count, dtype, device, w.rank, w.world)
                op.fill()
                times_us = time_iterations(
                    torch,
                    dist,
                    op,
                    iters=int(cfg["iters"]),
                    warmup=int(cfg["warmup"]),
                    gpu=gpu,
                    arm=lambda label=label: w.arm(label, op_timeout),
                )
                w.arm(label + " check", op_timeout)
                op.fill()
                dist.barrier()
                op.run()
                if gpu:
                    torch.cuda.synchronize()
                if cfg.get("corrupt_rank") == w.rank:
                    op.out.view(-1)[0] += 1  # test hook: simulate one bad element received on this rank
                wrong = op.wrong()
                w.disarm()
                w.record(
                    "size",
                    op=op_name,
                    dtype=dtype_name,
                    size_bytes=count * elem,
                    count=count,
                    elem_bytes=elem,
                    times_us=times_us,
                    wrong=wrong,
                )
                if cfg.get("die_rank") == w.rank and cfg.get("die_after", 0) <= count * elem:
                    import os
                    import signal

                    os.kill(os.getpid(), signal.SIGKILL)  # test hook: a rank dying mid-sweep
                del op
    w.arm("final barrier", op_timeout)
    dist.barrier()
    w.disarm()


if __name__ == "__main__":
    import sys

    from gpufabric.bench.probes.worker import main

    sys.exit(main(sweep))
