"""graphs.passes.driver: the walk NodePass states: a pass on the caller's copy without inference changing nodes in place, repeats, splicing, the domain import."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import ClassVar

import onnx
from onnx import TensorProto, helper

from gathermultiaxis.graphs.passes import driver
from gathermultiaxis.graphs.passes.driver import drop_unused_domain, splice
from gathermultiaxis.graphs.passes.pass_base import NodePass, NotChanged, Visit
from gathermultiaxis.graphs.passes.pass_report import PassReport
from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE


def _value(name, elem_type=TensorProto.FLOAT, shape=(2,)):
    return helper.make_tensor_value_info(name, elem_type, shape)


def _model_with_a_branch():
    body = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="inner")], "body", [], [_value("r")])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["a"], name="first"),
                               helper.make_node("Identity", ["a"], ["b"], name="dropped"),
                               helper.make_node("If", ["cond"], ["c"], name="branch", then_branch=body, else_branch=body),
                               helper.make_node("Sigmoid", ["b"], ["d"], name="last")],
                              "g", [_value("x"), _value("cond", TensorProto.BOOL, ())], [_value("c"), _value("d")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _rename_in_place(node, scope):
    """Relu becomes Neg in place, absorbing the Identity after it when that is its only reader."""
    readers = scope.consumers.get(node.output[0], [])
    node.op_type = "Neg"
    removes = []
    if len(readers) == 1 and readers[0].op_type == "Identity":
        node.output[0] = readers[0].output[0]
        removes = [readers[0]]
    return Visit(None, removes=removes, in_place=True, detail={"renamed": True})


@dataclass
class _Row:
    name: str
    done: bool
    reason: str = ""


@dataclass
class _NewStyle(NodePass[dict]):
    report: PassReport = field(default_factory=PassReport)
    typing_copies: list = field(default_factory=list)
    in_place: ClassVar[bool] = True
    infers_types: ClassVar[bool] = False

    def targets(self, node):
        return node.op_type == "Relu"

    def begin(self, model, typing_copy):
        self.typing_copies.append(typing_copy)

    def outcome(self, node, path, detail, reason):
        return _Row(node.name, detail is not None, path)

    def visit(self, node, scope):
        return _rename_in_place(node, scope)


def test_a_pass_on_the_callers_copy_without_inference_changing_nodes_in_place(monkeypatch):
    def no_inference(light):
        raise AssertionError("a pass without infers_types must not infer")

    monkeypatch.setattr(driver, "inferred", no_inference)
    model = _model_with_a_branch()
    first = model.graph.node[0]
    graph_pass = _NewStyle()
    found = graph_pass(model)
    result = found.model
    assert found.modified and found.report is graph_pass.report
    assert result is model                     # no copy
    assert graph_pass.typing_copies == [None]  # no typing copy
    assert model.graph.node[0] is first        # changed where it is
    assert [n.name for n in model.graph.node] == ["first", "branch", "last"]
    assert [n.op_type for n in model.graph.node] == ["Neg", "If", "Sigmoid"]
    assert list(first.output) == ["b"]  # what the Sigmoid reads
    onnx.checker.check_model(model)
    branch = model.graph.node[1]
    assert [n.op_type for a in branch.attribute for n in a.g.node] == ["Neg", "Neg"]  # subgraphs walked too
    rows = [(o.name, o.reason, o.done) if isinstance(o, _Row) else o for o in graph_pass.report.outcomes]
    assert sorted(rows) == sorted([("first", "main graph", True),
                                                         ("inner", "main graph/branch.else_branch", True),
                                                         ("inner", "main graph/branch.then_branch", True)])


def test_a_hook_a_node_pass_does_not_override_is_never_called(monkeypatch):
    def called(*args):
        raise AssertionError("the driver called a default hook")

    for hook in ("prepare", "begin", "observe", "scope_infos"):
        monkeypatch.setattr(NodePass, hook, called)

    @dataclass
    class Plain(NodePass[None]):
        report: PassReport = field(default_factory=PassReport)

        def targets(self, node):
            return False

        def visit(self, node, scope):
            raise NotChanged("never")

        def outcome(self, node, path, detail, reason):
            return None

    assert not Plain()(_model_with_a_branch()).modified


@dataclass
class _OneAtATime(NodePass[str]):
    """Replaces each Relu by Neg, but only once the Relu before it (by name order) is gone: repeat is needed."""

    report: PassReport = field(default_factory=PassReport)
    repeat: ClassVar[bool] = True
    seen: list = field(default_factory=list)

    def targets(self, node):
        return node.op_type == "Relu"

    def observe(self, node, scope):
        self.seen.append(node.op_type)

    def visit(self, node, scope):
        if any(other.op_type == "Relu" and other.name < node.name for other in scope.graph.node):
            raise NotChanged("an earlier Relu is there")
        return Visit([helper.make_node("Neg", list(node.input), list(node.output), name=node.name)], detail="done")

    def outcome(self, node, path, detail, reason):
        return _Row(node.name, detail is not None, reason)


def test_repeat_walks_again_while_it_changes_some_and_leaves_some():
    relus = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"n{i}") for i in range(3)]
    graph = helper.make_graph(relus, "g", [_value("v0")], [_value("v3")])
    node_pass = _OneAtATime()
    result = node_pass(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert [node.op_type for node in result.model.graph.node] == ["Neg"] * 3
    assert [(row.name, row.done) for row in node_pass.report.outcomes] == [("n0", True), ("n1", True), ("n2", True)]
    assert node_pass.seen == ["Relu"] * 3 + ["Neg", "Relu", "Relu"] + ["Neg", "Neg", "Relu"]


def test_skip_without_targets_returns_the_model_itself():
    class Skipping(_OneAtATime):
        skip_without_targets: ClassVar[bool] = True

    model = helper.make_model(helper.make_graph([helper.make_node("Abs", ["x"], ["y"])], "g", [_value("x")],
                                                [_value("y")]), opset_imports=[helper.make_opsetid("", 17)])
    assert Skipping()(model).model is model and _OneAtATime()(model).model is not model


def test_splice_puts_replacements_where_their_nodes_were():
    graph = helper.make_graph([helper.make_node("Relu", [], [name], name=name) for name in "abc"], "g", [], [])
    graph.node.extend([helper.make_node("Neg", [], [name], name=name) for name in ("b1", "b2")])
    superseded = graph.node[2]  # held: the ids of live messages are what splice matches
    splice(graph, 3, {1: 2}, {id(superseded)})
    assert [node.name for node in graph.node] == ["a", "b1", "b2"]


def test_the_domain_import_goes_when_nothing_uses_it():
    graph = helper.make_graph([helper.make_node(OP_TYPE, ["x", "i", "a"], ["y"], domain=DOMAIN, mode="error")], "g",
                              [], [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    drop_unused_domain(model)
    assert [o.domain for o in model.opset_import] == ["", DOMAIN]
    del model.graph.node[:]
    drop_unused_domain(model)
    assert [o.domain for o in model.opset_import] == [""]


def test_the_counts_are_logged_under_the_packages_name(caplog):
    with caplog.at_level(logging.DEBUG, logger="gathermultiaxis"):
        _NewStyle()(_model_with_a_branch())
    records = [r for r in caplog.records if r.name == "gathermultiaxis.graphs.passes"]
    assert records[0].getMessage() == "_NewStyle: 3 done, 0 left as they were"
    assert [r.levelno for r in records] == [logging.INFO] + [logging.DEBUG] * 3  # one line a node at DEBUG


def test_walks_again_decides_whether_a_repeat_pass_walks_again():
    class Once(_OneAtATime):
        def walks_again(self, model, outcomes):
            self.asked = [(row.name, row.done) for row in outcomes]
            return False

    relus = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"n{i}") for i in range(3)]
    graph = helper.make_graph(relus, "g", [_value("v0")], [_value("v3")])
    node_pass = Once()
    result = node_pass(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert [node.op_type for node in result.model.graph.node] == ["Neg", "Relu", "Relu"]
    assert node_pass.asked == [("n0", True), ("n1", False), ("n2", False)]
    assert [(row.name, row.done) for row in node_pass.report.outcomes] == [("n0", True), ("n1", False), ("n2", False)]
