"""numpy.take and take_along_axis as one gather each (random cases: tests/peers/test_variants.py)."""

import numpy as np
import pytest

from gathermultiaxis.ops import GatherIndexError
from gathermultiaxis.ops.variants import numpy_gathers as v

X = np.arange(24).reshape(2, 3, 4)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_take(axis):
    indices = np.array([[1, -1], [0, 1]])
    np.testing.assert_array_equal(v.numpy_take(X, indices, axis), np.take(X, indices, axis))


def test_take_raises_like_mode_raise():
    with pytest.raises(GatherIndexError):
        v.numpy_take(X, np.array([24]))


@pytest.mark.parametrize("axis, indices", [(1, np.array([[[2], [0], [-1]]])), (None, np.array([23, -24, 5]))])
def test_take_along_axis_broadcasts(axis, indices):
    np.testing.assert_array_equal(v.numpy_take_along_axis(X, indices, axis), np.take_along_axis(X, indices, axis))
