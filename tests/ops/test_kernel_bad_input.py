"""Bad calls of the NumPy kernel: every one raises a clear exception naming what is wrong."""

import re

import numpy as np
import pytest

from gathermultiaxis import GatherIndexError, GatherShapeError, gather_multiaxis

I64, I32 = np.iinfo(np.int64), np.iinfo(np.int32)


def test_out_of_range_message_names_value_position_axis_and_range():
    data = np.zeros((3, 5))
    indices = np.array([[0, 1], [2, 0], [1, 7]])  # (y, x) pairs read into axes [0, 1]
    with pytest.raises(GatherIndexError, match=re.escape(
            "index 7 at indices[2, 1] is out of range for axis 1 of size 5 (valid range [-5, 4]")):
        gather_multiaxis(data, indices.reshape(3, 2), [0, 1])


def test_negative_out_of_range_is_an_error():
    with pytest.raises(GatherIndexError, match=re.escape("index -4 at indices[1]")):
        gather_multiaxis(np.arange(3), np.array([-3, -4]), [0])


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


@pytest.mark.parametrize("indices, message", [
    (np.zeros(3, dtype=np.float64), "indices must be int32 or int64, got float64"),
    (np.zeros(3, dtype=bool), "indices must be int32 or int64, got bool"),
    (np.zeros(3, dtype=np.uint64), "indices must be int32 or int64, got uint64"),
    (np.array(["0", "1", "2"], dtype=object), "indices must be int32 or int64, got object"),
])
def test_non_integer_indices(indices, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        gather_multiaxis(np.zeros(3), indices, [0])


@pytest.mark.parametrize("axes, message", [
    ([0.0], "axes must be integers, got 0.0"),
    (["0"], "axes must be integers, got '0'"),
    ([-3], "axis -3 is out of range for rank 2 (valid range [-2, 1])"),
])
def test_bad_axes(axes, message):
    with pytest.raises(GatherShapeError, match=re.escape(message)):
        gather_multiaxis(np.zeros((2, 3)), np.zeros((2, 3), dtype=np.int64), axes)


def test_extreme_index_values_neither_wrap_nor_overflow():
    data = np.arange(5)
    extremes = np.array([I64.max, I64.min, -5, 4])
    np.testing.assert_array_equal(gather_multiaxis(data, extremes, [0], "clamp"), [4, 0, 0, 4])
    np.testing.assert_array_equal(gather_multiaxis(data, extremes, [0], "zero"), [0, 0, 0, 4])
    with pytest.raises(GatherIndexError, match=re.escape(f"index {I64.max} at indices[0]")):
        gather_multiaxis(data, extremes, [0])
    with pytest.raises(GatherIndexError, match=re.escape(f"index {I32.min} at indices[1]")):
        gather_multiaxis(data, np.array([0, I32.min, 1], dtype=np.int32), [0])
    np.testing.assert_array_equal(gather_multiaxis(data, np.array([I32.max, I32.min], np.int32), [0], "clamp"), [4, 0])


def test_flat_offsets_beyond_int32_use_int64():
    """A 2.1 GB int8 input read with int32 indices: the flat offset of the last element needs int64."""
    rows, cols = 2**16 + 1, 2**15 + 1
    data = np.zeros((rows, cols), dtype=np.int8)  # calloc'd: only the touched pages get memory
    data[-1, -1], data[-1, 0], data[0, -1] = 7, 5, 3
    coordinates = np.array([[rows - 1, cols - 1, -1, 0, 0, -1]], dtype=np.int32).reshape(1, 6)
    np.testing.assert_array_equal(gather_multiaxis(data, coordinates, [0, 1]).reshape(-1), [7, 5, 3])
    column = np.array([[-1], [0]], dtype=np.int32)  # Gather of whole rows past 2**31 bytes
    assert gather_multiaxis(data, column, [0])[0, -1] == 7


def test_outputs_too_large_fail_before_allocating():
    huge = 2**40
    data = np.broadcast_to(np.float32(0), (huge, 1))  # views: no memory behind them
    indices = np.broadcast_to(np.int64(0), (1, huge))
    with pytest.raises(MemoryError, match=f"has {huge * huge} elements, which overflows int64"):
        gather_multiaxis(data, indices, [])
    with pytest.raises(MemoryError, match=r"needs 4096\.0 GiB, more than this machine's"):
        gather_multiaxis(np.zeros((2**20, 1), np.float32), np.zeros((1, 2**20), np.int64), [])
