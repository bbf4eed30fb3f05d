"""graphs.sources.run_time_shapes: shape arithmetic as graph nodes, evaluated by onnx's reference runtime."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from gathermultiaxis.graphs.ir.builder import NameScope, NodeBuilder
from gathermultiaxis.graphs.sources.run_time_shapes import ShapeArithmetic, reshape


@pytest.mark.parametrize("opset", [9, 13])
def test_reshape_keeps_size_zero_dims_and_axis_counts_from_the_end(opset):
    builder = NodeBuilder(opset, NameScope({"x", "s"}), "t")
    y = reshape(builder, "x", "s", "out")
    m = ShapeArithmetic(builder)
    axis = m.axis(-1, m.rank("x", "rank"), "axis")
    graph = helper.make_graph(builder.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                                   helper.make_tensor_value_info("s", TensorProto.INT64, None)],
                              [helper.make_tensor_value_info(n, 0, None) for n in (y, axis)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    run = ReferenceEvaluator(model).run
    out, last = run(None, {"x": np.zeros((2, 0), np.float32), "s": np.array([0, 1, 2], np.int64)})
    assert out.shape == (0, 1, 2) and last == 1
