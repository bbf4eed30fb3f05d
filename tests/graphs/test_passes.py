"""The pass driver's pieces the session's bind step uses (graphs/passes.py): a scope's own initializers,
the readers count, and a pass that works on the caller's copy without inference, changing nodes in place."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs import passes
from gathermultiaxis.graphs.passes import ConstantView, GraphScope, Visit, run_pass
from gathermultiaxis.graphs.report import PassReport


def _value(name, elem_type=TensorProto.FLOAT, shape=(2,)):
    return helper.make_tensor_value_info(name, elem_type, shape)


def test_initializer_is_the_scopes_own():
    weight = numpy_helper.from_array(np.ones(3, np.float32), "weight")
    default = numpy_helper.from_array(np.zeros(3, np.float32), "default")  # also a graph input: a default only
    outer = helper.make_graph([helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(2)))],
                              "outer", [_value("default")], [_value("c")], [weight, default])
    inner = helper.make_graph([], "inner", [], [], [numpy_helper.from_array(np.ones(1, np.int64), "own")])
    outer_view = ConstantView(outer)
    view = ConstantView(inner, outer_view)
    assert outer_view.initializer("weight") is not None
    assert outer_view.initializer("default") is None  # a graph input's initializer may be overridden
    assert outer_view.initializer("c") is None        # a Constant's value, not an initializer
    assert outer_view.tensor("c") is not None
    assert view.initializer("own") is not None
    assert view.initializer("weight") is None         # the enclosing scope's
    assert view.tensor("weight") is not None          # (which the full view does see)


def test_initializer_keeps_external_data_unread(tmp_path):
    tensor = numpy_helper.from_array(np.arange(8, dtype=np.float32), "table")
    graph = helper.make_graph([], "g", [], [_value("table")], [tensor])
    model = helper.make_model(graph)
    onnx.save_model(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    loaded = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    found = ConstantView(loaded.graph).initializer("table")
    assert found.data_location == TensorProto.EXTERNAL
    assert {entry.key: entry.value for entry in found.external_data}["location"] == "m.data"


def test_constants_are_the_nodes_present_when_the_view_was_made():
    graph = helper.make_graph([helper.make_node("Constant", [], ["a"], value_ints=[1, 2])], "g", [], [_value("a")])
    view = ConstantView(graph)
    graph.node.append(helper.make_node("Constant", [], ["b"], value_ints=[3]))  # a replacement, appended later
    assert view["a"].tolist() == [1, 2]
    assert "b" not in view


def test_int64_cast_of_a_float_constant_is_read_on_demand():
    graph = helper.make_graph([helper.make_node("Constant", [], ["d"], value=numpy_helper.from_array(np.array([2.0, 3.0]))),
                               helper.make_node("Cast", ["d"], ["i"], to=TensorProto.INT64)], "g", [], [_value("i")])
    view = ConstantView(graph)
    assert "i" in view and view["i"].dtype == np.int64 and view["i"].tolist() == [2, 3]


def _scope(graph):
    return GraphScope(graph, "g", 17, None, {}, ConstantView(graph), len(graph.node), True)


def test_readers_count_nodes_once_and_subgraph_reads():
    then_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["t"]),
                                     helper.make_node("Identity", ["y"], ["t2"])], "then", [], [_value("t")])
    else_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [_value("e")])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["s"]),
                               helper.make_node("If", ["x"], ["o"], then_branch=then_branch, else_branch=else_branch)],
                              "g", [_value("x"), _value("y")], [_value("s"), _value("o")])
    scope = _scope(graph)
    assert scope.readers["x"] == 2  # Add (reading it twice) and If (directly and in both branches)
    assert scope.readers["y"] == 1  # read only inside the If's subgraph
    assert scope.readers["s"] == 1  # a graph output
    assert [node.op_type for node in scope.consumers["x"]] == ["Add", "If"]
    assert "y" not in scope.consumers


@dataclass
class _RenameInPlace:
    """Turns every Relu into Neg in place, absorbing the Identity after it when that is its only reader."""

    report: PassReport = field(default_factory=PassReport)
    typing_copies: list = field(default_factory=list)
    copies: ClassVar[bool] = False
    infers_types: ClassVar[bool] = False

    def targets(self, node):
        return node.op_type == "Relu"

    def begin(self, model, light):
        self.typing_copies.append(light)

    def outcome(self, node, path, visit, reason):
        return (node.name, path, visit is not None)

    def visit(self, node, scope: GraphScope):
        readers = scope.consumers.get(node.output[0], [])
        node.op_type = "Neg"
        removes = []
        if len(readers) == 1 and readers[0].op_type == "Identity":
            node.output[0] = readers[0].output[0]
            removes = [readers[0]]
        return Visit(None, removes=removes, in_place=True)


def test_a_pass_on_the_callers_copy_without_inference_changing_nodes_in_place(monkeypatch):
    def no_inference(light):
        raise AssertionError("a pass without infers_types must not infer")

    monkeypatch.setattr(passes, "inferred", no_inference)
    body = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="inner")], "body", [], [_value("r")])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["a"], name="first"),
                               helper.make_node("Identity", ["a"], ["b"], name="dropped"),
                               helper.make_node("If", ["cond"], ["c"], name="branch", then_branch=body, else_branch=body),
                               helper.make_node("Sigmoid", ["b"], ["d"], name="last")],
                              "g", [_value("x"), _value("cond", TensorProto.BOOL, ())], [_value("c"), _value("d")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    first = model.graph.node[0]
    graph_pass = _RenameInPlace()
    result = run_pass(model, graph_pass)
    assert result is model                   # no copy
    assert graph_pass.typing_copies == [None]  # no typing copy
    assert model.graph.node[0] is first      # changed where it is
    assert [n.name for n in model.graph.node] == ["first", "branch", "last"]
    assert [n.op_type for n in model.graph.node] == ["Neg", "If", "Sigmoid"]
    assert list(first.output) == ["b"]  # what the Sigmoid reads
    onnx.checker.check_model(model)
    branch = model.graph.node[1]
    assert [n.op_type for a in branch.attribute for n in a.g.node] == ["Neg", "Neg"]  # subgraphs walked too
    assert sorted(graph_pass.report.outcomes) == sorted([("first", "main graph", True),
                                                         ("inner", "main graph/branch.then_branch", True),
                                                         ("inner", "main graph/branch.else_branch", True)])

