"""ONNX Gather, GatherElements and GatherND as one gather each (against ORT: tests/peers/test_variants.py)."""

import numpy as np
import pytest

from gathermultiaxis.ops import GatherIndexError
from gathermultiaxis.ops.variants import onnx_gathers as v

X = np.arange(24).reshape(2, 3, 4)


def test_gather_is_numpy_take_with_negative_indices():
    indices = np.array([[2, -1], [0, 1]])
    np.testing.assert_array_equal(v.onnx_gather(X, indices, axis=1), np.take(X, indices, axis=1))
    with pytest.raises(GatherIndexError):
        v.onnx_gather(X, np.array([3]), axis=1)


def test_gather_elements_takes_indices_smaller_than_the_data():
    indices = np.array([[[2, 0]], [[1, -1]]])  # [2, 1, 2]: smaller than X on axis 1
    expected = np.take_along_axis(X[:, :1, :], indices, axis=2)
    np.testing.assert_array_equal(v.onnx_gather_elements(X, indices, axis=2), expected)


def test_gather_nd_with_batch_dims():
    indices = np.array([[[1, 3]], [[2, 0]]])
    np.testing.assert_array_equal(v.onnx_gather_nd(X, indices, batch_dims=1), [[X[0, 1, 3]], [X[1, 2, 0]]])
