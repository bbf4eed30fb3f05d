"""ops/runtime/bind/bind_steps.py: the model-wide steps of the bind step."""

from onnx import TensorProto
from support import gather_multiaxis_model

from gathermultiaxis.ops.runtime.bind.bind_steps import bridge_crossings, holds_gather


def test_a_gather_multiaxis_model_holds_one_bridge_node():
    model = gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64)
    assert holds_gather(model) and bridge_crossings(model) == 1
    model.graph.node[0].domain = ""
    assert not holds_gather(model) and bridge_crossings(model) == 0
