"""graphs.sources.gather_elements: both alignments agree with NumPy's take_along_axis, on indices smaller than the
data (the data is cut first), and a known rank completes the unknown one."""

import numpy as np
from onnx import helper
from run_time_check import run_time_alignment

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.sources.gather_elements import SOURCE
from gathermultiaxis.ops import gather_multiaxis


def test_alignments_give_take_along_axis():
    data = np.arange(20, dtype=np.float32).reshape(4, 5)
    indices = np.array([[3, 0], [1, 1]], np.int64)  # smaller than the data on axis 1 too
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)
    expected = np.take_along_axis(data[:, :2], indices, axis=0)
    replacement = SOURCE.align(node, TensorInfo(1, data.shape), TensorInfo(7, indices.shape))
    assert replacement.slice_data_except == 0 and replacement.alignment.axes == (0,)
    np.testing.assert_array_equal(gather_multiaxis(data[:, :2], indices, [0]), expected)
    x, i, axes = run_time_alignment(SOURCE, node, data, indices)
    assert x.shape == (4, 2) and axes.tolist() == [0]
    np.testing.assert_array_equal(gather_multiaxis(x, i, axes.tolist()), expected)


def test_equal_ranks_and_rank_rule():
    data, indices = SOURCE.complete_ranks(TensorInfo(1, None), TensorInfo(7, (2, 3)))
    assert data == TensorInfo(1, (None, None)) and indices == TensorInfo(7, (2, 3))
    node = helper.make_node("GatherElements", ["x", "i"], ["y"])
    assert SOURCE.rank_rule(node, [TensorInfo(1, (4, 5, 6)), None], lambda n: None) == [TensorInfo(1, (None,) * 3)]
    assert SOURCE.first_opset == 11
