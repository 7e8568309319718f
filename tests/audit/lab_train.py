"""Two-rank gloo all_reduce launched by the gpufabric torchrun wrapper in the live lab."""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} sum {t.item():g} master {os.environ.get('MASTER_ADDR')}", flush=True)
dist.destroy_process_group()
