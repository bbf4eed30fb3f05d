"""The fast plan against the kernel: random calls of every axes form, mode, element type and index type, with
negative, out-of-range and empty cases; a plan answers bit for bit (dtype, shape, bytes, C order) or not at all."""

import numpy as np
import pytest

from gathermultiaxis.ops.contract import MODES, Mode
from gathermultiaxis.ops.fast_plan import FANCY_MAX_ELEMENTS, FastPlans, fast_gather, make_fast_plan
from gathermultiaxis.ops.kernel import gather_multiaxis

DATA_DTYPES = (np.float32, np.float64, np.float16, np.int8, np.uint64, np.int64, np.bool_, object)


def random_data(rng, shape, dtype):
    if dtype is object:
        return np.array([f"s{i}" for i in range(int(np.prod(shape)))], dtype=object).reshape(shape)
    bits = rng.integers(0, 256, int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
    if dtype is np.bool_:
        bits = bits & 1
    return bits.view(dtype).reshape(shape)  # every bit pattern, NaN payloads included


def random_case(rng):
    """(data, indices, axes, mode, indices_axes): shapes that broadcast, now and then ones that do not."""
    rank = int(rng.integers(1, 5))
    data_shape = [int(rng.integers(0 if rng.random() < 0.05 else 1, 5)) for _ in range(rank)]
    k = int(rng.integers(1, min(rank, 3) + 1))
    axes = [int(a) for a in rng.permutation(rank)[:k]]
    logical = []
    for d in range(rank):
        if d in axes:
            logical.append(int(rng.integers(0 if rng.random() < 0.05 else 1, 4)))
        else:
            logical.append(int(rng.choice([1, data_shape[d], data_shape[d], 3 if data_shape[d] == 1 else 1])))
    shape = logical[:-1] + [logical[-1] * k] if k > 1 else logical
    if rng.random() < 0.03:
        shape[-1] += 1  # not a multiple of len(axes), or a dim that does not broadcast
    reach = [data_shape[a] for a in axes]
    high = max(max(reach), 1)
    in_range = rng.random() < 0.6
    values = rng.integers(-high if in_range else -high - 2, high if in_range else high + 2, shape)
    if in_range and k == 1:
        values = values % max(reach[0], 1) - (reach[0] if rng.random() < 0.3 else 0)
    indices = values.astype(rng.choice([np.int32, np.int64]) if rng.random() < 0.97 else np.uint8)
    axes = [a - rank if rng.random() < 0.3 else a for a in axes]
    dtype = DATA_DTYPES[int(rng.integers(len(DATA_DTYPES)))]
    mode = MODES[int(rng.integers(len(MODES)))] if rng.random() < 0.8 else Mode.ERROR
    indices_axes = ()
    if rng.random() < 0.15 and indices.ndim > 1 and indices.shape[0] == 1:  # an absorbed alignment
        indices, indices_axes = indices[0], (0,)
    return random_data(rng, tuple(data_shape), dtype), indices, tuple(axes), mode, indices_axes


def kernel(data, indices, axes, mode, indices_axes):
    try:
        return gather_multiaxis(data, np.expand_dims(indices, indices_axes) if indices_axes else indices, axes, mode)
    except Exception as error:  # noqa: BLE001 - compared below
        return error


def test_fast_plan_agrees_with_the_kernel_on_random_calls():
    rng = np.random.default_rng(43)
    answered = refused_errors = 0
    for _ in range(600):
        data, indices, axes, mode, indices_axes = case = random_case(rng)
        fast, expected = fast_gather(*case), kernel(*case)
        if fast is None:
            refused_errors += isinstance(expected, Exception)
            continue
        answered += 1
        assert not isinstance(expected, Exception), (case, expected)
        assert (fast.dtype, fast.shape, fast.tobytes()) == (expected.dtype, expected.shape, expected.tobytes()), case
        assert fast.flags.c_contiguous and not np.shares_memory(fast, data)
    assert answered > 100 and refused_errors > 50, (answered, refused_errors)  # both sides of the plan were exercised


@pytest.mark.parametrize("mode", [Mode.ZERO, Mode.CLAMP, "zero", "clamp"])
def test_modes_without_a_check_have_no_plan(mode):
    assert make_fast_plan((0,), mode, (4,), (2,)) is None


def test_refusals():
    assert make_fast_plan((0,), "error", (4,), (0,)) is None  # empty output: mode error checks nothing to read
    assert make_fast_plan((0,), "error", (0, 2), (3, 1)) is None  # an axis of size 0
    assert make_fast_plan((0, 1), "error", (3, 3), (2, 3)) is None  # 3 is not a multiple of 2 axes
    assert make_fast_plan((2,), "error", (3, 3), (2, 1)) is None  # an axis out of range
    assert make_fast_plan((0,), "no such mode", (4,), (2,)) is None
    side = int(FANCY_MAX_ELEMENTS ** 0.5) + 1  # an advanced index past the crossover
    assert make_fast_plan((0, 1), "error", (side, side), (side, side * 2)) is None
    assert make_fast_plan((0,), "error", (side, side), (side, side)) is None
    assert make_fast_plan((1,), "error", (side, side), (1, side)) is not None  # the take form has no limit
    data = np.arange(4.0)
    assert fast_gather(data, np.array([9]), (0,), "error") is None  # IndexError: the kernel names it
    assert fast_gather(data, np.array([1], np.uint8), (0,), "error") is None  # TypeError in the kernel
    assert fast_gather(data, np.array([True]), (0,), "error") is None  # not a mask
    assert fast_gather(data.astype(object), np.array([1]), (0,), "error") is None  # strings: the kernel's path


def test_forms_and_negative_indices():
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    take = fast_gather(data, np.array([[[-1], [0]]]), (1,), "error_nonempty")
    np.testing.assert_array_equal(take, data[:, [2, 0], :])
    pairs = fast_gather(data, np.array([[[1, -1]], [[0, 0]]]), (0, 2), "error")
    np.testing.assert_array_equal(pairs, np.array([[[data[1, i, 3] for i in range(3)]], [[data[0, i, 0] for i in range(3)]]]).reshape(2, 3, 1))
    absorbed = fast_gather(data, np.array([[1], [0]]), (1,), "error", indices_axes=(0,))  # [2, 1] -> [1, 2, 1]
    np.testing.assert_array_equal(absorbed, data[:, [1, 0], :])
    np.testing.assert_array_equal(fast_gather(np.arange(5), np.array([4, -5]), (-1,), "error"), [4, 0])


def test_plans_are_cached_and_bounded():
    plans = FastPlans(max_plans=3)
    first = plans((0,), "error", (4,), (2,))
    assert plans((0,), "error", (4,), (2,)) is first and len(plans) == 1
    for n in range(5):
        plans((0,), "error", (4,), (n + 3,))
    assert len(plans) == 3
    assert plans((0,), "zero", (4,), (2,)) is None and len(plans) == 3  # a refusal is remembered too
    plans.clear()
    assert len(plans) == 0
