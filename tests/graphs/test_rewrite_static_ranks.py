"""Issue 31: ranks and element types the model states, used instead of a run-time alignment or a left node.

- element types cross ops whose ranks no layer knows, by each op's schema (ONNX's, ORT's for com.microsoft);
- a shape vector's length through Shape, Slice with (folded) constant bounds, Concat: a Reshape's rank;
- the small integer arithmetic folded for that, checked against ORT op by op;
- Loop-carried ranks by induction (ONNX's inference gives a loop-carried value no shape), and a carried
  value whose rank grows still aligned at run time.
Each model is checked bit for bit against ORT's builtin gathers."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from sessions import assert_rewrite_matches, builtin_session
from support import make_model

from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.rewrite.rank_layers import RANK_RULES
from gathermultiaxis.graphs.ranks import rank_rules
from gathermultiaxis.graphs.ranks.element_types import output_elem_types
from gathermultiaxis.graphs.ir.folding import RANK_FOLDING, fold as fold_under



def fold(node, values):
    """The rank layers' folding: ir.folding under RANK_FOLDING (its NumPy engine reads no opset)."""
    return fold_under(node, values, RANK_FOLDING.min_opset, RANK_FOLDING)

def apply_rank_rule(node, inputs, constants):
    return rank_rules.apply_rank_rule(node, inputs, constants, RANK_RULES)


T = TensorProto
INT64_MAX = np.iinfo(np.int64).max


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype), name))


# ---- element types across unknown ranks ------------------------------------------------------------------

def test_element_type_crosses_ops_of_unknown_rank_behind_a_contrib_op():
    """com.microsoft Inverse has no ONNX schema and no rank rule: ONNX's inference stops there, and the
    LayerNormalization -> Add -> LayerNormalization after it had no element type, so the Gather reading
    them was left ("data type unknown cannot cross the PyOp bridge"). ORT's schema types Inverse's output
    (T from its input), ONNX's schemas the rest; the rank stays unknown: a run-time alignment."""
    nodes = [helper.make_node("Inverse", ["x"], ["inv"], domain="com.microsoft"),
             helper.make_node("LayerNormalization", ["inv", "scale"], ["n1"], axis=-1),
             helper.make_node("Add", ["n1", "x"], ["added"]),
             helper.make_node("LayerNormalization", ["added", "scale"], ["n2"], axis=-1),
             helper.make_node("Gather", ["n2", "first"], ["y"], axis=1)]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, None)],
                       [helper.make_tensor_value_info("y", T.FLOAT, None)],
                       [numpy_helper.from_array(np.ones(4, np.float32), "scale"),
                        numpy_helper.from_array(np.array(0, np.int64), "first")],
                       extra_opsets=[helper.make_opsetid("com.microsoft", 1)])
    x = np.random.default_rng(0).standard_normal((2, 4, 4)).astype(np.float32) + 4 * np.eye(4, dtype=np.float32)
    report = assert_rewrite_matches(model, {"x": x})
    assert report.left == 0 and report.rewritten == 1, report.table()
    assert report.runtime_aligned == 1, report.table()  # Inverse's rank: no layer knows it


@pytest.mark.parametrize("node, types, expected", [
    (helper.make_node("LayerNormalization", ["x", "s"], ["y"]), [T.FLOAT, T.FLOAT], [T.FLOAT]),
    (helper.make_node("Concat", ["a", "b"], ["y"], axis=0), [0, T.INT64], [T.INT64]),
    (helper.make_node("Shape", ["x"], ["y"]), [0], [T.INT64]),
    (helper.make_node("Cast", ["x"], ["y"], to=T.INT32), [0], [T.INT32]),
    (helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"]), [T.UINT8, T.FLOAT, T.UINT8], [T.FLOAT]),
    (helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2), [T.FLOAT], [T.FLOAT, T.FLOAT]),
    (helper.make_node("Add", ["x", "y"], ["z"]), [0, 0], [0]),  # nothing binds T: unknown, not guessed
    (helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", K=16, N=8, bits=4,
                      block_size=16), [T.FLOAT, T.UINT8, T.FLOAT], [T.FLOAT]),
    (helper.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"], domain="com.microsoft"),
     [T.UINT8, T.FLOAT, T.UINT8, T.UINT8, T.FLOAT, T.UINT8, T.FLOAT, T.UINT8], [T.UINT8]),
])
def test_output_element_types_by_schema(node, types, expected):
    assert output_elem_types(node, types, 21) == expected


@pytest.mark.parametrize("node, inputs, shape", [
    (helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft"),
     [TensorInfo(T.FLOAT, (None, None, 16)), TensorInfo(T.UINT8, (8, 1, 8)), TensorInfo(T.FLOAT, (8,))], 3),
    (helper.make_node("GatherBlockQuantized", ["d", "i", "s"], ["y"], domain="com.microsoft"),
     [TensorInfo(T.UINT8, (100, 32)), TensorInfo(T.INT64, (None, None)), TensorInfo(T.FLOAT, (100, 2))], 3),
    (helper.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"], domain="com.microsoft"),
     [TensorInfo(T.UINT8, (None, 4)), None, None, TensorInfo(T.UINT8, (2, 1, 4)), None, None, None, None], 3),
    (helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"]),
     [TensorInfo(T.UINT8, (None, None, 4)), None, None, TensorInfo(T.UINT8, (4, 6)), None, None, None, None], 3),
])
def test_quantized_op_rank_rules(node, inputs, shape):
    assert apply_rank_rule(node, inputs, lambda name: None)[0].rank == shape


# ---- shape vectors ---------------------------------------------------------------------------------------

def multihead_attention_reshape_model():
    """What TorchScript writes for nn.MultiheadAttention's packed projection: Reshape(x, Concat(Slice(Shape(x),
    0, -1), [3, E], Slice(Shape(x), -1, max))) with the bounds computed as Reshape(Mod(2, 3), [1]) and
    Reshape(Add(Mod(2, 3), 1), [1]); then Unsqueeze, Transpose, Squeeze and the Gathers of q, k and v. ONNX
    infers the Slices as 1-D of unknown length, so no layer knew the Reshape's rank."""
    nodes = [
        const("two", [2]), const("three", [3]), helper.make_node("Mod", ["two", "three"], ["last"]),
        const("one_d", [1]), helper.make_node("Reshape", ["last", "one_d"], ["end"]),
        const("one", [1]), helper.make_node("Add", ["last", "one"], ["after"]),
        helper.make_node("Reshape", ["after", "one_d"], ["start"]),
        const("zero", [0]), const("max", [INT64_MAX]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "zero", "end"], ["head"]),
        helper.make_node("Slice", ["shape", "start", "max"], ["tail"]),
        const("packed", [3, 4]),
        helper.make_node("Concat", ["head", "packed", "tail"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["split"]),
        helper.make_node("Unsqueeze", ["split", "zero"], ["u"]),
        helper.make_node("Transpose", ["u"], ["t"], perm=[3, 1, 2, 0, 4]),
        helper.make_node("Squeeze", ["t", "three"], ["qkv"]),
        *(helper.make_node("Gather", ["qkv", f"i{k}"], [f"y{k}"], axis=0) for k in range(3)),
        *(const(f"i{k}", k) for k in range(3)),
        helper.make_node("Add", ["projected", "bias"], ["x"]),  # x computed: its rank inferred, as in the export
    ]
    return make_model(nodes, [helper.make_tensor_value_info("projected", T.FLOAT, ["sequence", "batch", 12])],
                      [helper.make_tensor_value_info(f"y{k}", T.FLOAT, None) for k in range(3)],
                      [numpy_helper.from_array(np.arange(12, dtype=np.float32), "bias")], opset=18)


def test_reshape_rank_from_shape_vector_length():
    model = multihead_attention_reshape_model()
    projected = np.random.default_rng(1).standard_normal((5, 2, 12)).astype(np.float32)
    report = assert_rewrite_matches(model, {"projected": projected})
    assert report.rewritten == 3 and report.left == 0, report.table()
    assert report.runtime_aligned == 0, report.table()


def test_slice_rule_length_matches_ort():
    """The Slice rule's length of a 1-D vector, against what ORT's Slice returns, over every start, end
    and step in a range that crosses both clamps (ONNX clamps a negative step's start to dim - 1)."""
    starts, ends, steps = range(-8, 9), [-9, -6, -1, 0, 2, 5, 7, INT64_MAX, -INT64_MAX, 2**31 - 1, -(2**31)], [-3, -2, -1, 1, 2, 4]
    cases = [(s, e, k) for s in starts for e in ends for k in steps]
    nodes, outputs = [], []
    for n, (s, e, k) in enumerate(cases):
        nodes += [const(f"s{n}", [s]), const(f"e{n}", [e]), const(f"k{n}", [k]), const(f"a{n}", [0]),
                  helper.make_node("Slice", ["v", f"s{n}", f"e{n}", f"a{n}", f"k{n}"], [f"y{n}"])]
        outputs.append(helper.make_tensor_value_info(f"y{n}", T.INT64, None))
    model = make_model(nodes, [helper.make_tensor_value_info("v", T.INT64, [5])], outputs, opset=18)
    got = builtin_session(model).run(None, {"v": np.arange(5, dtype=np.int64)})
    for (s, e, k), value in zip(cases, got):
        node = helper.make_node("Slice", ["v", "s", "e", "a", "k"], ["y"])
        bounds = {"s": np.array([s]), "e": np.array([e]), "a": np.array([0]), "k": np.array([k])}
        rule = apply_rank_rule(node, [TensorInfo(T.INT64, (5,)), *[TensorInfo(T.INT64, (1,))] * 4], bounds.get)
        assert rule[0].shape == value.shape, (s, e, k)


FOLD_CASES = [
    ("Div", [np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])], {}),
    ("Mod", [np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3])], {}),
    ("Mod", [np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3])], {"fmod": 1}),
    ("Add", [np.array([2]), np.array([1, 2, 3])], {}),
    ("Sub", [np.array([[2], [3]]), np.array([1, 2, 3])], {}),
    ("Mul", [np.array([2, 3], np.int32), np.array([4, 5], np.int32)], {}),
    ("Neg", [np.array([2, -3])], {}),
    ("Reshape", [np.array([[1, 2, 3], [4, 5, 6]]), np.array([0, -1])], {}),
    ("Reshape", [np.zeros((0, 3), np.int64), np.array([3, 0])], {"allowzero": 1}),
    ("Unsqueeze", [np.array([4, 5]), np.array([-1, 0])], {}),
    ("Squeeze", [np.array([[4], [5]]), np.array([-1])], {}),
    ("Concat", [np.array([1, 2]), np.array([3])], {"axis": 0}),
    ("Gather", [np.array([10, 20, 30]), np.array([-1, 0])], {"axis": 0}),
    ("Slice", [np.arange(6), np.array([5]), np.array([-9]), np.array([0]), np.array([-2])], {}),
    ("Slice", [np.arange(12).reshape(3, 4), np.array([1, -1]), np.array([INT64_MAX, 0]), np.array([0, 1]),
               np.array([1, -1])], {}),
    ("Min", [np.array([1, 5]), np.array([3, 2]), np.array([4, 0])], {}),
    ("Max", [np.array([1, 5]), np.array([3, 2])], {}),
    ("Cast", [np.array([1, -2])], {"to": T.INT32}),
]


@pytest.mark.parametrize("op, values, attributes", FOLD_CASES, ids=[f"{c[0]}{c[2] or ''}" for c in FOLD_CASES])
def test_fold_matches_ort(op, values, attributes):
    values = [v if v.dtype == np.int32 else v.astype(np.int64) for v in values]
    names = [f"in{n}" for n in range(len(values))]
    node = helper.make_node(op, names, ["y"], **attributes)
    model = make_model([node], [helper.make_tensor_value_info(n, T.INT32 if v.dtype == np.int32 else T.INT64,
                                                              list(v.shape)) for n, v in zip(names, values)],
                       [helper.make_empty_tensor_value_info("y")], opset=18)
    want = builtin_session(model).run(None, dict(zip(names, values)))[0]
    got = fold(node, values)
    assert got is not None and got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_fold_declines():
    """Division by zero, an index out of range, floats, large values: no value (ORT would fail or it is
    not shape arithmetic)."""
    assert fold(helper.make_node("Div", ["a", "b"], ["y"]), [np.array([1]), np.array([0])]) is None
    assert fold(helper.make_node("Gather", ["a", "b"], ["y"]), [np.array([1, 2]), np.array([2])]) is None
    assert fold(helper.make_node("Add", ["a", "b"], ["y"]), [np.array([1.0]), np.array([1.0])]) is None
    assert fold(helper.make_node("Add", ["a", "b"], ["y"]), [np.arange(100), np.arange(100)]) is None
    assert fold(helper.make_node("Reshape", ["a", "b"], ["y"]), [np.arange(6).reshape(2, 3), np.array([3, 0])]) is None


# ---- Loop-carried ranks ----------------------------------------------------------------------------------

def viterbi_model(opset=21):
    """A Viterbi decoder as onnxscript writes one (``for t in range(steps)``: Loop with no condition, the
    backpointers carried and grown by Concat): the forward Loop carries the scores [B, K] and the history
    [t, B, K]; the backtracking Loop gathers a row of the history (ranks 3/0 and 3/1) and follows it
    (GatherElements). ONNX's Loop inference gives every carried value no shape."""
    forward = helper.make_graph([
        const("f_one", 1), helper.make_node("Add", ["t", "f_one"], ["t_next"]),
        helper.make_node("Gather", ["emissions", "t_next"], ["emission"], axis=0),
        const("f_two", [2]), helper.make_node("Unsqueeze", ["score_in", "f_two"], ["score_column"]),
        helper.make_node("Add", ["score_column", "transitions"], ["candidates"]),
        helper.make_node("ArgMax", ["candidates"], ["best"], axis=1, keepdims=0),
        const("f_axis", [1]), helper.make_node("ReduceMax", ["candidates", "f_axis"], ["top"], keepdims=0),
        helper.make_node("Add", ["top", "emission"], ["score_out"]),
        const("f_zero", [0]), helper.make_node("Unsqueeze", ["best", "f_zero"], ["best_row"]),
        helper.make_node("Concat", ["history_in", "best_row"], ["history_out"], axis=0),
        helper.make_node("Identity", ["f_cond"], ["f_cond_out"]),
    ], "forward", [helper.make_tensor_value_info("t", T.INT64, []), helper.make_tensor_value_info("f_cond", T.BOOL, []),
                   helper.make_tensor_value_info("score_in", T.FLOAT, None),
                   helper.make_tensor_value_info("history_in", T.INT64, None)],
        [helper.make_tensor_value_info(n, e, None) for n, e in
         (("f_cond_out", T.BOOL), ("score_out", T.FLOAT), ("history_out", T.INT64))])
    backward = helper.make_graph([
        const("b_one", 1), helper.make_node("Sub", ["steps", "b_one"], ["last_step"]),
        helper.make_node("Sub", ["last_step", "s"], ["step"]),
        helper.make_node("Gather", ["history", "step"], ["backpointers"], axis=0),        # ranks 3/0
        const("b_zero", [0]), helper.make_node("Unsqueeze", ["step", "b_zero"], ["step_1d"]),
        helper.make_node("Gather", ["history", "step_1d"], ["rows"], axis=0),             # ranks 3/1
        helper.make_node("Squeeze", ["rows", "b_zero"], ["rows_2d"]),
        const("b_axis", [1]), helper.make_node("Unsqueeze", ["current", "b_axis"], ["current_2d"]),
        helper.make_node("GatherElements", ["backpointers", "current_2d"], ["previous_2d"], axis=1),
        helper.make_node("GatherElements", ["rows_2d", "current_2d"], ["again_2d"], axis=1),
        helper.make_node("Squeeze", ["previous_2d", "b_axis"], ["previous"]),
        helper.make_node("Squeeze", ["again_2d", "b_axis"], ["again"]),
        helper.make_node("Unsqueeze", ["previous", "b_zero"], ["previous_row"]),
        helper.make_node("Concat", ["previous_row", "path_in"], ["path_out"], axis=0),
        helper.make_node("Identity", ["b_cond"], ["b_cond_out"]),
    ], "backtrack", [helper.make_tensor_value_info("s", T.INT64, []), helper.make_tensor_value_info("b_cond", T.BOOL, []),
                     helper.make_tensor_value_info("current", T.INT64, None),
                     helper.make_tensor_value_info("path_in", T.INT64, None)],
        [helper.make_tensor_value_info(n, T.INT64 if n != "b_cond_out" else T.BOOL, None)
         for n in ("b_cond_out", "previous", "path_out", "again")])
    nodes = [
        const("zero", 0), helper.make_node("Gather", ["emissions", "zero"], ["score0"], axis=0),
        helper.make_node("Shape", ["emissions"], ["length"], start=0, end=1),
        helper.make_node("Squeeze", ["length"], ["length_scalar"]), const("one", 1),
        helper.make_node("Sub", ["length_scalar", "one"], ["steps"]),
        helper.make_node("Shape", ["score0"], ["score_shape"]), const("empty", [0]),
        helper.make_node("Concat", ["empty", "score_shape"], ["history_shape"], axis=0),
        helper.make_node("ConstantOfShape", ["history_shape"], ["history0"],
                         value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Loop", ["steps", "", "score0", "history0"], ["score", "history"], body=forward),
        helper.make_node("ArgMax", ["score"], ["last"], axis=1, keepdims=0),
        helper.make_node("Unsqueeze", ["last", "empty"], ["path0"]),
        helper.make_node("Loop", ["steps", "", "last", "path0"], ["first", "path", "agreed"], body=backward),
    ]
    return make_model(nodes, [helper.make_tensor_value_info("emissions", T.FLOAT, ["T", "B", "K"]),
                              helper.make_tensor_value_info("transitions", T.FLOAT, ["K", "K"])],
                      [helper.make_tensor_value_info("path", T.INT64, None),
                       helper.make_tensor_value_info("agreed", T.INT64, None)], opset=opset)


def viterbi_feeds(steps=6):
    rng = np.random.default_rng(3)
    return {"emissions": rng.standard_normal((steps, 2, 4)).astype(np.float32),
            "transitions": rng.standard_normal((4, 4)).astype(np.float32)}


@pytest.mark.parametrize("opset", [18, 21])
def test_loop_carried_ranks_by_induction(opset):
    """Before: the three gathers of the backtracking body (and its two GatherElements) were aligned at run
    time ("'history' comes from an enclosing graph, which knows no rank for it")."""
    model = viterbi_model(opset)
    for steps in (6, 1):  # one step: no iteration, the Loops return their initial values
        report = assert_rewrite_matches(model, viterbi_feeds(steps))
        assert report.rewritten == 6 and report.left == 0, report.table()
        assert report.runtime_aligned == 0, report.table()


def test_loop_carried_rank_that_grows_stays_aligned_at_run_time():
    """A carried value unsqueezed every iteration changes rank: no induction holds, so the gather reading
    it is aligned at run time (and still right)."""
    body = helper.make_graph([
        const("axis", [0]), helper.make_node("Unsqueeze", ["value_in", "axis"], ["value_out"]),
        const("index", 0), helper.make_node("Gather", ["value_in", "index"], ["row"], axis=0),
        helper.make_node("Identity", ["cond"], ["cond_out"]),
    ], "grow", [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond", T.BOOL, []),
                helper.make_tensor_value_info("value_in", T.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", T.BOOL, None),
         helper.make_tensor_value_info("value_out", T.FLOAT, None),
         helper.make_tensor_value_info("row", T.FLOAT, None)])
    model = make_model([helper.make_node("Loop", ["n", "", "x"], ["grown", "rows"], body=body)],
                       [helper.make_tensor_value_info("n", T.INT64, []),
                        helper.make_tensor_value_info("x", T.FLOAT, [3, 2])],
                       [helper.make_tensor_value_info("grown", T.FLOAT, None)], opset=18)
    report = assert_rewrite_matches(model, {"n": np.array(1, np.int64),
                                            "x": np.arange(6, dtype=np.float32).reshape(3, 2)})
    assert report.rewritten == 1 and report.runtime_aligned == 1, report.table()

