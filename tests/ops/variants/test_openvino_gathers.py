"""OpenVINO Gather-1/7/8 and GatherND-5/8: the specs' examples and IR layer shapes."""

import numpy as np
import pytest

from gathermultiaxis.ops.variants import openvino_gathers as v
from gathermultiaxis.ops.variants.openvino_gathers import GATHER_MODES


D5 = np.array([1, 2, 3, 4, 5])
D2x5 = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
D2x2x5 = np.arange(1, 21).reshape(2, 2, 5)
D2x1x5x4 = np.arange(1, 41).reshape(2, 1, 5, 4)
GATHER_EXAMPLES = {  # OpenVINO Gather-7 and Gather-8 examples 1-5, Gather-8 examples 6-7
    "1": (D5, [0, 0, 4], 0, 0, [1, 1, 5], (7, 8)),
    "2": (D2x5, [[0, 0, 4], [4, 0, 0]], 1, 1, [[1, 1, 5], [10, 6, 6]], (7, 8)),
    "3": (D2x2x5, [[[0, 0, 4], [4, 0, 0]], [[1, 2, 4], [4, 3, 2]]], 2, 2,
          [[[1, 1, 5], [10, 6, 6]], [[12, 13, 15], [20, 19, 18]]], (7, 8)),
    "4": (D2x1x5x4, [[1, 2, 4], [4, 3, 2]], 2, 1,
          [[[[5, 6, 7, 8], [9, 10, 11, 12], [17, 18, 19, 20]]], [[[37, 38, 39, 40], [33, 34, 35, 36], [29, 30, 31, 32]]]],
          (7, 8)),
    "5-negative-batch-dims": (D2x5, [[0, 0, 4], [4, 0, 0]], 1, -1, [[1, 1, 5], [10, 6, 6]], (7, 8)),
    "6-negative-indices": (D5, [0, -2, -1], 0, 0, [1, 4, 5], (8,)),
    "7-out-of-range": (D5, [3, 10, -20], 0, 0, [4, 0, 0], (8,)),
}


@pytest.mark.parametrize("name", sorted(GATHER_EXAMPLES))
def test_openvino_gather_spec_examples(name):
    data, indices, axis, batch_dims, expected, versions = GATHER_EXAMPLES[name]
    for version in versions:
        output = v.openvino_gather(data, np.array(indices), axis, batch_dims, version)
        np.testing.assert_array_equal(output, expected)


def test_openvino_gather_ir_layer_shapes():
    assert v.openvino_gather(np.zeros((6, 12, 10, 24)), np.zeros((15, 4, 20, 28), np.int64), 1, version=1).shape \
        == (6, 15, 4, 20, 28, 10, 24)  # Gather-1
    assert v.openvino_gather(np.zeros((2, 64, 128)), np.zeros((2, 32, 21), np.int64), 1, 1).shape == (2, 32, 21, 128)


S2x2 = np.array([[1, 2], [3, 4]])
GATHER_ND_EXAMPLES = {  # OpenVINO GatherND-8 examples 1-7
    "1-elements": (S2x2, [[0, 0], [1, 0]], 0, [1, 3]),
    "2-slices": (S2x2, [[1], [0]], 0, [[3, 4], [1, 2]]),
    "3-leading-dims": (S2x2, [[[1]], [[0]]], 0, [[[3, 4]], [[1, 2]]]),
    "4-batch-elements": (S2x2, [[1], [0]], 1, [2, 3]),
    "5-batch-slices": (np.arange(1, 25).reshape(2, 3, 4), [[1], [0]], 1, [[5, 6, 7, 8], [13, 14, 15, 16]]),
    "6-batch2": (np.arange(1, 25).reshape(2, 3, 4), [[[[1]], [[0]], [[2]]], [[[0]], [[2]], [[2]]]], 2,
                 [[[2], [5], [11]], [[13], [19], [23]]]),
    "7-batch3": (np.arange(1, 17).reshape(1, 2, 2, 4), [[[[1], [0]], [[3], [2]]]], 3, [[[2, 5], [12, 15]]]),
}


@pytest.mark.parametrize("name", sorted(GATHER_ND_EXAMPLES))
def test_openvino_gather_nd_spec_examples(name):
    data, indices, batch_dims, expected = GATHER_ND_EXAMPLES[name]
    np.testing.assert_array_equal(v.openvino_gather_nd(data, np.array(indices), batch_dims), expected)


def test_openvino_gather_nd_ir_layer_shapes():
    for data_shape, indices_shape, batch_dims, output_shape in [
            ((1000, 256, 10, 15), (25, 125, 3), 0, (25, 125, 15)),
            ((30, 2, 100, 35), (30, 2, 3, 1), 2, (30, 2, 3, 35)),
            ((1, 64, 64, 320), (1, 64, 64, 1, 1), 3, (1, 64, 64, 1))]:
        data = np.zeros(data_shape, np.float32)
        assert v.openvino_gather_nd(data, np.zeros(indices_shape, np.int64), batch_dims).shape == output_shape


def test_gather_8_gives_zero_out_of_range_and_earlier_versions_raise():
    from gathermultiaxis.ops import GatherIndexError, Mode

    assert GATHER_MODES == {1: Mode.ERROR, 7: Mode.ERROR, 8: Mode.ZERO}
    np.testing.assert_array_equal(v.openvino_gather(np.arange(3), np.array([5]), 0, version=8), [0])
    for version in (1, 7):
        with pytest.raises(GatherIndexError):
            v.openvino_gather(np.arange(3), np.array([5]), 0, version=version)


@pytest.mark.parametrize("call, words", [
    (lambda: v.openvino_gather(np.arange(3), np.array([0]), 0, version=2), "versions 1, 7 and 8"),
    (lambda: v.openvino_gather(np.zeros((2, 3)), np.zeros((2, 1), np.int64), 1, 1, version=1), "no batch_dims"),
    (lambda: v.openvino_gather_nd(np.arange(3), np.array([[0]]), version=6), "versions 5 and 8")])
def test_bad_versions_are_refused(call, words):
    with pytest.raises(ValueError, match=words):
        call()
