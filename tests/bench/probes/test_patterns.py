"""The correctness inputs: exact expected results of every collective for known inputs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpufabric.bench.probes.collectives import pattern, summed  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [2, 3, 8, 51])
def test_summed_is_exact_sum_of_patterns(dtype, n):
    count = 1000
    exact = sum(pattern(torch, k, count, dtype=torch.float64) for k in range(n))
    got = summed(torch, n, count, dtype=dtype)
    # small integers: the low-precision sum is exact, so equality (not closeness) must hold
    assert torch.equal(got.to(torch.float64), exact)
    manual = torch.zeros(count, dtype=dtype)
    for k in range(n):
        manual += pattern(torch, k, count, dtype=dtype)
    assert torch.equal(manual, got)


def test_pattern_offset_and_rank_dependence():
    a = pattern(torch, 3, 10, offset=5, dtype=torch.float32)
    b = pattern(torch, 3, 15, dtype=torch.float32)[5:]
    assert torch.equal(a, b)
    assert not torch.equal(pattern(torch, 0, 10, dtype=torch.float32), pattern(torch, 1, 10, dtype=torch.float32))
