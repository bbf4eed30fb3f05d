"""graphs.ir.walk: the graphs a model holds, the nodes within them, the names it uses, attributes, constants."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.ir.walk import (all_names, any_node, attribute, constant_value, default_opset,
                                            holds_subgraph, model_nodes, moves_elements, names_read, node_holders,
                                            nodes_within, round_trip_cast, subgraphs)


def _value(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])


def _model():
    """Main graph: Relu, If (then: Neg reading the outer x; else: Loop whose body holds Abs); a function with Sigmoid."""
    loop_body = helper.make_graph([helper.make_node("Abs", ["x"], ["inner"], name="abs")], "loop_body", [], [_value("inner")])
    then_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["t"], name="neg")], "then", [], [_value("t")])
    else_branch = helper.make_graph([helper.make_node("Loop", ["", ""], ["e"], name="loop", body=loop_body)], "else", [],
                                    [_value("e")])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("If", ["cond"], ["o"], name="if", then_branch=then_branch, else_branch=else_branch)]
    graph = helper.make_graph(nodes, "main", [_value("x"), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [_value("r"), _value("o")])
    graph.sparse_initializer.append(helper.make_sparse_tensor(
        numpy_helper.from_array(np.ones(1, np.float32), "sparse"), numpy_helper.from_array(np.zeros(1, np.int64), "at"),
        [3]))
    function = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("Sigmoid", ["a"], ["b"], name="sig")],
                                    [helper.make_opsetid("", 17)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("com.other", 2), helper.make_opsetid("", 17)],
                             functions=[function])


def test_every_graph_and_node_of_a_model():
    model = _model()
    assert sorted(holder.name for holder in node_holders(model)) == ["else", "f", "loop_body", "main", "then"]
    assert sorted(node.name for node in model_nodes(model)) == ["abs", "if", "loop", "neg", "relu", "sig"]
    assert [node.name for node in nodes_within(model.graph.node)] == ["relu", "if", "loop", "abs", "neg"]
    assert any_node(model, lambda node: node.op_type == "Abs")
    assert not any_node(model, lambda node: node.op_type == "Gather")
    assert sorted(names_read(model.graph)) == ["", "", "cond", "x", "x", "x"]


def test_all_names_include_every_kind_of_name():
    names = all_names(_model())
    assert {"main", "then", "loop_body", "f", "relu", "x", "r", "cond", "inner", "a", "b", "sparse"} <= names


def test_subgraphs_and_holders():
    model = _model()
    relu, branch = model.graph.node
    assert not holds_subgraph(relu) and holds_subgraph(branch)
    body = branch.attribute[0].g
    assert holds_subgraph(helper.make_node("Custom", [], ["c"], domain="com.example", body=body))
    # a standard op other than If, Loop, Scan and SequenceMap has no graph attribute (ORT refuses one)
    assert not holds_subgraph(helper.make_node("Relu", ["x"], ["y"], body=body))
    assert [graph.name for attribute_proto in branch.attribute for graph in subgraphs(attribute_proto)] == ["else", "then"]  # (make_node sorts attributes)


def test_attributes_constants_and_opset():
    node = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array([1, 2]), name=""))
    assert constant_value(node).dims == [2]
    assert constant_value(helper.make_node("Constant", [], ["c"], value_ints=[1])) is None
    labelled = helper.make_node("Foo", [], ["y"], label="text", size=3)
    assert attribute(labelled, "label") == "text" and attribute(labelled, "size") == 3
    assert attribute(labelled, "absent", "default") == "default"
    assert default_opset(_model()) == 17
    assert default_opset(helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[])) == 1


def test_the_float16_round_trip_casts_and_moving_ops():
    to_float = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)
    back = helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT16)
    assert round_trip_cast(to_float) and not round_trip_cast(back)
    assert round_trip_cast(back, TensorProto.FLOAT16) and not round_trip_cast(None)
    expand = helper.make_node("Expand", ["x", "s"], ["y"])
    assert moves_elements(expand, TensorProto.FLOAT16) and not moves_elements(expand, TensorProto.BFLOAT16)
    assert moves_elements(helper.make_node("Squeeze", ["x"], ["y"]), TensorProto.BFLOAT16)
    assert not moves_elements(helper.make_node("Abs", ["x"], ["y"]), TensorProto.FLOAT16)
