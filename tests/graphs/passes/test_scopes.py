"""graphs.passes.scopes: what a visit sees of its graph (readers, consumers, producers, types), and the
inferred twin of a graph (the subgraph holders' copies, walked beside the originals)."""

import onnx
from onnx import TensorProto, helper

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.ir.builder import NameScope
from gathermultiaxis.graphs.ir.constant_view import ConstantView
from gathermultiaxis.graphs.passes.scopes import GraphScope, InferredGraph


def _value(name, elem_type=TensorProto.FLOAT, shape=(2,)):
    return helper.make_tensor_value_info(name, elem_type, shape)


def _scope(graph, infos=None):
    return GraphScope(graph, "g", 17, NameScope(set()), infos or {}, ConstantView(graph), len(graph.node), True)


def _graph_with_an_if():
    then_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["t"]),
                                     helper.make_node("Identity", ["y"], ["t2"])], "then", [], [_value("t")])
    else_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [_value("e")])
    return helper.make_graph([helper.make_node("Add", ["x", "x"], ["s"], name="add"),
                              helper.make_node("If", ["x"], ["o"], name="if", then_branch=then_branch,
                                               else_branch=else_branch)],
                             "g", [_value("x"), _value("y")], [_value("s"), _value("o")])


def test_readers_count_nodes_once_and_subgraph_reads():
    scope = _scope(_graph_with_an_if())
    assert scope.readers["x"] == 2  # Add (reading it twice) and If (directly and in both branches)
    assert scope.readers["y"] == 1  # read only inside the If's subgraph
    assert scope.readers["s"] == 1  # a graph output
    assert [node.op_type for node in scope.consumers["x"]] == ["Add", "If"]
    assert "y" not in scope.consumers
    assert scope.producers["s"].name == "add"


def test_own_nodes_are_those_before_the_replacements():
    graph = _graph_with_an_if()
    scope = _scope(graph)
    graph.node.append(helper.make_node("Neg", ["s"], ["n"], name="appended"))
    assert [node.name for node in scope.own_nodes()] == ["add", "if"] and "n" not in scope.producers


def test_info_of_an_unknown_name():
    scope = _scope(_graph_with_an_if(), {"x": TensorInfo(TensorProto.FLOAT, (2,))})
    assert scope.info("x").shape == (2,) and scope.info("nothing") == GraphScope.UNKNOWN


def test_the_inferred_twin_walks_beside_the_original():
    model = helper.make_model(_graph_with_an_if(), opset_imports=[helper.make_opsetid("", 17)])
    inferred = onnx.shape_inference.infer_shapes(model)
    twin = InferredGraph.of(inferred.graph, True)
    assert twin.typed and set(twin.holders) == {1} and twin.infos["s"].shape == (2,)
    branches = [(name, graph.name) for name, graph, _ in twin.sub(1, model.graph.node[1])]
    assert branches == [("else_branch", "else"), ("then_branch", "then")]
    untyped = InferredGraph.untyped()
    assert not untyped.typed and [name for name, _, sub in untyped.sub(1, model.graph.node[1])] == [
        "else_branch", "then_branch"]
