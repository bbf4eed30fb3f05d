"""graphs/webnn/static_shapes.py: input shapes fixed, shape arithmetic folded (SHAPE_FOLDING)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.webnn.static_shapes import NotStatic, fix_input_shapes, fold_shape_arithmetic


def _shape_model(x_dims):
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Mul", ["s", "two"], ["m"]),
             helper.make_node("Reshape", ["x", "flat"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
                              [helper.make_tensor_value_info("m", TensorProto.INT64, None),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(2, np.int64), "two"),
                               numpy_helper.from_array(np.array([-1], np.int64), "flat")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_symbolic_inputs_need_shapes():
    model = _shape_model(["n", 3])
    with pytest.raises(NotStatic, match="symbolic or unknown dims"):
        fix_input_shapes(model)
    with pytest.raises(NotStatic, match="not an input"):
        fix_input_shapes(model, {"z": (1,)})
    fix_input_shapes(model, {"x": (4, 3)})
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [4, 3]


def test_shape_arithmetic_becomes_constants():
    model = _shape_model([4, 3])
    assert fold_shape_arithmetic(model) == 2  # Shape, then the Mul of its value; the Reshape reads data
    assert [node.op_type for node in model.graph.node] == ["Constant", "Reshape"]  # (Shape's constant: unread)
    assert numpy_helper.to_array(model.graph.node[0].attribute[0].t).tolist() == [8, 6]
    assert [init.name for init in model.graph.initializer] == ["flat"]  # "two" was read by the Mul only


def test_the_static_shape_steps_compose_as_passes():
    from gathermultiaxis.graphs.passes import Repeat, Sequential
    from gathermultiaxis.graphs.webnn.static_shapes import FixInputShapes, FoldShapeArithmetic

    model = _shape_model(["n", 3])
    result = Sequential(FixInputShapes({"x": (4, 3)}), Repeat(FoldShapeArithmetic(), 4))(model)
    assert result.model is model and result.modified
    assert [node.op_type for node in model.graph.node] == ["Constant", "Reshape"]
    assert not FoldShapeArithmetic()(model).modified  # nothing left to fold: Repeat stops there
