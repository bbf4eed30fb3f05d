"""graphs.lower.lowering_builder: int64 constants emitted once, arithmetic on them folded, unread ones dropped."""

from onnx import TensorProto, numpy_helper

from gathermultiaxis.graphs.ir.builder import NameScope
from gathermultiaxis.graphs.lower.lowering_builder import LoweringBuilder


def test_equal_constants_are_one_node_and_arithmetic_on_them_is_folded():
    b = LoweringBuilder(17, NameScope(set()), "p")
    two, again = b.constant([2], "two"), b.constant([2], "other_role")
    assert two == again and [n.op_type for n in b.nodes] == ["Constant"]
    product = b.op("Mul", [two, b.constant([3], "three")], "six")
    assert b.constant_value(product).tolist() == [6]
    assert all(n.op_type == "Constant" for n in b.nodes)
    b.drop_unread_constants(product)
    assert [n.output[0] for n in b.nodes] == [product]


def test_values_known_only_at_run_time_and_old_opsets_stay_nodes():
    b = LoweringBuilder(17, NameScope({"x"}), "p")
    shape = b.op("Shape", ["x"], "shape")
    assert b.constant_value(shape) is None and b.nodes[-1].op_type == "Shape"
    old = LoweringBuilder(8, NameScope(set()), "p")  # a Constant holds any type only from opset 9
    total = old.op("Add", [old.constant(1, "one"), old.constant(2, "two")], "three")
    assert old.constant_value(total) is None and old.nodes[-1].op_type == "Add"


def test_arange_before_opset_11_counts_with_nonzero_or_a_loop():
    for opset, op in ((11, "Range"), (9, "NonZero"), (7, "Loop")):
        b = LoweringBuilder(opset, NameScope({"n"}), "p")
        b.arange("n", "positions")
        assert op in [n.op_type for n in b.nodes], opset



def test_typed_zero_is_one_element_of_the_type():
    b = LoweringBuilder(17, NameScope(set()), "p")
    for elem_type, zero in ((TensorProto.FLOAT, 0.0), (TensorProto.STRING, ""), (TensorProto.BOOL, False)):
        b.typed_zero(elem_type, "z")
        value = numpy_helper.to_array(b.nodes[-1].attribute[0].t)
        assert value.tolist() == [zero] and value.shape == (1,)
