"""graphs.passes.pass_base: ModelPass's requires/call/ensures, Sequential and Repeat, and a NodePass that
overrides only what it needs."""

from dataclasses import dataclass, field

import pytest
from onnx import ModelProto, TensorProto, helper

from gathermultiaxis.graphs.passes.pass_base import (ModelPass, NodePass, NotChanged, PassResult, Repeat,
                                                     Sequential, Visit)
from gathermultiaxis.graphs.passes.pass_report import PassReport


def _model(*op_types):
    nodes = [helper.make_node(op, [f"v{i}"], [f"v{i + 1}"], name=f"n{i}") for i, op in enumerate(op_types)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(f"v{len(op_types)}", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _Counting(ModelPass):
    """Appends one Identity per call while fewer than ``limit`` nodes; records what it saw."""

    def __init__(self, limit, log):
        self.limit, self.log = limit, log

    def requires(self, model):
        self.log.append(("requires", len(model.graph.node)))

    def ensures(self, model):
        self.log.append(("ensures", len(model.graph.node)))

    def call(self, model):
        if len(model.graph.node) >= self.limit:
            return PassResult(model, False)
        result = ModelProto()
        result.CopyFrom(model)
        count = len(result.graph.node)
        result.graph.node.append(helper.make_node("Identity", [f"v{count}"], [f"v{count + 1}"]))
        return PassResult(result, True)


def test_a_model_pass_checks_before_and_after():
    log = []
    result = _Counting(5, log)(_model("Relu"))
    assert result.modified and log == [("requires", 1), ("ensures", 2)]


def test_sequential_feeds_each_result_to_the_next():
    log = []
    result = Sequential(_Counting(5, log), _Counting(2, log), _Counting(5, log))(_model("Relu"))
    assert len(result.model.graph.node) == 3 and result.modified and result.report is None
    assert log == [("requires", 1), ("ensures", 2), ("requires", 2), ("ensures", 2), ("requires", 2), ("ensures", 3)]
    assert not Sequential(_Counting(1, []))(_model("Relu")).modified


def test_repeat_stops_when_nothing_changes_or_after_max_rounds():
    assert len(Repeat(_Counting(3, []), 10)(_model("Relu")).model.graph.node) == 3  # stopped: unchanged
    capped = Repeat(_Counting(10, []), 4)(_model("Relu"))
    assert len(capped.model.graph.node) == 5 and capped.modified
    assert not Repeat(_Counting(1, []), 4)(_model("Relu")).modified


@dataclass
class _Row:
    name: str
    done: bool
    detail: str | None
    reason: str


@dataclass
class _ReluToNeg(NodePass[str]):
    """Relu becomes Neg (a replacement node), except a node named "keep"; only the two abstract hooks and
    ``outcome`` are written."""

    report: PassReport = field(default_factory=PassReport)

    def targets(self, node):
        return node.op_type == "Relu"

    def visit(self, node, scope):
        if node.name == "keep":
            raise NotChanged("asked to keep it")
        return Visit([helper.make_node("Neg", list(node.input), list(node.output), name=node.name)], detail="negated")

    def outcome(self, node, path, detail, reason):
        return _Row(node.name, detail is not None, detail, reason)


def test_a_node_pass_gets_its_typed_detail_and_a_result():
    model = _model("Relu", "Sigmoid", "Relu")
    model.graph.node[2].name = "keep"
    node_pass = _ReluToNeg()
    result = node_pass(model)
    assert [node.op_type for node in result.model.graph.node] == ["Neg", "Sigmoid", "Relu"]
    assert [node.op_type for node in model.graph.node] == ["Relu", "Sigmoid", "Relu"]  # a copy was changed
    assert result.modified and result.report is node_pass.report
    assert node_pass.report.outcomes == [_Row("n0", True, "negated", ""), _Row("keep", False, None, "asked to keep it")]
    unchanged = _ReluToNeg()(_model("Sigmoid"))
    assert not unchanged.modified and unchanged.report.outcomes == []


def test_the_hooks_have_defaults():
    node_pass = _ReluToNeg()
    node = helper.make_node("Relu", ["a"], ["b"])
    assert node_pass.copy_targets(node) and node_pass.prepare(ModelProto()) is None
    assert node_pass.begin(ModelProto(), None) is None and node_pass.observe(node, None) is None
    assert not node_pass.in_place and node_pass.infers_types and not node_pass.repeat


def test_the_abstract_hooks_must_be_written():
    class Incomplete(NodePass):
        def targets(self, node):
            return False

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()
