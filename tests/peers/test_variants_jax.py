"""jax_gather against JAX itself (the StableHLO specification's examples: tests/ops/variants/)."""

from collections import Counter

import numpy as np
import pytest
from support import assert_bit_identical

from gathermultiaxis.ops import variants as v

JAX_CASES = 500

# -- random cases against JAX ----------------------------------------------------------------------

DTYPES = (np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8, np.uint16, np.bool_,
          np.complex64)


def random_operand(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    values = rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "c":
        values.imag = rng.standard_normal(shape)
    specials = rng.random(shape)
    values[specials < 0.1] = np.nan
    values[(specials >= 0.1) & (specials < 0.15)] = -0.0
    values[(specials >= 0.15) & (specials < 0.2)] = np.inf
    return values


def random_jax_case(rng):
    """A random valid jax.lax.gather call: operand rank 1-4; each operand dim a window (slice size 0 to
    the full dim), collapsed or batching; start_index_map a random subset of the non-batching dims in
    random order; offset_dims anywhere in the output; starts in and around their valid range, some far
    out (within int32: see test_jax_fill_mode_wraps_int64_starts)."""
    rank = int(rng.integers(1, 5))
    shape = [int(rng.integers(1, 5)) if rng.random() > 0.08 else 0 for _ in range(rank)]
    roles = [str(rng.choice(["window", "collapsed", "batching"], p=[0.5, 0.3, 0.2])) if n else "window"
             for n in shape]  # slice sizes of collapsed and batching dims are 1: no dim of size 0 there
    batching = [d for d in range(rank) if roles[d] == "batching"]
    windows = [d for d in range(rank) if roles[d] == "window"]
    movable = [d for d in range(rank) if roles[d] != "batching"]
    start_index_map = [int(d) for d in rng.permutation(movable)[:int(rng.integers(0, len(movable) + 1))]]
    batch_rank = len(batching) + int(rng.integers(0, 3))
    batch_shape = [int(rng.integers(0 if rng.random() < 0.05 else 1, 4)) for _ in range(batch_rank)]
    indices_batching = [int(p) for p in rng.permutation(batch_rank)[:len(batching)]]
    for o, i in zip(batching, indices_batching):
        batch_shape[i] = shape[o]
    slice_sizes = [int(rng.integers(0, shape[d] + 1)) if roles[d] == "window" else 1 for d in range(rank)]
    offset_dims = sorted(int(p) for p in rng.choice(batch_rank + len(windows), len(windows), replace=False))
    starts = np.stack([rng.integers(-3, shape[d] - slice_sizes[d] + 4, batch_shape) for d in start_index_map],
                      axis=-1) if start_index_map else np.zeros((*batch_shape, 0), np.int64)
    far = rng.random(starts.shape) < 0.03
    starts[far] = rng.choice([-2**31, 2**31 - 1, -1000, 1000], int(far.sum()))
    starts = starts.astype(rng.choice([np.int32, np.int64]))
    dtype = DTYPES[int(rng.integers(len(DTYPES)))]
    numbers = dict(offset_dims=tuple(offset_dims), collapsed_slice_dims=tuple(d for d in range(rank)
                                                                               if roles[d] == "collapsed"),
                   start_index_map=tuple(start_index_map), operand_batching_dims=tuple(batching),
                   start_indices_batching_dims=tuple(indices_batching))
    return random_operand(rng, shape, dtype), starts, numbers, tuple(slice_sizes)


def features(operand, starts, numbers, slice_sizes):
    """What a case exercises, for the coverage count."""
    moved = set(numbers["start_index_map"])
    windowed = [d for d in range(operand.ndim) if d not in numbers["collapsed_slice_dims"]
                and d not in numbers["operand_batching_dims"]]
    found = {f"rank {operand.ndim}", str(operand.dtype), f"{starts.dtype} starts"}
    if numbers["operand_batching_dims"]:
        found.add("batching dims")
    if any(d in moved and slice_sizes[d] > 1 for d in windowed):
        found.add("window > 1 on an indexed dim")
    if any(d not in moved and 1 < slice_sizes[d] for d in windowed):
        found.add("window > 1 on a non-indexed dim")
    if any(slice_sizes[d] == 0 for d in windowed):
        found.add("window 0")
    if any(slice_sizes[d] == operand.shape[d] > 1 for d in windowed):
        found.add("full-dim window")
    if numbers["collapsed_slice_dims"]:
        found.add("collapsed dims")
    if list(numbers["start_index_map"]) != sorted(numbers["start_index_map"]):
        found.add("start_index_map out of order")
    if numbers["offset_dims"] and numbers["offset_dims"] != tuple(range(len(numbers["offset_dims"]))) \
            and numbers["offset_dims"][-1] != len(starts.shape) - 2 + len(numbers["offset_dims"]):
        found.add("offset dims inside the output")
    if (starts < 0).any():
        found.add("negative starts")
    bounds = np.array([operand.shape[d] - slice_sizes[d] for d in numbers["start_index_map"]], np.int64)
    if (starts.astype(np.int64) > bounds).any():
        found.add("starts past the end")
    return found


@pytest.fixture
def jax_x64():
    """JAX with 64-bit types on (so int64, uint64 and float64 arrays keep their dtype), off again after."""
    jax = pytest.importorskip("jax", reason="jax is not installed (pip install -e '.[peers]')")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield jax
    finally:
        jax.config.update("jax_enable_x64", previous)


def test_jax_random(jax_x64, report_line):
    """JAX_CASES random calls, each in clip and in fill mode (fill with JAX's default fill value or a given
    one, modes as strings or as jax.lax.GatherScatterMode members): bit-identical to jax.lax.gather."""
    lax = jax_x64.lax
    rng = np.random.default_rng(14)
    seen = Counter()
    for case in range(JAX_CASES):
        operand, starts, numbers, slice_sizes = random_jax_case(rng)
        jax_numbers = lax.GatherDimensionNumbers(**numbers)
        seen.update(features(operand, starts, numbers, slice_sizes))
        for mode in ("clip", "fill"):
            mode_argument = mode if rng.random() < 0.5 else lax.GatherScatterMode.from_any(mode)
            fill_value = None
            if mode == "fill" and rng.random() < 0.3:
                fill_value = random_operand(rng, (), operand.dtype)[()]
            expected = np.asarray(lax.gather(operand, starts, jax_numbers, slice_sizes, mode=mode_argument,
                                             fill_value=fill_value))
            try:
                assert_bit_identical(v.jax_gather(operand, starts, jax_numbers, slice_sizes, mode_argument,
                                                  fill_value), expected)
            except AssertionError as error:
                raise AssertionError(f"case {case}, mode {mode}: operand {operand.dtype}{list(operand.shape)}, "
                                     f"starts {starts.dtype}{list(starts.shape)} {starts.tolist()}, {numbers}, "
                                     f"slice_sizes {slice_sizes}, fill_value {fill_value!r}") from error
    wanted = {f"rank {r}" for r in range(1, 5)} | {str(np.dtype(t)) for t in DTYPES} | {
        "int32 starts", "int64 starts", "batching dims", "window > 1 on an indexed dim",
        "window > 1 on a non-indexed dim", "window 0", "full-dim window", "collapsed dims",
        "start_index_map out of order", "offset dims inside the output", "negative starts", "starts past the end"}
    assert wanted <= set(seen), f"the random cases missed {sorted(wanted - set(seen))}"
    report_line(f"JAX {jax_x64.__version__} lax.gather: {JAX_CASES} random cases x 2 modes (clip, fill) "
                f"bit-identical ({seen['batching dims']} with batching dims, {seen['window > 1 on an indexed dim']} "
                f"with windows on indexed dims, {seen['starts past the end']} with starts past the end)")


def test_jax_fill_mode_wraps_int64_starts(jax_x64):
    """JAX's fill mode converts the starts to int32 before its bounds check (jax 0.10.2,
    _gather_fill: int_dtype_for_shape), so an int64 start of 2**32 + 1 reads row 1 instead of being
    filled; jax_gather fills it, as the mode promises. When this test fails, JAX fixed it."""
    lax = jax_x64.lax
    operand = np.arange(15, dtype=np.float32).reshape(5, 3)
    numbers = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    starts = np.array([[2**32 + 1]], np.int64)
    assert_bit_identical(v.jax_gather(operand, starts, numbers, (1, 3), "fill"), np.full((1, 3), np.nan, np.float32))
    assert_bit_identical(np.asarray(lax.gather(operand, starts, numbers, (1, 3), mode="fill")), operand[1:2])
    assert_bit_identical(v.jax_gather(operand, starts, numbers, (1, 3), "clip"),
                         np.asarray(lax.gather(operand, starts, numbers, (1, 3), mode="clip")))


def test_jax_other_start_dtypes(jax_x64):
    """Starts of other integer dtypes are taken at their values: unsigned ones past the end (uint64
    beyond int64 too) are clamped in clip mode and filled in fill mode, as JAX does (up to uint32, the
    values its fill mode's int32 conversion keeps)."""
    lax = jax_x64.lax
    operand = random_operand(np.random.default_rng(15), (6, 4), np.float32)
    numbers = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    for dtype, values in [(np.int8, [-128, -1, 0, 3, 5, 127]), (np.int16, [-7, 2, 4, 300]),
                          (np.uint8, [0, 1, 4, 5, 255]), (np.uint16, [3, 65535]), (np.uint32, [2, 2**31 + 7]),
                          (np.uint64, [1, 2**40, 2**63 + 5, 2**64 - 1])]:
        starts = np.array(values, dtype)[:, None]
        for mode in ("clip", "fill"):
            if mode == "fill" and dtype == np.uint64:  # JAX's int32 conversion wraps the last three
                expected = np.stack([operand[1, :3]] + [np.full(3, np.nan, np.float32)] * 3)
            else:
                expected = np.asarray(lax.gather(operand, starts, numbers, (1, 3), mode=mode))
            assert_bit_identical(v.jax_gather(operand, starts, numbers, (1, 3), mode), expected)


EDGE_CASES = {  # operand, start_indices, dimension numbers, slice sizes: shapes the random cases rarely reach
    "rank-0 operand": (np.array(3.5), np.zeros((2, 3, 0), np.int64), ((), (), ()), ()),
    "rank-0 operand, no batch": (np.array(3.5), np.zeros((0,), np.int64), ((), (), ()), ()),
    "no index vector": (np.arange(12.0).reshape(3, 4), np.zeros((3, 0), np.int64), ((0, 2), (), ()), (2, 3)),
    "a single start, no batch": (np.arange(12.0).reshape(3, 4), np.array([1, 2]), ((0, 1), (), (1, 0)), (2, 3)),
    "every dim collapsed": (np.arange(12.0).reshape(3, 4), np.array([[1, 2], [9, -1]]), ((), (0, 1), (1, 0)), (1, 1)),
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_jax_edge_cases(jax_x64, name):
    operand, start_indices, (offset, collapsed, start_index_map), slice_sizes = EDGE_CASES[name]
    numbers = jax_x64.lax.GatherDimensionNumbers(offset, collapsed, start_index_map)
    for mode in ("clip", "fill"):
        assert_bit_identical(v.jax_gather(operand, start_indices, numbers, slice_sizes, mode),
                             np.asarray(jax_x64.lax.gather(operand, start_indices, numbers, slice_sizes, mode=mode)))
