"""graphs.rewrite.output_types: a replaced output gets one value_info, unless its graph declares it."""

from onnx import TensorProto, helper

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.rewrite.output_types import Declared, declare_output


def test_declare_output_once():
    node = helper.make_node("Gather", ["x", "i"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    infos = {"x": TensorInfo(TensorProto.FLOAT, (3, 4)), "y": TensorInfo(0, (2, 4))}
    declared = Declared.of(graph)
    assert declare_output(graph, node, infos, False, declared)
    assert [(v.name, v.type.tensor_type.elem_type, len(v.type.tensor_type.shape.dim)) for v in graph.value_info] == [
        ("y", TensorProto.FLOAT, 2)]
    assert not declare_output(graph, node, infos, False, declared)  # typed already
    assert not declare_output(graph, node, infos, False, declared, frozenset(), None, opt_in=True)
