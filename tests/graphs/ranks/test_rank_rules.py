"""graphs.ranks.rank_rules: the generic rules through apply_rank_rule, with the table it is given."""

from onnx import TensorProto, helper

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.ranks.rank_rules import RANK_RULES, apply_rank_rule, broadcast

T = TensorProto


def test_apply_rank_rule_reads_the_table_it_is_given():
    add = helper.make_node("Add", ["a", "b"], ["y"], domain="ai.onnx")
    inputs = [TensorInfo(T.FLOAT, (2, 3)), TensorInfo(T.FLOAT, (3,))]
    assert apply_rank_rule(add, inputs, lambda name: None, RANK_RULES) == [TensorInfo(T.FLOAT, (None, None))]
    assert apply_rank_rule(add, inputs, lambda name: None, {}) is None
    assert RANK_RULES[("", "Equal")] is broadcast
    equal = helper.make_node("Equal", ["a", "b"], ["y"])
    assert apply_rank_rule(equal, inputs, lambda name: None, RANK_RULES)[0].elem_type == T.BOOL
    malformed = helper.make_node("Concat", [], ["y"], axis=0)  # no inputs: the rule cannot tell, no error
    assert apply_rank_rule(malformed, [], lambda name: None, RANK_RULES) is None


def test_source_gathers_are_not_generic_rules():
    assert ("", "Gather") not in RANK_RULES and ("com.microsoft", "GatherBlockQuantized") not in RANK_RULES
