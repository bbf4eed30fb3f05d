"""graphs.rewrite.replacement: the replacement of one gather, static or at run time, and its refusals."""

import pytest
from onnx import TensorProto, helper

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.ir.builder import NameScope, NodeBuilder
from gathermultiaxis.graphs.passes.pass_report import LeftUnchanged
from gathermultiaxis.graphs.rewrite.replacement import emit_replacement

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _builder(opset=13):
    return NodeBuilder(opset, NameScope({"x", "i", "y"}), "g")


def _modes(builder):
    return [a.s.decode() for n in builder.nodes if n.op_type == "GatherMultiaxis" for a in n.attribute if a.name == "mode"]


def test_static_and_run_time_replacements():
    node = helper.make_node("GatherND", ["x", "i"], ["y"])
    builder = _builder()
    assert emit_replacement(node, TensorInfo(F, (3, 4)), TensorInfo(I64, (2, 2)), builder) is None
    assert builder.nodes[-1].output[0] == "y" and _modes(builder) == ["error_nonempty"]
    builder = _builder()
    missing = emit_replacement(node, TensorInfo(F, (3, 4)), TensorInfo(I64, (2, "k")), builder)
    assert "coordinate size" in missing and _modes(builder) == ["error_nonempty"]
    with pytest.raises(LeftUnchanged, match="run-time alignment is off"):
        emit_replacement(node, TensorInfo(F, (3, 4)), TensorInfo(I64, None), _builder(), allow_runtime=False)


def test_refusals():
    node = helper.make_node("Gather", ["x", "i"], ["y"])
    with pytest.raises(LeftUnchanged, match="BFLOAT16 needs a Cast"):
        emit_replacement(node, TensorInfo(TensorProto.BFLOAT16, (3,)), TensorInfo(I64, (2,)), _builder(11))
    elements = helper.make_node("GatherElements", ["x", "i"], ["y"])
    builder = _builder()
    assert emit_replacement(elements, TensorInfo(F, None), TensorInfo(I64, (2, 2)), builder) is None  # equal ranks
