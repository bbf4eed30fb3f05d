"""graphs.ir.builder: fresh names, and helper nodes in the form the graph's opset requires."""

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from gathermultiaxis.graphs.ir.builder import NameScope, NodeBuilder


def test_fresh_names_are_never_handed_out_twice():
    names = NameScope({"a", "a_2"})
    assert [names.fresh("a"), names.fresh("a"), names.fresh("b"), names.fresh("b")] == ["a_1", "a_3", "b", "b_1"]
    assert {"a_1", "a_3", "b", "b_1"} <= names.taken


def _run(builder: NodeBuilder, output: str, opset: int):
    graph = helper.make_graph(list(builder.nodes), "g", [], [helper.make_value_info(output, onnx.TypeProto())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, {})[0]


def test_an_int64_constant_below_opset_9_is_a_double_constant_cast():
    builder = NodeBuilder(8, NameScope(set()), "p")
    name = builder.constant([1, 2], "value")
    assert [node.op_type for node in builder.nodes] == ["Constant", "Cast"]
    assert _run(builder, name, 8).tolist() == [1, 2]
    assert [node.op_type for node in NodeBuilder(9, NameScope(set()), "p").nodes] == []


def test_axes_are_an_attribute_before_opset_13_and_an_input_from_13():
    for opset, inputs in ((12, 1), (13, 2)):
        builder = NodeBuilder(opset, NameScope({"x"}), "p")
        out = builder.unsqueeze("x", [0], "aligned")
        unsqueeze = builder.nodes[-1]
        assert out == "p/aligned" and unsqueeze.op_type == "Unsqueeze" and len(unsqueeze.input) == inputs
    builder = NodeBuilder(13, NameScope({"x"}), "p")
    assert builder.unsqueeze("x", [], "none") == "x" and not builder.nodes  # no axes: no node


def test_the_last_output_takes_the_replaced_nodes_name():
    builder = NodeBuilder(17, NameScope({"x"}), "p")
    builder.cast("x", TensorProto.FLOAT, "to_float")
    builder.rename_last_output("y")
    assert list(builder.nodes[-1].output) == ["y"] and builder.nodes[-1].name == "p/to_float"


def test_a_cast_of_a_constant_runs():
    builder = NodeBuilder(17, NameScope(set()), "p")
    assert np.array_equal(_run(builder, builder.cast(builder.constant([1], "one"), TensorProto.FLOAT, "f"), 17), [1.0])
