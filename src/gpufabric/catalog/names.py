"""How tools name the catalog's hardware: GPU model strings -> catalog GPU ids.

nccl-tests headers ("NVIDIA H100 80GB HBM3"), CUDA device names (``torch.cuda.
get_device_properties().name``, "NVIDIA H200") and nvidia-smi all carry the marketing
name; the first pattern that matches wins, so the more specific names come first.
"""

from __future__ import annotations

import re

GPU_MODELS = ((r"H200", "h200"), (r"H100", "h100-sxm"), (r"A100", "a100-sxm"), (r"B200", "b200"), (r"L40S", "l40s"))


def gpu_id(model: str) -> str | None:
    """Catalog GPU id of a GPU model string ("NVIDIA H100 80GB HBM3" -> "h100-sxm"), or None."""
    return next((gid for pattern, gid in GPU_MODELS if re.search(pattern, model or "")), None)
