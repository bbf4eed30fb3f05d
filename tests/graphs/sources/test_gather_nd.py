"""graphs.sources.gather_nd: mode error_nonempty, a coordinate size known only at run time, and the run-time
alignment against ONNX's reference GatherND."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from run_time_check import run_time_alignment

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.sources.gather_nd import BATCH_DIMS_OPSET, SOURCE
from gathermultiaxis.graphs.sources.source_gather import NeedsRunTime
from gathermultiaxis.ops import Mode, gather_multiaxis


def test_static_rule():
    node = helper.make_node("GatherND", ["x", "i"], ["y"])
    assert SOURCE.align(node, TensorInfo(1, (3, 4)), TensorInfo(7, (2, 2))).mode is Mode.ERROR_NONEMPTY
    with pytest.raises(NeedsRunTime):
        SOURCE.align(node, TensorInfo(1, (3, 4)), TensorInfo(7, (2, "k")))
    assert SOURCE.mode is Mode.ERROR_NONEMPTY and BATCH_DIMS_OPSET == 12 and SOURCE.rank_rule is None


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("k", [1, 2])  # k = 0: onnx's reference GatherND fails; tests/graphs/test_rewrite* hold it against ORT
def test_run_time_alignment(opset, k):
    data = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    indices = np.zeros((2, 2, k), np.int64) + np.arange(k)[::-1]
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    expected = ReferenceEvaluator(model).run(None, {"x": data, "i": indices})[0]
    x, i, axes = run_time_alignment(SOURCE, node, data, indices, opset)
    got = gather_multiaxis(x, i, axes.tolist(), mode=Mode.ERROR_NONEMPTY)
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)
