"""graphs.ranks.symbolic_inference: ORT's symbolic shape inference run step by step, its partial result kept
where ``infer_shapes`` would raise, and its private steps looked up as one group."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.ranks import symbolic_inference
from gathermultiaxis.ops.private_api import TESTED_VERSIONS, PrivateAPIError


@pytest.fixture
def fresh_lookup():
    for group in (symbolic_inference.symbolic_shape_inference, symbolic_inference.symbolic_shape_infer_module):
        group.cache_clear()
    yield
    for group in (symbolic_inference.symbolic_shape_inference, symbolic_inference.symbolic_shape_infer_module):
        group.cache_clear()


def _model_with_an_unknown_op():
    """x [N, 3] -> Relu -> an op no inference knows -> Transpose: what follows the unknown op stays unknown."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mystery", ["r"], ["m"], domain="custom.test"),
             helper.make_node("Transpose", ["m"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.zeros(1, np.float32), "unused")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom.test", 1)])


def test_the_partial_result_is_kept(tmp_path, monkeypatch, fresh_lookup):
    monkeypatch.chdir(tmp_path)
    model = _model_with_an_unknown_op()
    before = model.SerializeToString()
    inferred = symbolic_inference.partial_symbolic_inference(model)
    assert model.SerializeToString() == before  # the model is left unchanged
    shapes = {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
              for value in inferred.graph.value_info}
    assert shapes["r"] == ["N", 3]  # inferred before the op it does not know
    assert list(tmp_path.iterdir()) == []  # nothing saved into the working folder


def test_a_missing_step_is_one_clear_error(monkeypatch, fresh_lookup):
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    monkeypatch.delattr(SymbolicShapeInference, "_update_output_from_vi")
    with pytest.raises(PrivateAPIError) as raised:
        symbolic_inference.partial_symbolic_inference(onnx.ModelProto())
    assert "SymbolicShapeInference._update_output_from_vi" in str(raised.value)
    assert TESTED_VERSIONS in str(raised.value)
