"""The NumPy kernel against the per-element reference, plus its error messages."""

import numpy as np
import pytest
from hypothesis import given, settings
from support import assert_bit_identical, gather_cases

from gathermultiaxis import GatherIndexError, GatherShapeError, gather_multiaxis
from gathermultiaxis.ops.reference import reference_gather_multiaxis

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint64, np.bool_, object]


@settings(max_examples=600, deadline=None)
@given(case=gather_cases())
def test_kernel_matches_reference(case):
    for dtype in DTYPES:
        data = case.as_dtype(dtype)
        try:
            expected = reference_gather_multiaxis(data, case.indices, case.axes, case.mode)
        except (GatherIndexError, GatherShapeError) as error:
            with pytest.raises(type(error)):
                gather_multiaxis(data, case.indices, case.axes, case.mode)
            continue
        indices_before = case.indices.copy()
        assert_bit_identical(gather_multiaxis(data, case.indices, case.axes, case.mode), expected)
        assert_bit_identical(case.indices, indices_before)  # the caller's indices are never written


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


def test_block_gather_keeps_input_untouched_and_returns_contiguous():
    table = np.arange(20, dtype=np.float32).reshape(5, 4)
    output = gather_multiaxis(table, np.array([[4], [0]]), [0])
    np.testing.assert_array_equal(output, table[[4, 0]])
    assert output.flags.c_contiguous
    np.testing.assert_array_equal(table, np.arange(20).reshape(5, 4))
