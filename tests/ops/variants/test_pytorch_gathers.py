"""torch's gathers on NumPy arrays, against NumPy's equivalents (against torch: tests/peers/test_variants.py)."""

import numpy as np

from gathermultiaxis.ops.variants import pytorch_gathers as v

X = np.arange(24).reshape(2, 3, 4)


def test_gather_crops_the_other_dims_to_the_index():
    index = np.array([[[3, 0]], [[1, 2]]])  # [2, 1, 2]
    np.testing.assert_array_equal(v.torch_gather(X, 2, index), np.take_along_axis(X[:, :1, :], index, axis=2))


def test_take_and_take_along_dim_flatten():
    np.testing.assert_array_equal(v.torch_take(X, np.array([[23, -1]])), [[23, 23]])
    np.testing.assert_array_equal(v.torch_take_along_dim(X, np.array([5, 0])), [5, 0])
    index = np.array([[[1]], [[2]]])
    np.testing.assert_array_equal(v.torch_take_along_dim(X, index, 1), np.take_along_axis(X, index, 1))


def test_index_select_keeps_the_rank():
    np.testing.assert_array_equal(v.torch_index_select(X, 1, np.array([2, 0])), X[:, [2, 0], :])
    assert v.torch_index_select(X, 2, np.array(1)).shape == (2, 3, 1)
