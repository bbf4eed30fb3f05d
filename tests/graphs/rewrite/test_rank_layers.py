"""graphs.rewrite.rank_layers: the generic and the source gathers' rank rules in one table; layer 3 on one node;
why a rank is unknown."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.ir.builder import NameScope
from gathermultiaxis.graphs.ir.constant_view import ConstantView
from gathermultiaxis.graphs.passes.scopes import GraphScope
from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.ranks.rank_rules import RANK_RULES as GENERIC
from gathermultiaxis.graphs.rewrite.rank_layers import RANK_RULES, type_by_rank_rule, why_rank_unknown
from gathermultiaxis.graphs.sources import gather, gather_block_quantized


def test_table_holds_generic_and_source_rules():
    assert RANK_RULES[("", "Gather")] is gather.rank_rule
    assert RANK_RULES[("com.microsoft", "GatherBlockQuantized")] is gather_block_quantized.rank_rule
    assert all(RANK_RULES[key] is rule for key, rule in GENERIC.items())


def test_why_rank_unknown_follows_producers():
    nodes = [helper.make_node("Custom", ["x"], ["a"], domain="com.example", name="c"),
             helper.make_node("Relu", ["a"], ["b"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)], [])
    infos = {"x": TensorInfo(TensorProto.FLOAT, (2,))}
    why = why_rank_unknown("b", graph, len(nodes), infos)
    assert why.startswith("'a' (via 'b') is an output of com.example.Custom node 'c'")
    assert "declared without a shape" in why_rank_unknown("x", graph, len(nodes), {})


def _scope(nodes, inputs, initializers, infos):
    graph = helper.make_graph(nodes, "g", inputs, [], initializers)
    return GraphScope(graph, "g", 17, NameScope(set()), infos, ConstantView(graph), len(graph.node), True)


def test_a_typed_node_is_still_folded_where_every_input_is_a_constant():
    two = numpy_helper.from_array(np.array([2], np.int64), "two")
    add = helper.make_node("Add", ["two", "two"], ["four"])
    typed = {"two": TensorInfo(TensorProto.INT64, (1,)), "four": TensorInfo(TensorProto.INT64, (1,))}
    scope = _scope([add], [], [two], dict(typed))
    type_by_rank_rule(add, scope)
    assert scope.cache["folded"]["four"].tolist() == [4] and scope.infos == typed


def test_a_typed_node_reading_a_run_time_value_is_left_as_it_is():
    two = numpy_helper.from_array(np.array([2], np.int64), "two")
    add = helper.make_node("Add", ["x", "two"], ["y"])
    typed = {"x": TensorInfo(TensorProto.INT64, (1,)), "two": TensorInfo(TensorProto.INT64, (1,)),
             "y": TensorInfo(TensorProto.INT64, (1,))}
    scope = _scope([add], [helper.make_tensor_value_info("x", TensorProto.INT64, [1])], [two], dict(typed))
    type_by_rank_rule(add, scope)
    assert scope.cache["folded"] == {} and scope.infos == typed
    scope.infos.pop("y")  # untyped: the rank rule types it
    type_by_rank_rule(add, scope)
    assert scope.infos["y"].rank == 1 and scope.infos["y"].elem_type == TensorProto.INT64
