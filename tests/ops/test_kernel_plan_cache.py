"""The kernel's plan cache stays within its byte and count bounds, and plans from it give right results."""

import numpy as np

from gathermultiaxis import gather_multiaxis
from gathermultiaxis.ops.kernel import PlanCache, PLANS


def test_plan_cache_is_bounded_by_bytes_and_count():
    cache = PlanCache(max_plans=50, max_bytes=2 << 20)
    indices = np.zeros((1, 200, 1), np.int64)
    for rows in range(1, 120):  # each plan caches a [rows, 200] offset grid: up to 187 KiB
        plan = cache((rows, 200, 2), indices.shape, (2,), 4)
        assert plan.geometry.output_shape == (rows, 200, 1)
        info = cache.info()
        assert info["bytes"] <= 2 << 20 and info["plans"] <= 50, info
    assert cache.info()["plans"] < 50  # the byte bound, not the count, evicted


def test_cached_plans_give_the_same_results():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((30, 40, 3)).astype(np.float32)
    indices = rng.integers(-3, 3, (30, 40, 1))
    first = gather_multiaxis(data, indices, [2])
    assert PLANS.info()["plans"] >= 1
    np.testing.assert_array_equal(gather_multiaxis(data, indices, [2]), first)
    np.testing.assert_array_equal(first, np.take_along_axis(data, indices % 3, axis=2))
