"""Every worked example of the gatherMultiaxis proposal (shared/seeds/001_*), run through the kernel.

The GatherElements examples use the operator directly. The Gather and GatherND examples are given in
the proposal together with their "intermediate processing values": the input and indices reshaped to
the shapes stated there, the stated axes, and the stated output shape, which is then reshaped to the
final output. One stated intermediate is inconsistent (see test_gather_scalar_index_erratum).
"""

import numpy as np
import pytest

from gathermultiaxis import GatherGeometry, gather_multiaxis

TABLE_4x3 = np.array([[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]])
SQUARE = np.array([[1, 2], [3, 4]])
CUBE = np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]])


@pytest.mark.parametrize("data, indices, axis, expected", [
    (TABLE_4x3, [[3, 1, 1], [2, 0, 3]], 0, [[30, 11, 12], [20, 1, 32]]),
    (TABLE_4x3, [[2], [1], [0], [2]], 1, [[2], [11], [20], [32]]),
    (np.array([[[0, 1], [10, 11]], [[100, 101], [110, 111]], [[200, 201], [210, 211]],
               [[300, 301], [310, 311]]]),
     [[[0, 2], [1, 3]]], 0, [[[0, 201], [110, 311]]]),
], ids=["axis0", "axis1", "rank3-broadcast-free"])
def test_gather_elements_examples(data, indices, axis, expected):
    output = gather_multiaxis(data, np.array(indices), [axis])
    np.testing.assert_array_equal(output, expected)
    assert output.dtype == data.dtype


# (data, indices, final output, intermediate input shape, intermediate indices shape, axes,
#  intermediate output shape), as stated in the proposal's Gather and GatherND sections.
INTERMEDIATE_EXAMPLES = {
    "gather-axis0": (TABLE_4x3, [3, 1], [[30, 31, 32], [10, 11, 12]], [4, 3], [2, 1], [0], [2, 3]),
    "gather-axis1": (TABLE_4x3, [2, 1, 0, 1, 2],
                     [[2, 1, 0, 1, 2], [12, 11, 10, 11, 12], [22, 21, 20, 21, 22], [32, 31, 30, 31, 32]],
                     [4, 3], [1, 5], [1], [4, 5]),
    "gather-axis1-2d-indices": (TABLE_4x3, [[0, 1], [1, 2]],
                                [[[0, 1], [1, 2]], [[10, 11], [11, 12]], [[20, 21], [21, 22]], [[30, 31], [31, 32]]],
                                [4, 1, 3], [1, 2, 2], [2], [4, 2, 2]),
    "gather-1d-indices": (SQUARE, [1, 0], [[3, 4], [1, 2]], [2, 2], [2, 1], [0], [2, 2]),
    "gather-2d-indices": (SQUARE, [[1, 0], [0, 1]], [[[3, 4], [1, 2]], [[1, 2], [3, 4]]],
                          [2, 1, 2], [2, 2, 1], [0], [2, 2, 2]),
    "gathernd-pairs": (CUBE, [[0, 1], [1, 0]], [[2, 3], [4, 5]], [2, 2, 2], [1, 2, 2], [0, 1], [1, 2, 2]),
    "gathernd-blocks": (CUBE, [[1], [0], [1]], [[[4, 5], [6, 7]], [[0, 1], [2, 3]], [[4, 5], [6, 7]]],
                        [2, 2, 2], [3, 1, 1], [0], [3, 2, 2]),
    "gathernd-batch1": (CUBE, [[1], [0]], [[2, 3], [4, 5]], [2, 2, 2], [2, 1, 1], [1], [2, 1, 2]),
    "gathernd-triples": (CUBE, [[0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1]], [1, 2, 4, 6, 7],
                         [2, 2, 2], [5, 1, 3], [0, 1, 2], [5, 1, 1]),
}


@pytest.mark.parametrize("name", sorted(INTERMEDIATE_EXAMPLES))
def test_intermediate_processing_values(name):
    data, indices, expected, input_shape, indices_shape, axes, output_shape = INTERMEDIATE_EXAMPLES[name]
    output = gather_multiaxis(np.reshape(data, input_shape), np.reshape(indices, indices_shape), axes)
    assert list(output.shape) == output_shape
    np.testing.assert_array_equal(output.reshape(np.shape(expected)), expected)


def test_gather_scalar_index_erratum():
    """The proposal's scalar example (data [[1,2],[3,4]], indices 1, axis 0 -> [3, 4]) repeats the
    intermediate shapes of the next example (indices [2,1], output [2,2]); a scalar index has one
    element, so the consistent form is indices [1,1] and output [1,2], which gives the stated output."""
    with pytest.raises(ValueError):
        np.reshape(np.array(1), [2, 1])
    output = gather_multiaxis(SQUARE, np.reshape(1, [1, 1]), [0])
    assert output.shape == (1, 2)
    np.testing.assert_array_equal(output.reshape(2), [3, 4])


def test_gathernd_broadcasts_leading_input_dimension():
    """GatherND example with batch_dims=1 whose input batch dimension is 1 and is broadcast:
    data [[0,1,2]] (shape [1,3]), indices [[1],[2]] -> [1, 2]."""
    output = gather_multiaxis(np.array([[0, 1, 2]]), np.array([[1], [2]]), [1])
    assert output.shape == (2, 1)
    np.testing.assert_array_equal(output.reshape(2), [1, 2])


@pytest.mark.parametrize("input_shape, indices_shape, axes, output_shape", [
    ([4, 2, 1, 2], [1, 3, 2, 2], [1], [4, 3, 2, 2]),   # the "Given the following..." example
    ([2, 3, 1], [1, 1, 4], [1], [2, 1, 4]),             # reference-algorithm comment, 1-D coordinates
    ([10, 9, 8], [1, 5, 6 * 2], [1, 2], [10, 5, 6]),    # reference-algorithm comment, 2-D coordinates
])
def test_multiaxis_shape_examples(input_shape, indices_shape, axes, output_shape):
    assert list(GatherGeometry.infer(input_shape, indices_shape, axes).output_shape) == output_shape
    data = np.arange(np.prod(input_shape)).reshape(input_shape)
    output = gather_multiaxis(data, np.zeros(indices_shape, dtype=np.int64), axes)
    assert list(output.shape) == output_shape


def test_swapped_coordinate_order_on_nchw():
    """Axes need not be contiguous nor in order: (x, y) pairs read with axes [3, 2] on NCHW."""
    data = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    xy = np.array([[4, 0], [1, 3], [0, 2]])  # three (x, y) points
    output = gather_multiaxis(data, xy.reshape(1, 1, 3, 2), [3, 2])
    assert output.shape == (2, 3, 3, 1)
    expected = data[:, :, xy[:, 1], xy[:, 0]]
    np.testing.assert_array_equal(output[..., 0], expected)
    # the same points as (y, x) with axes [2, 3] give the same result
    np.testing.assert_array_equal(gather_multiaxis(data, xy[:, ::-1].reshape(1, 1, 3, 2), [2, 3]), output)
