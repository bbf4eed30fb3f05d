"""graphs.schema: onnx's checker and shape inference understand GatherMultiaxis once the schema is registered."""

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.schema import VERSION, register_schema
from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE
from gathermultiaxis.ops.reference import reference_gather_multiaxis


def model(input_shape, indices_shape, axes):
    node = helper.make_node(OP_TYPE, ["x", "i", "axes"], ["y"], domain=DOMAIN, mode="error")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, indices_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * len(input_shape))],
                              [numpy_helper.from_array(np.array(axes, np.int64), "axes")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, VERSION)])


def test_registered_once():
    register_schema()
    register_schema()  # a second call does nothing (onnx would refuse a second registration)
    schema = onnx.defs.get_schema(OP_TYPE, VERSION, DOMAIN)
    assert [i.name for i in schema.inputs] == ["input", "indices", "axes"]


def test_checker_accepts_a_model_with_the_op():
    register_schema()
    onnx.checker.check_model(model([4, 5], [4, 3], [1]), full_check=True)


@pytest.mark.parametrize("input_shape,indices_shape,axes", [([4, 5], [4, 3], [1]), ([3, 1, 6], [1, 7, 2], [0, 2])])
def test_inferred_shape_is_the_reference_shape(input_shape, indices_shape, axes):
    register_schema()
    if not hasattr(onnx.defs.OpSchema, "set_type_and_shape_inference_function"):
        pytest.skip("onnx < 1.19 takes no Python inference function")
    inferred = onnx.shape_inference.infer_shapes(model(input_shape, indices_shape, axes), strict_mode=True)
    y = inferred.graph.output[0].type.tensor_type
    expected = reference_gather_multiaxis(np.zeros(input_shape, np.float32), np.zeros(indices_shape, np.int64), axes)
    assert y.elem_type == TensorProto.FLOAT
    assert [d.dim_value for d in y.shape.dim] == list(expected.shape)


def test_inference_rejects_ranks_that_differ():
    register_schema()
    if not hasattr(onnx.defs.OpSchema, "set_type_and_shape_inference_function"):
        pytest.skip("onnx < 1.19 takes no Python inference function")
    with pytest.raises(onnx.shape_inference.InferenceError, match="rank"):
        onnx.shape_inference.infer_shapes(model([4, 5], [4], [1]), strict_mode=True)
