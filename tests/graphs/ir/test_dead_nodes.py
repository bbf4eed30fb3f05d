"""graphs.ir.dead_nodes: the one dead-node remover, on a graph (its initializers too), on a list of nodes being
built, and over a whole model."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.ir.dead_nodes import remove_dead, remove_dead_in_model


def _value(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])


def _chain_graph():
    """w -> Abs -> a -> Neg -> n (nothing reads n); x -> Relu -> y (the output); an initializer nobody reads."""
    nodes = [helper.make_node("Abs", ["w"], ["a"], name="abs"), helper.make_node("Neg", ["a"], ["n"], name="neg"),
             helper.make_node("Relu", ["x"], ["y"], name="relu")]
    initializers = [numpy_helper.from_array(np.ones(2, np.float32), "w"),
                    numpy_helper.from_array(np.ones(2, np.float32), "unread")]
    return helper.make_graph(nodes, "g", [_value("x")], [_value("y")], initializers)


def test_a_graph_loses_the_candidates_nothing_reads_and_with_cascade_what_only_they_read():
    graph = _chain_graph()
    freed = remove_dead(graph, [graph.node[1]])  # Neg: its producer Abs is not a candidate
    assert [node.name for node in graph.node] == ["abs", "relu"] and freed == {"a"}
    assert [t.name for t in graph.initializer] == ["w"]  # "all": every unread initializer goes
    graph = _chain_graph()
    freed = remove_dead(graph, [graph.node[1]], cascade=True, initializers="freed")
    assert [node.name for node in graph.node] == ["relu"] and freed == {"a", "w"}
    assert [t.name for t in graph.initializer] == ["unread"]  # "freed": only what removed nodes read


def test_outputs_and_read_values_stay():
    graph = _chain_graph()
    assert remove_dead(graph, [graph.node[0], graph.node[2]], initializers="freed") == frozenset()
    assert [node.name for node in graph.node] == ["abs", "neg", "relu"]  # Neg reads a; y is a graph output
    assert [t.name for t in graph.initializer] == ["w", "unread"]


def test_a_list_keeps_its_order_its_objects_and_what_is_read_from_outside():
    nodes = [helper.make_node("Constant", [], [name], name=name, value_ints=[1]) for name in ("c0", "c1", "c2")]
    nodes.append(helper.make_node("Add", ["c1", "c1"], ["sum"], name="add"))
    kept = [nodes[1], nodes[2], nodes[3]]
    freed = remove_dead(nodes, nodes[:3], keep=["c2"])
    assert nodes == kept and all(a is b for a, b in zip(nodes, kept))
    assert freed == frozenset()  # a Constant reads nothing


def test_a_model_is_cleaned_graph_by_graph():
    """The last reader of an outer value sits in a subgraph: once it goes, the outer producer goes too."""
    body = helper.make_graph([helper.make_node("Identity", ["outer"], ["unused"], name="reader"),
                              helper.make_node("Identity", ["x"], ["t"], name="kept")], "then", [], [_value("t")])
    nodes = [helper.make_node("Abs", ["x"], ["outer"], name="producer"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=body, else_branch=body)]
    graph = helper.make_graph(nodes, "g", [_value("x"), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [_value("y")])
    model = helper.make_model(graph)
    remove_dead_in_model(model, {"unused"})
    branch = model.graph.node[-1]
    assert [node.name for node in model.graph.node] == ["if"]
    assert all([n.name for n in a.g.node] == ["kept"] for a in branch.attribute)
    remove_dead_in_model(model, set())  # nothing freed: nothing scanned
