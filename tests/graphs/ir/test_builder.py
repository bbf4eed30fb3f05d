"""graphs.ir.builder: fresh names, and helper nodes in the form the graph's opset requires."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from gathermultiaxis.graphs.ir.builder import (TEMPLATE_LIMIT, NameScope, NodeBuilder, attribute_key,
                                               int64_constant_template, node_template)


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


def test_nodes_from_templates_have_the_bytes_make_node_gives():
    graph = onnx.GraphProto()
    for nodes in ([], graph.node):  # a list, and a repeated field (nodes made in place)
        builder = NodeBuilder(17, NameScope({"x", "i"}), "p", nodes)
        aligned = builder.unsqueeze("x", [0, 2], "align")
        builder.gather_multiaxis(aligned, "i", [1], "y", "g", "raise")
        builder.cast("y", TensorProto.FLOAT, "f")
        axes = numpy_helper.from_array(np.array([0, 2], np.int64), name="")
        want = [helper.make_node("Constant", [], ["p/align_axes"], name="p/align_axes", value=axes),
                helper.make_node("Unsqueeze", ["x", "p/align_axes"], ["p/align"], name="p/align"),
                helper.make_node("Constant", [], ["p/axes"], name="p/axes",
                                 value=numpy_helper.from_array(np.array([1], np.int64), name="")),
                helper.make_node("GatherMultiaxis", ["p/align", "i", "p/axes"], ["y"], name="g",
                                 domain="ai.onnx.contrib", mode="raise"),
                helper.make_node("Cast", ["y"], ["p/f"], name="p/f", to=TensorProto.FLOAT)]
        assert [node.SerializeToString() for node in nodes] == [node.SerializeToString() for node in want]
    assert not node_template("Cast", None, (("to", TensorProto.FLOAT),)).output  # the template stays empty


def test_only_plain_attribute_values_have_a_template_key():
    assert attribute_key({"to": 1, "axes": [0, 1], "mode": "clip"}) == (("axes", (0, 1)), ("mode", "clip"), ("to", 1))
    tensor = numpy_helper.from_array(np.zeros(1, np.float32), name="")
    assert all(attribute_key(values) is None
               for values in ({"value": tensor}, {"axes": []}, {"alpha": 1.0}, {"flag": True}, {"to": None}))


def test_a_large_int64_constant_is_made_whole_and_not_kept():
    builder = NodeBuilder(17, NameScope(set()), "p")
    values = np.arange(TEMPLATE_LIMIT + 1)
    before = int64_constant_template.cache_info().currsize
    name = builder.constant(values, "big")
    want = helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(values, name=""))
    assert builder.nodes[-1].SerializeToString() == want.SerializeToString()
    assert int64_constant_template.cache_info().currsize == before
