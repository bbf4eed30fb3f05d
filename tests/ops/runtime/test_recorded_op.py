"""The body of GatherMultiaxisRecorded (ops.runtime.recorded_op): the recorded gather aligned per call as the
rewrite's run-time alignment aligns it; the fast answers equal the kernel's; errors go to the run."""

import numpy as np
import pytest

from gathermultiaxis.ops.alignment import AlignmentError
from gathermultiaxis.ops.contract import GatherIndexError
from gathermultiaxis.ops.runtime.recorded_op import (gather_nd_plan, gather_plan, recorded_output, recorded_plan,
                                                     run_time_axis)
from gathermultiaxis.ops.runtime.run_errors import RUN_ERRORS
from gathermultiaxis.ops.runtime.run_ops import recorded_attribute


def run(data, indices, gather, mode="error", fast=True):
    token = RUN_ERRORS.new_token()
    output = recorded_output(data, indices, gather, mode, np.array(token), fast)
    return output, RUN_ERRORS.pop(token)


def test_run_time_axis_is_the_rewrites():
    assert [run_time_axis(axis, 3) for axis in (0, 2, 5, -1, -3, -4)] == [0, 2, 5, 2, 0, 3]


def test_gather_plan_puts_the_indices_in_front_of_the_axis_with_a_trailing_one():
    plan = gather_plan(3, 2, 1)  # data [a, b, c], indices [i, j]: [a, 1, 1, b, c] and [1, i, j, 1, 1], axis 3
    assert plan.alignment.axes == (3,) and plan.alignment.data_unsqueeze == (1, 2)
    assert plan.alignment.indices_unsqueeze == (0, 3, 4) and plan.alignment.output_squeeze == (3,)
    assert plan.take_axis == 1
    with pytest.raises(AlignmentError):
        gather_plan(2, 1, 2)


def test_gather_nd_plan_adds_the_folded_coordinates_dimension():
    plan = gather_nd_plan(3, 3, 1, 1)  # b=1, k=1, q-1-b=1: region 1, trailing 1, last axis 3
    assert plan.alignment.axes == (1,) and plan.alignment.data_unsqueeze == (3,)
    assert plan.alignment.indices_unsqueeze == (2,) and plan.alignment.output_squeeze == (3,)
    assert gather_nd_plan(2, 2, 0, 0).pad_coordinates
    with pytest.raises(AlignmentError):
        gather_nd_plan(2, 0, 0, 0)


def test_plans_are_made_once_per_ranks():
    gather = recorded_attribute("Gather", {"axis": 0})
    assert recorded_plan(gather, 2, (3,)) is recorded_plan(gather, 2, (5,))
    assert recorded_plan(gather, 2, (3,)) is not recorded_plan(gather, 3, (3,))


@pytest.mark.parametrize("seed", range(30))
def test_fast_answers_are_the_kernels_and_numpys(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    data = rng.standard_normal(tuple(int(n) for n in rng.integers(1, 4, rank))).astype(np.float32)
    axis = int(rng.integers(-rank, rank))
    size = data.shape[axis]
    indices = rng.integers(-size, size, tuple(int(n) for n in rng.integers(1, 3, int(rng.integers(0, 3)))))
    gather = recorded_attribute("Gather", {"axis": axis})
    fast, fast_error = run(data, indices, gather)
    slow, slow_error = run(data, indices, gather, fast=False)
    assert fast_error is None and slow_error is None
    np.testing.assert_array_equal(fast, np.take(data, indices, axis=axis))
    assert fast.tobytes() == slow.tobytes() and fast.shape == slow.shape
    along = rng.integers(-size, size, data.shape)
    elements = recorded_attribute("GatherElements", {"axis": axis})
    got, error = run(data, along, elements)
    assert error is None
    np.testing.assert_array_equal(got, np.take_along_axis(data, along % size, axis=axis))
    assert run(data, along, elements, fast=False)[0].tobytes() == got.tobytes()


def test_gather_nd_reads_coordinate_tuples():
    data = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    indices = np.array([[1, 2], [0, -1]])
    got, error = run(data, indices, recorded_attribute("GatherND", {}), "error_nonempty")
    assert error is None
    np.testing.assert_array_equal(got, data[[1, 0], [2, -1]])
    batched, error = run(data, np.array([[2], [0]]), recorded_attribute("GatherND", {"batch_dims": 1}), "error_nonempty")
    assert error is None
    np.testing.assert_array_equal(batched, np.stack([data[0, 2], data[1, 0]]))


def test_an_error_goes_to_the_run_with_a_placeholder_of_the_datas_type():
    data = np.arange(12, dtype=np.int32).reshape(3, 4)
    output, error = run(data, np.array([[0, 4]]), recorded_attribute("Gather", {"axis": 1}))
    assert isinstance(error, GatherIndexError) and "index 4" in str(error)
    assert output.dtype == np.int32 and output.size == 0
    output, error = run(data, np.array([0]), recorded_attribute("Gather", {"axis": 2}))
    assert isinstance(error, AlignmentError) and output.dtype == np.int32
    strings = np.array(["a\x00b", "c"], dtype=object)
    output, error = run(strings, np.array([0]), recorded_attribute("Gather", {"axis": 0}))
    assert isinstance(error, ValueError) and "NUL" in str(error) and output.dtype == object
