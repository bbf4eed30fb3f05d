"""The NumPy kernel against the per-element reference, plus its error messages."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from support import ReferenceIndexError, assert_bit_identical, gather_cases, reference_gather_multiaxis

from gathermultiaxis import GatherIndexError, GatherShapeError, gather_multiaxis

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint64, np.bool_, object]


@settings(max_examples=600, deadline=None)
@given(case=gather_cases())
def test_kernel_matches_reference(case):
    for dtype in DTYPES:
        data = case.as_dtype(dtype)
        try:
            expected = reference_gather_multiaxis(data, case.indices, case.axes, case.mode)
        except ReferenceIndexError:
            with pytest.raises(GatherIndexError):
                gather_multiaxis(data, case.indices, case.axes, case.mode)
            continue
        assert_bit_identical(gather_multiaxis(data, case.indices, case.axes, case.mode), expected)


def test_out_of_range_message_names_value_position_axis_and_range():
    data = np.zeros((3, 5))
    indices = np.array([[0, 1], [2, 0], [1, 7]])  # (y, x) pairs read into axes [0, 1]
    with pytest.raises(GatherIndexError, match=re.escape(
            "index 7 at indices[2, 1] is out of range for axis 1 of size 5 (valid range [-5, 4]")):
        gather_multiaxis(data, indices.reshape(3, 2), [0, 1])


def test_negative_out_of_range_is_an_error():
    with pytest.raises(GatherIndexError, match=re.escape("index -4 at indices[1]")):
        gather_multiaxis(np.arange(3), np.array([-3, -4]), [0])


def test_zero_and_clamp_modes():
    data = np.array([1.5, 2.5, 3.5], dtype=np.float32)
    indices = np.array([-4, -1, 0, 3, 9])
    np.testing.assert_array_equal(gather_multiaxis(data, indices, [0], "zero"), [0, 3.5, 1.5, 0, 0])
    np.testing.assert_array_equal(gather_multiaxis(data, indices, [0], "clamp"), [1.5, 3.5, 1.5, 3.5, 3.5])
    strings = np.array(["a", "b"], dtype=object)
    assert gather_multiaxis(strings, np.array([5, 1]), [0], "zero").tolist() == ["", "b"]


def test_rank_zero_and_empty_axes():
    assert gather_multiaxis(np.array(7.0), np.array(0), []) == np.array(7.0)
    output = gather_multiaxis(np.array([[1], [2]]), np.zeros((1, 3), dtype=np.int32), [])
    np.testing.assert_array_equal(output, [[1, 1, 1], [2, 2, 2]])


@pytest.mark.parametrize("data_shape, indices_shape, axes, message", [
    ((2, 3), (2,), [0], "input rank 2 and indices rank 1 differ"),
    ((2, 3), (2, 3), [2], "axis 2 is out of range for rank 2"),
    ((2, 3), (2, 3), [1, -1], "name dimension 1 more than once"),
    ((2, 3), (2, 3), [0, 1], "last indices dimension (3) must be a multiple of len(axes)=2"),
    ((2, 3), (4, 3), [1], "dimension 0 is not broadcastable: input size 2 vs logical indices size 4"),
    ((0, 3), (2, 3), [0], "axis 0 of the input has size 0"),
])
def test_shape_errors(data_shape, indices_shape, axes, message):
    with pytest.raises(GatherShapeError, match=re.escape(message)):
        gather_multiaxis(np.zeros(data_shape), np.zeros(indices_shape, dtype=np.int64), axes)


def test_index_dtype_and_mode_are_checked():
    with pytest.raises(TypeError, match="indices must be int32 or int64, got float32"):
        gather_multiaxis(np.zeros(3), np.zeros(3, dtype=np.float32), [0])
    with pytest.raises(ValueError, match="mode must be one of"):
        gather_multiaxis(np.zeros(3), np.zeros(3, dtype=np.int64), [0], "wrap")


def test_block_gather_keeps_input_untouched_and_returns_contiguous():
    table = np.arange(20, dtype=np.float32).reshape(5, 4)
    output = gather_multiaxis(table, np.array([[4], [0]]), [0])
    np.testing.assert_array_equal(output, table[[4, 0]])
    assert output.flags.c_contiguous
    np.testing.assert_array_equal(table, np.arange(20).reshape(5, 4))
