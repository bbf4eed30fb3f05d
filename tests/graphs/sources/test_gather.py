"""graphs.sources.gather: the static alignment, the run-time one (the same alignment computed by the model) and
the rank rule agree with NumPy's take."""

import numpy as np
from onnx import TensorProto, helper
from run_time_check import run_time_alignment

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.sources.gather import SOURCE
from gathermultiaxis.ops import gather_multiaxis


def test_static_and_run_time_alignments_give_take():
    data, indices = np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.array([[2, 0]], np.int64)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=-2)
    expected = np.take(data, indices, axis=-2)
    alignment = SOURCE.align(node, TensorInfo(1, data.shape), TensorInfo(7, indices.shape)).alignment
    x = np.expand_dims(data, alignment.data_unsqueeze)
    i = np.expand_dims(indices, alignment.indices_unsqueeze)
    got = np.squeeze(gather_multiaxis(x, i, list(alignment.axes)), alignment.output_squeeze)
    np.testing.assert_array_equal(got, expected)
    x, i, axes = run_time_alignment(SOURCE, node, data, indices)
    np.testing.assert_array_equal(gather_multiaxis(x, i, axes.tolist()).reshape(expected.shape), expected)


def test_rank_rule_and_record():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    out = SOURCE.rank_rule(node, [TensorInfo(TensorProto.FLOAT, (2, "n", 4)), TensorInfo(7, (5, 6))], lambda n: None)
    assert out == [TensorInfo(TensorProto.FLOAT, (None,) * 4)]
    shape = SOURCE.rank_rule(node, [TensorInfo(7, (1, 3)), TensorInfo(7, ())], lambda n: None)
    assert shape == [TensorInfo(7, (1,))]  # a 1-D result keeps its exact length
    assert (SOURCE.op_type, SOURCE.first_opset, SOURCE.recorded_attributes) == ("Gather", 1, ("axis",))
