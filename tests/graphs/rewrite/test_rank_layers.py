"""graphs.rewrite.rank_layers: the generic and the source gathers' rank rules in one table; why a rank is unknown."""

from onnx import TensorProto, helper

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.ranks.rank_rules import RANK_RULES as GENERIC
from gathermultiaxis.graphs.rewrite.rank_layers import RANK_RULES, why_rank_unknown
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
