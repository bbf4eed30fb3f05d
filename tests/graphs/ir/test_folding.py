"""graphs.ir.folding: one folder, its callers' policies. Each policy folds what its caller folded before the
folders were merged (the differential tests hold it against the callers' results)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.ir.builder import NameScope
from gathermultiaxis.graphs.ir.folding import BUILDER_FOLDING, GUARD_FOLDING, RANK_FOLDING, SHAPE_FOLDING, fold, slice_length
from gathermultiaxis.graphs.lower.lowering_builder import LoweringBuilder
from gathermultiaxis.graphs.webnn import fold_shape_arithmetic
from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE


def _node(op_type, count, **attributes):
    return helper.make_node(op_type, [f"in{i}" for i in range(count)], ["out"], **attributes)


# ---- RANK_FOLDING: the NumPy table, a few int32/int64 values

def test_rank_folding_computes_what_ort_computes():
    a, b = np.array([-7, 7], np.int64), np.array([2, -2], np.int64)
    assert fold(_node("Div", 2), [a, b], 17, RANK_FOLDING).tolist() == [-3, -3]  # truncates, as C++ does
    assert fold(_node("Mod", 2), [a, b], 17, RANK_FOLDING).tolist() == [1, -1]   # the divisor's sign
    assert fold(_node("Mod", 2, fmod=1), [a, b], 17, RANK_FOLDING).tolist() == [-1, 1]
    assert fold(_node("Div", 2), [a, np.zeros(2, np.int64)], 17, RANK_FOLDING) is None  # ORT would fail
    sliced = fold(_node("Slice", 4), [np.arange(10), np.array([8]), np.array([2]), np.array([0])], 17,
                  RANK_FOLDING)
    assert sliced.size == 0 and slice_length(10, 8, 2, 1) == 0
    assert slice_length(10, -1, np.iinfo(np.int64).max, -1) == 10  # "to the end" in the step's direction


def test_rank_folding_keeps_to_a_few_integers():
    small, large = np.arange(64, dtype=np.int64), np.arange(65, dtype=np.int64)
    assert fold(_node("Neg", 1), [small], 17, RANK_FOLDING).tolist() == (-small).tolist()
    assert fold(_node("Neg", 1), [large], 17, RANK_FOLDING) is None
    assert fold(_node("Neg", 1), [small.astype(np.float32)], 17, RANK_FOLDING) is None
    assert fold(_node("Cast", 1, to=TensorProto.INT32), [np.arange(3, dtype=np.uint8)], 17, RANK_FOLDING).dtype == np.int32
    assert fold(_node("Cast", 1, to=TensorProto.FLOAT), [np.arange(3)], 17, RANK_FOLDING) is None
    assert fold(_node("Shape", 1), [small], 17, RANK_FOLDING) is None  # not an op of its table
    assert fold(helper.make_node("Neg", ["x"], ["y"], domain="com.microsoft"), [small], 17, RANK_FOLDING) is None


def test_empty_squeeze_axes_by_policy():
    """An empty axes input of Squeeze: every size-1 dim goes for the rank rules, as ORT reads it; none for the
    lowering's guards (as they have always read it)."""
    node, values = _node("Squeeze", 2), [np.arange(3).reshape(1, 3, 1), np.array([], np.int64)]
    assert fold(node, values, 17, RANK_FOLDING).shape == (3,)
    assert fold(node, values, 17, GUARD_FOLDING).shape == (1, 3, 1)
    for policy in (RANK_FOLDING, GUARD_FOLDING):
        assert fold(node, [values[0], np.array([0])], 17, policy).shape == (3, 1)
        assert fold(_node("Squeeze", 1), values[:1], 17, policy).shape == (3,)
        assert fold(_node("Squeeze", 1, axes=[2]), values[:1], 17, policy).shape == (1, 3)


# ---- SHAPE_FOLDING: the reference evaluator over integer and bool values; GatherMultiaxis by the kernel

def test_shape_folding_folds_exact_values_only():
    shape = np.array([2, 3], np.int64)
    assert fold(_node("ReduceProd", 1, keepdims=0), [shape], 17, SHAPE_FOLDING).tolist() == 6
    assert fold(_node("Equal", 2), [shape, np.array([2, 4])], 17, SHAPE_FOLDING).tolist() == [True, False]
    assert fold(_node("Cast", 1, to=TensorProto.FLOAT), [shape], 17, SHAPE_FOLDING) is None  # not exact
    assert fold(_node("Neg", 1), [shape.astype(np.float32)], 17, SHAPE_FOLDING) is None
    assert fold(_node("Neg", 1), [np.zeros(1 << 16 + 1, np.int64)], 17, SHAPE_FOLDING) is None
    assert fold(_node("Shape", 1), [shape], 17, SHAPE_FOLDING) is None  # its callers read static shapes
    assert fold(_node("Reshape", 2), [shape, np.array([5])], 17, SHAPE_FOLDING) is None  # fails: ORT says why


def test_shape_folding_runs_gathermultiaxis_on_the_kernel():
    node = helper.make_node(OP_TYPE, ["x", "i", "a"], ["y"], domain=DOMAIN, mode="clamp")
    values = [np.array([10, 20, 30], np.int64), np.array([5], np.int64), np.array([0], np.int64)]
    assert fold(node, values, 17, SHAPE_FOLDING).tolist() == [30]
    assert fold(node, values, 17, RANK_FOLDING) is None  # only where the policy says so
    checking = helper.make_node(OP_TYPE, ["x", "i", "a"], ["y"], domain=DOMAIN, mode="error")
    assert fold(checking, values, 17, SHAPE_FOLDING) is None  # it raises at run time: ORT says so there
    unmoded = helper.make_node(OP_TYPE, ["x", "i", "a"], ["y"], domain=DOMAIN)
    assert fold(unmoded, values, 17, SHAPE_FOLDING) is None
    for bad_mode in (b"\xffclamp", 3, [1.0]):  # not UTF-8, not a string: left unfolded, never a crash
        malformed = helper.make_node(OP_TYPE, ["x", "i", "a"], ["y"], domain=DOMAIN, mode=bad_mode)
        assert fold(malformed, values, 17, SHAPE_FOLDING) is None


def _shape_model(node, constants):
    nodes = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name=""))
             for name, value in constants.items()] + [node]
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info(node.output[0], TensorProto.UNDEFINED, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])


@pytest.mark.parametrize("node, constants", [
    (helper.make_node("Concat", ["a", "b"], ["y"], axis=0), {"a": np.array([1, 2]), "b": np.array([3])}),
    (helper.make_node("Range", ["a", "b", "c"], ["y"]), {"a": np.array(0), "b": np.array(5), "c": np.array(2)}),
    (helper.make_node("Where", ["c", "a", "b"], ["y"]),
     {"c": np.array([True, False]), "a": np.array([1, 2]), "b": np.array([3, 4])}),
    (helper.make_node("Cast", ["a"], ["y"], to=TensorProto.FLOAT), {"a": np.array([1, 2])}),
    (helper.make_node("Mul", ["a", "a"], ["y"]), {"a": np.array([3, 4])}),
    (helper.make_node("Reshape", ["a", "b"], ["y"]), {"a": np.arange(6), "b": np.array([4])}),
    (helper.make_node(OP_TYPE, ["a", "b", "c"], ["y"], domain=DOMAIN, mode="zero"),
     {"a": np.arange(6).reshape(2, 3), "b": np.array([[7, 1]]), "c": np.array([1])}),
])
def test_shape_folding_is_the_webnn_targets_folder(node, constants):
    """Until graphs/webnn.py's own copy goes (WP3)."""
    model = _shape_model(node, constants)
    folded = fold_shape_arithmetic(model)
    new = fold(node, [constants[name] for name in node.input], 17, SHAPE_FOLDING)
    assert folded == (new is not None)
    if new is not None:
        old = numpy_helper.to_array(model.graph.node[-1].attribute[0].t)
        assert old.dtype == new.dtype and np.array_equal(old, new)


# ---- BUILDER_FOLDING: the reference evaluator over a builder's constants, any type but object, opset 9 on

def test_builder_folding():
    shape = np.array([2, 3], np.int64)
    assert fold(_node("Cast", 1, to=TensorProto.FLOAT), [shape], 17, BUILDER_FOLDING).dtype == np.float32
    assert fold(_node("Add", 2), [shape, shape], 8, BUILDER_FOLDING) is None  # Constant-1 holds floats only
    assert fold(_node("Shape", 1), [np.zeros((4, 5))], 17, BUILDER_FOLDING).tolist() == [4, 5]
    big = fold(_node("Range", 3), [np.array(0), np.array(1 << 16), np.array(1)], 17, BUILDER_FOLDING)
    assert big is not None and big.size == 1 << 16
    assert fold(_node("Range", 3), [np.array(0), np.array((1 << 16) + 1), np.array(1)], 17, BUILDER_FOLDING) is None
    assert fold(_node("Mod", 2), [shape, shape], 17, BUILDER_FOLDING) is None  # not an op it folds


@pytest.mark.parametrize("op_type, operands, attributes", [
    ("Add", ([2, 3], [1]), {}), ("Div", ([7, -7], [2]), {}), ("Equal", ([1, 2], [2, 2]), {}),
    ("Concat", ([1], [2, 3]), {"axis": 0}), ("Range", (0, 4, 1), {}), ("Reshape", ([1, 2, 3, 4], [2, 2]), {}),
    ("Cast", ([1, 2],), {"to": TensorProto.FLOAT}), ("ReduceProd", ([2, 3, 4],), {"keepdims": 0}),
    ("Gather", ([5, 6, 7], [2]), {"axis": 0}), ("Range", (0, 70000, 1), {}),
])
def test_builder_folding_is_the_general_lowerings_folder(op_type, operands, attributes):
    """Until graphs/lower_general.py's own copy goes (WP3)."""
    builder = LoweringBuilder(17, NameScope(set()), "p")
    inputs = [builder.constant(value, f"c{i}") for i, value in enumerate(operands)]
    output = builder.op(op_type, inputs, "r", **attributes)
    old = builder.constant_value(output)
    new = fold(helper.make_node(op_type, inputs, ["folded"], **attributes),
               [builder.constant_value(name) for name in inputs], 17, BUILDER_FOLDING)
    assert (old is None) == (new is None)
    assert old is None or (old.dtype == new.dtype and np.array_equal(old, new))
