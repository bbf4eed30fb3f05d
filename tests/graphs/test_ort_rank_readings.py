"""Ranks as ORT's kernels give them: where ONNX's shape inference (layer 1) or ORT's symbolic shape inference
(layer 2) states another rank than ORT computes, the rewrite takes ORT's or none (aligned at run time). Each
case runs the original on ORT's builtin kernels and the rewrite on the package's kernel, bit for bit."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from sessions import assert_rewrite_matches, builtin_session, custom_session
from support import assert_bit_identical, make_model

from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.graphs.ranks.symbolic_ranks import symbolic_inference
from gathermultiaxis.graphs.ranks.typing_copy import typing_copy

T = TensorProto


def value(name, elem_type, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype), name)


def assert_all_matches(model, feeds_list):
    rewritten, report = rewrite_model(model)
    for feeds in feeds_list:
        expected = builtin_session(model).run(None, feeds)
        actual = custom_session(rewritten).run(None, feeds)
        for a, e in zip(actual, expected):
            assert_bit_identical(a, e)
    return report


# ---- layer 1: the typing copy reads nodes as ORT's kernels do ---------------------------------------------

def split_to_sequence_model(split_input: bool):
    """TorchScript's ``nonzero(as_tuple=True)`` (``unbind``): SplitToSequence(axis=1, keepdims=0) with a scalar
    split of 1, then a Gather of each element. ONNX's inference keeps the split axis, ORT's kernel drops it."""
    nodes = [helper.make_node("NonZero", ["mask"], ["nonzero"]),
             helper.make_node("Transpose", ["nonzero"], ["pairs"]),
             helper.make_node("SplitToSequence", ["pairs", "split"], ["columns"], axis=1, keepdims=0),
             helper.make_node("SequenceAt", ["columns", "zero"], ["rows"]),
             helper.make_node("SequenceAt", ["columns", "one"], ["cols"]),
             helper.make_node("Gather", ["x", "rows"], ["picked"], axis=0),
             helper.make_node("Gather", ["picked", "cols"], ["both"], axis=1)]
    inputs = [value("x", T.FLOAT, ["n", "m"]), value("mask", T.BOOL, ["n", "m"])]
    initializers = [const("zero", 0), const("one", 1)]
    if split_input:
        inputs.append(value("split", T.INT64, None))  # a split of unknown rank: only the run time knows
    else:
        initializers.append(const("split", 1))
    return make_model(nodes, inputs, [value("both", T.FLOAT, None)], initializers, opset=17)


def split_feeds(split_input: bool):
    mask = np.zeros((4, 5), bool)
    mask[0, 2] = mask[3, 1] = mask[3, 4] = True
    feeds = {"x": np.arange(20, dtype=np.float32).reshape(4, 5), "mask": mask}
    if split_input:
        feeds["split"] = np.array(1, np.int64)
    return feeds


def test_split_to_sequence_scalar_split_drops_the_axis():
    """Before: the Gathers were aligned for rank 2 where ORT gives rank 1, and the kernel path failed."""
    report = assert_rewrite_matches(split_to_sequence_model(False), split_feeds(False))
    assert (report.rewritten, report.left, report.runtime_aligned) == (2, 0, 0), report.table()


def test_split_to_sequence_split_of_unknown_rank_aligned_at_run_time():
    report = assert_rewrite_matches(split_to_sequence_model(True), split_feeds(True))
    assert (report.rewritten, report.left) == (2, 0), report.table()
    assert report.runtime_aligned == 2, report.table()


def test_squeeze_with_empty_constant_axes_squeezes_every_size_one_dim():
    """ORT reads an empty axes tensor as no axes; ONNX's inference and the squeeze rank rule squeezed nothing."""
    nodes = [helper.make_node("Squeeze", ["x", "no_axes"], ["squeezed"]),
             helper.make_node("Gather", ["squeezed", "indices"], ["y"], axis=0)]
    model = make_model(nodes, [value("x", T.FLOAT, [1, 5, 1]), value("indices", T.INT64, [2, 1])],
                       [value("y", T.FLOAT, None)], [const("no_axes", np.zeros(0))], opset=17)
    report = assert_rewrite_matches(model, {"x": np.arange(5, dtype=np.float32).reshape(1, 5, 1),
                                            "indices": np.array([[4], [-2]], np.int64)})
    assert (report.rewritten, report.runtime_aligned) == (1, 0), report.table()


def test_sequence_input_element_shape_is_not_a_fact():
    """ORT checks no element of a sequence input against its declared shape: the typing copy drops it."""
    sequence = helper.make_tensor_sequence_value_info("items", T.FLOAT, [3])
    model = make_model([helper.make_node("SequenceAt", ["items", "position"], ["item"])],
                       [sequence, value("position", T.INT64, [])], [value("item", T.FLOAT, None)], opset=17)
    element = typing_copy(model).graph.input[0].type.sequence_type.elem_type.tensor_type
    assert element.elem_type == T.FLOAT and not element.HasField("shape")


# ---- layer 2: ORT's symbolic inference, where it states a rank ORT's kernels may not give ------------------

def if_of_different_ranks_model():
    """A Gather reading an If whose branches give ranks 2 (Identity) and 1 (ReduceSum keepdims=0)."""
    then_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                                    [value("t", T.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("ReduceSum", ["x", "axis"], ["e"], keepdims=0)], "else", [],
                                    [value("e", T.FLOAT, None)])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Gather", ["y", "indices"], ["g"], axis=0)]
    return make_model(nodes, [value("cond", T.BOOL, []), value("x", T.FLOAT, [6, 4])], [value("g", T.FLOAT, None)],
                      [const("axis", [1]), const("indices", [0, 2])], opset=21)


def test_if_of_different_branch_ranks_is_aligned_at_run_time():
    """Before: ORT's symbolic inference gave the then-branch's rank 2, the rewrite aligned statically, and the
    else branch failed ("input rank 1 and indices rank 2 differ")."""
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    report = assert_all_matches(if_of_different_ranks_model(), [{"cond": np.array(c), "x": x} for c in (True, False)])
    assert (report.rewritten, report.runtime_aligned) == (1, 1), report.table()


@pytest.mark.parametrize("node, doubted", [
    (helper.make_node("ReduceSum", ["x", "none"], ["y"], keepdims=0), True),   # empty axes: rank 0, ORT says 2
    (helper.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0), True),     # axes known at run time only
    (helper.make_node("Squeeze", ["x"], ["y"]), True),                         # size-1 dims known at run time only
    (helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1), True),    # batch_dims ignored
    (helper.make_node("GatherND", ["x", "i"], ["y"]), False),
    (helper.make_node("ReduceSum", ["x", "one"], ["y"], keepdims=0), False),
])
def test_symbolic_ranks_that_ort_may_not_give_are_dropped(node, doubted):
    later = [helper.make_node("Neg", ["y"], ["z"]), helper.make_node("Neg", ["z"], ["w"])]  # z: computed from y
    inputs = [value("x", T.FLOAT, ["a", "b"]), value("i", T.INT64, ["a", "c", 1]), value("ax", T.INT64, [1])]
    model = make_model([node, *later], inputs, [value("w", T.FLOAT, None)],
                       [const("none", np.zeros(0)), const("one", [1])], opset=18)
    infos = symbolic_inference(typing_copy(model)).infos
    assert ("y" not in infos and "z" not in infos) if doubted else ("y" in infos and "z" in infos), infos


def test_reason_says_when_symbolic_inference_gave_up():
    """ORT's symbolic inference raises on a SplitToSequence: the gathers left unknown say so."""
    _, report = rewrite_model(split_to_sequence_model(True))
    aligned = [o for o in report.outcomes if o.runtime_aligned]
    assert aligned and all("ORT's symbolic shape inference gave up on the model" in o.reason for o in aligned), \
        report.table()


# ---- layer 3: reductions with keepdims=0, and If outputs from every layer's types of the branches ------------

@pytest.mark.parametrize("op, axes, attributes", [
    ("ReduceMax", [1], {"keepdims": 0}), ("ReduceSum", [], {"keepdims": 0}),
    ("ReduceSum", [], {"keepdims": 0, "noop_with_empty_axes": 1}), ("ReduceL2", [0, -1], {"keepdims": 0}),
    ("ReduceMean", None, {"keepdims": 0}), ("ArgMin", None, {"axis": -1, "keepdims": 0}),
    ("ReduceLogSumExp", [2], {}),
])
def test_reduce_rule_matches_ort(op, axes, attributes):
    from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
    from gathermultiaxis.graphs.rewrite.rank_layers import RANK_RULES
    from gathermultiaxis.graphs.ranks.rank_rules import apply_rank_rule

    inputs = ["x"] if axes is None else ["x", "axes"]
    node = helper.make_node(op, inputs, ["y"], **attributes)
    initializers = [] if axes is None else [const("axes", np.array(axes, np.int64))]
    out_type = T.INT64 if op.startswith("Arg") else T.FLOAT
    model = make_model([node], [value("x", T.FLOAT, [2, 3, 4])], [value("y", out_type, None)], initializers,
                       opset=18)
    ran = builtin_session(model).run(None, {"x": np.ones((2, 3, 4), np.float32)})[0]
    constants = {"axes": None if axes is None else np.array(axes, np.int64)}
    ruled = apply_rank_rule(node, [TensorInfo(T.FLOAT, (None, None, None)), None], constants.get, RANK_RULES)
    assert ruled is not None and ruled[0].rank == ran.ndim


def if_typed_by_rank_rules_model():
    """An If whose then-branch ONNX's inference cannot type (a com.microsoft Gelu) and whose else-branch
    gives the same rank."""
    then_branch = helper.make_graph([helper.make_node("Gelu", ["x"], ["t"], domain="com.microsoft")], "then", [],
                                    [value("t", T.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [value("e", T.FLOAT, None)])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Gather", ["y", "indices"], ["g"], axis=1)]
    return make_model(nodes, [value("cond", T.BOOL, []), value("x", T.FLOAT, ["a", 4])], [value("g", T.FLOAT, None)],
                      [const("indices", [[3], [-1]])], opset=18, extra_opsets=[helper.make_opsetid("com.microsoft", 1)])


def test_if_output_rank_from_every_layer(monkeypatch):
    """Before: the If's output had a rank only where ONNX's inference typed both branches, and the Gather was
    aligned at run time. Without layer 2, the Gelu rank rule types the then-branch."""
    from gathermultiaxis.graphs.rewrite import rank_layers
    from gathermultiaxis.graphs.ranks.symbolic_ranks import SymbolicInference

    monkeypatch.setattr(rank_layers, "symbolic_inference", lambda light: SymbolicInference({}))
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    report = assert_all_matches(if_typed_by_rank_rules_model(), [{"cond": np.array(c), "x": x} for c in (True, False)])
    assert (report.rewritten, report.runtime_aligned) == (1, 0), report.table()


def loop_scan_typed_by_rank_rules_model():
    """A Loop whose scan output ONNX's inference cannot type (a com.microsoft Gelu of a row of an outer value),
    gathered in the main graph."""
    body = helper.make_graph([
        helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
        helper.make_node("Gelu", ["row"], ["activated"], domain="com.microsoft"),
        helper.make_node("Add", ["total_in", "activated"], ["total_out"]),
        helper.make_node("Identity", ["cond"], ["cond_out"]),
    ], "body", [value("i", T.INT64, []), value("cond", T.BOOL, []), value("total_in", T.FLOAT, None)],
        [value("cond_out", T.BOOL, []), value("total_out", T.FLOAT, None), value("activated", T.FLOAT, None)])
    nodes = [helper.make_node("Loop", ["trips", "", "start"], ["total", "rows"], body=body),
             helper.make_node("Gather", ["rows", "indices"], ["picked"], axis=1)]
    return make_model(nodes, [value("trips", T.INT64, []), value("x", T.FLOAT, [5, 4]), value("start", T.FLOAT, [4])],
                      [value("picked", T.FLOAT, None), value("total", T.FLOAT, None)], [const("indices", [[3], [-1]])],
                      opset=18, extra_opsets=[helper.make_opsetid("com.microsoft", 1)])


def test_loop_outputs_rank_from_every_layer(monkeypatch):
    """Before: a Loop's scan output had a rank only where ONNX's inference typed the body output; the Gather
    was aligned at run time."""
    from gathermultiaxis.graphs.rewrite import rank_layers
    from gathermultiaxis.graphs.ranks.symbolic_ranks import SymbolicInference

    monkeypatch.setattr(rank_layers, "symbolic_inference", lambda light: SymbolicInference({}))
    feeds = {"trips": np.array(3, np.int64), "x": np.linspace(-2, 2, 20, dtype=np.float32).reshape(5, 4),
             "start": np.ones(4, np.float32)}
    report = assert_all_matches(loop_scan_typed_by_rank_rules_model(), [feeds])
    gathers = [o for o in report.outcomes if o.graph == "main graph"]
    assert len(gathers) == 1 and not gathers[0].runtime_aligned, report.table()


# ---- model-local functions at another opset than the model's ----------------------------------------------

def functions_model(ml_version: int = 2):
    """Two functions at opset 21 in a model at 22 (as skl2onnx writes them), one holding a Gather, and one
    calling ai.onnx.ml's LabelEncoder at ``ml_version`` where the model imports ai.onnx.ml 2."""
    take = helper.make_function("local", "take_rows", ["table", "ids"], ["rows"],
                                [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0)],
                                [helper.make_opsetid("", 21)])
    encode = helper.make_function("local", "encode", ["keys"], ["codes"],
                                  [helper.make_node("LabelEncoder", ["keys"], ["codes_raw"], domain="ai.onnx.ml",
                                                    keys_int64s=[1, 2], values_int64s=[10, 20]),
                                   helper.make_node("Constant", [], ["zero"], value=const("zero", 0)),
                                   helper.make_node("Gather", ["keys", "zero"], ["first"], axis=0),
                                   helper.make_node("Add", ["codes_raw", "first"], ["codes"])],
                                  [helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", ml_version)])
    nodes = [helper.make_node("take_rows", ["x", "ids"], ["y"], domain="local"),
             helper.make_node("encode", ["ids"], ["codes"], domain="local")]
    model = make_model(nodes, [value("x", T.FLOAT, [4, 3]), value("ids", T.INT64, [2])],
                       [value("y", T.FLOAT, None), value("codes", T.INT64, None)], opset=22,
                       extra_opsets=[helper.make_opsetid("local", 1), helper.make_opsetid("ai.onnx.ml", 2)])
    model.functions.extend([take, encode])
    return model


def test_functions_at_an_older_opset_are_inlined():
    """Before: "Model has functions with incompatible opset versions", every gather left."""
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "ids": np.array([2, 1], np.int64)}
    report = assert_rewrite_matches(functions_model(), feeds)
    assert (report.rewritten, report.left) == (2, 0), report.table()


def test_function_whose_other_domain_ops_changed_is_set_aside():
    """ai.onnx.ml's LabelEncoder changed between versions 1 and 2: that function is left, with the reason,
    and the other is still inlined and rewritten."""
    rewritten, report = rewrite_model(functions_model(ml_version=1))
    left = [o for o in report.outcomes if not o.rewritten]
    assert report.rewritten == 1 and len(left) == 1, report.table()
    assert "encode" in left[0].reason and "ai.onnx.ml version 1, the model 2" in left[0].reason, left[0].reason
    assert [f.name for f in rewritten.functions] == ["encode"]
