"""graphs.lower.ort_guards: what ORT removes or folds before GatherToSliceFusion, seen through; a Gather over
a Range given back only where ORT's fusion computes it right."""

from __future__ import annotations

import collections

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from lowering_probe import CONTRIB, constant, probe
from support import assert_bit_identical, make_model

import gathermultiaxis
from gathermultiaxis.graphs import lower_model, rewrite_model
from gathermultiaxis.graphs.lower.ort_guards import reaches_range


# -- reaches_range: what ORT removes before GatherToSliceFusion ------------------------------------------

def range_then(*between, operand_value=None, operand_input=False):
    """Range(0, n, 1) -> between... -> the indices of a GatherMultiaxis node (probed)."""
    nodes = [constant("zero", 0), constant("one", 1), helper.make_node("Range", ["zero", "n", "one"], ["r0"])]
    current = "r0"
    for number, op in enumerate(between):
        out = f"r{number + 1}"
        if op in ("Add", "Mul"):
            operand = "operand_in" if operand_input else f"c{number}"
            if not operand_input:
                nodes.append(constant(operand, operand_value))
            nodes.append(helper.make_node(op, [current, operand], [out]))
        elif op == "CastInt32":
            nodes.append(helper.make_node("Cast", [current], [out], to=TensorProto.INT32))
        elif op == "Cast":
            nodes.append(helper.make_node("Cast", [current], [out], to=TensorProto.INT64))
        elif op in ("Unsqueeze", "Squeeze"):
            nodes += [constant(f"a{number}", [0]), helper.make_node(op, [current, f"a{number}"], [out])]
        elif op == "Expand":
            nodes += [constant(f"s{number}", [1]), helper.make_node("Expand", [current, f"s{number}"], [out])]
        else:
            nodes.append(helper.make_node(op, [current], [out]))
        current = out
    nodes += [constant("axes", [0]),
              helper.make_node("GatherMultiaxis", ["x", current, "axes"], ["y"], domain="ai.onnx.contrib", mode="error")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T"]),
              helper.make_tensor_value_info("n", TensorProto.INT64, []),
              helper.make_tensor_value_info("operand_in", TensorProto.INT64, [])]
    return make_model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      extra_opsets=[CONTRIB])


@pytest.mark.parametrize("between, reaches", [
    ((), True),
    (("Identity",), True),
    (("Identity", "Identity", "Cast"), True),                    # a no-op Cast
    (("CastInt32",), False),                                     # a Cast that changes the type stays
    (("Unsqueeze", "Squeeze"), True),                            # a pair that undoes itself
    (("Unsqueeze",), False),
    (("Expand",), True),
])
def test_reaches_range_sees_through_what_ort_removes(between, reaches):
    assert probe(range_then(*between), lambda node, scope: reaches_range(scope, node.input[1])) == [reaches]


@pytest.mark.parametrize("op, value, reaches", [("Add", 0, True), ("Mul", 1, True), ("Add", 2, False),
                                                ("Mul", -1, False)])
def test_reaches_range_folds_the_operand_of_a_no_op(op, value, reaches):
    model = range_then(op, operand_value=value)
    assert probe(model, lambda node, scope: reaches_range(scope, node.input[1])) == [reaches]


def test_an_operand_fed_at_run_time_is_never_folded_away():
    model = range_then("Add", operand_input=True)
    assert probe(model, lambda node, scope: reaches_range(scope, node.input[1])) == [False]


@pytest.mark.parametrize("between", [("Identity",), ("Cast",), ("Add",), ("Mul",), ("Expand",)])
def test_a_fusion_ort_makes_is_refused_by_every_path(between):
    """ORT's GatherToSliceFusion through ``between`` (ORT removes it first): Gather(x, Range(T-1, -1, -1)) is
    x reversed, and the default session and the lowered model must not become the empty Slice."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]), constant("zero", 0), constant("one", 1),
             constant("minus_one", -1), helper.make_node("Gather", ["shape", "zero"], ["length"], axis=0),
             helper.make_node("Sub", ["length", "one"], ["start"]),
             helper.make_node("Range", ["start", "minus_one", "minus_one"], ["reversed"])]
    op = between[0]
    if op in ("Add", "Mul"):
        nodes += [constant("neutral", 0 if op == "Add" else 1), helper.make_node(op, ["reversed", "neutral"], ["i"])]
    elif op == "Expand":
        nodes += [constant("one_shape", [1]), helper.make_node("Expand", ["reversed", "one_shape"], ["i"])]
    elif op == "Cast":
        nodes.append(helper.make_node("Cast", ["reversed"], ["i"], to=TensorProto.INT64))
    else:
        nodes.append(helper.make_node(op, ["reversed"], ["i"]))
    nodes.append(helper.make_node("Gather", ["x", "i"], ["y"], axis=0))
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 4])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    original = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert original[0].shape == (0, 4)  # ORT's bug, still there: the reason for the guard
    rewritten, _ = rewrite_model(model)
    session = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"])
    assert_bit_identical(session.run(None, {"x": x})[0], x[::-1])
    lowered, _ = lower_model(rewritten)
    plain = ort.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"])
    assert_bit_identical(plain.run(None, {"x": x})[0], x[::-1])


def range_gather_model(provable: bool):
    """Gather(x, Range(start, limit, delta), axis=1) over an axis of 5, start and limit computed at run time (so
    ORT cannot fold the Range and fuses the pair): the lengths of ``a`` and ``b`` (provably >= 0), or those
    lengths less the length of ``shift`` (may be negative)."""
    nodes = [constant("zero", 0)]
    bounds = []
    for source in ("a", "b"):
        nodes += [helper.make_node("Shape", [source], [f"{source}_shape"]),
                  helper.make_node("Gather", [f"{source}_shape", "zero"], [f"{source}_length"], axis=0)]
        bounds.append(f"{source}_length")
    if not provable:
        nodes += [helper.make_node("Shape", ["shift"], ["shift_shape"]),
                  helper.make_node("Gather", ["shift_shape", "zero"], ["shift_length"], axis=0),
                  helper.make_node("Sub", ["a_length", "shift_length"], ["start"]),
                  helper.make_node("Sub", ["b_length", "shift_length"], ["limit"])]
        bounds = ["start", "limit"]
    nodes += [helper.make_node("Range", [*bounds, "delta"], ["picked"]),
              helper.make_node("Gather", ["x", "picked"], ["y"], axis=1, name="select")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5]),
              helper.make_tensor_value_info("delta", TensorProto.INT64, []),
              *[helper.make_tensor_value_info(name, TensorProto.FLOAT, [name + "_n"])
                for name in ("a", "b", *(() if provable else ("shift",)))]]
    return make_model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def sessions(model, fused=True):
    options = ort.SessionOptions()
    if not fused:
        options.add_session_config_entry("session.disable_specified_optimizers", "GatherToSliceFusion")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("provable", [True, False], ids=["start and limit >= 0", "start and limit unknown"])
def test_a_gather_over_a_range_is_given_back_only_where_orts_fusion_is_right(provable):
    """Over a grid of starts, limits and steps of both signs: the lowered model under ORT's defaults (which fuse
    a Gather over a Range into a Slice) and the default session equal ORT's Gather kernel (no fusion) on every
    in-range Range; the Gather comes back only where start and limit are provably >= 0."""
    model = range_gather_model(provable)
    rewritten, _ = rewrite_model(model)
    lowered, report = lower_model(rewritten)
    given_back = [(o.form, o.source) for o in report.outcomes if o.node == "select"] == [("Gather", "rewrite record")]
    assert given_back == provable, report.table()
    if provable:
        assert collections.Counter(n.op_type for n in lowered.graph.node) == collections.Counter(
            n.op_type for n in model.graph.node)
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    kernel, original = sessions(model, fused=False), sessions(model)
    runners = [sessions(lowered), gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"])]
    shift, wrong_in_ort = (0 if provable else 7), 0
    for start in range(-shift, 7):
        for limit in range(-shift, 8):
            for delta in (-2, -1, 1, 2):
                if not all(-5 <= i < 5 for i in range(start, limit, delta)):
                    continue  # out of range: Gather raises, ORT's fused Slice (in the original too) clamps
                feeds = {"x": x, "delta": np.array(delta), "a": np.zeros(start + shift, np.float32),
                         "b": np.zeros(limit + shift, np.float32)}
                if not provable:
                    feeds["shift"] = np.zeros(shift, np.float32)
                want = kernel.run(None, feeds)[0]
                assert_bit_identical(want, x[:, list(range(start, limit, delta))])
                wrong_in_ort += not np.array_equal(original.run(None, feeds)[0], want)
                for runner in runners:
                    assert_bit_identical(runner.run(None, feeds)[0], want)
    assert (wrong_in_ort == 0) == provable  # ORT's own fusion of the original: why the guard stays elsewhere


def test_a_gather_over_an_arange_of_a_dimension_is_given_back():
    """XLNet's ``index_select(x, 3, arange(x.shape[3]))``, exported by TorchScript: the Range's limit is a Cast of
    a Shape's element (itself a rewritten Gather); rewrite then lower gives back the original's op counts."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    import io
    import warnings

    import onnx

    class Select(torch.nn.Module):
        def forward(self, x):
            return x.index_select(3, torch.arange(x.shape[3]))

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Select(), (torch.zeros(2, 3, 4, 5),), buffer, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "b", 1: "h", 2: "i", 3: "j"}}, opset_version=17, dynamo=False)
    model = onnx.load_from_string(buffer.getvalue())
    assert any(n.op_type == "Range" for n in model.graph.node)
    rewritten, rewrite_report = rewrite_model(model)
    lowered, report = lower_model(rewritten)
    assert rewrite_report.rewritten == len(report.outcomes) >= 1
    assert {(o.form, o.source) for o in report.outcomes} == {("Gather", "rewrite record")}, report.table()
    assert collections.Counter(n.op_type for n in lowered.graph.node) == collections.Counter(
        n.op_type for n in model.graph.node)
    session = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"])
    assert session.bridge_crossings == 0
    for shape in [(2, 3, 4, 5), (1, 2, 3, 1), (1, 1, 1, 7)]:
        x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
        want = sessions(model).run(None, {"x": x})[0]
        assert_bit_identical(want, x)
        assert_bit_identical(session.run(None, {"x": x})[0], want)


def test_a_recorded_string_gather_of_blocks_is_refused():
    from gathermultiaxis.graphs import TensorInfo
    from gathermultiaxis.graphs.lower.ort_guards import possibly_string, recorded_gather_refused

    assert [possibly_string(t) for t in (TensorProto.STRING, 0, TensorProto.FLOAT)] == [True, True, False]
    gather = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    model = make_model([helper.make_node("GatherMultiaxis", ["x", "i", "a"], ["y"], domain="ai.onnx.contrib",
                                         mode="error")],
                       [helper.make_tensor_value_info(n, t, None) for n, t in (("x", 8), ("i", 7), ("a", 7))],
                       [helper.make_tensor_value_info("y", 8, None)], extra_opsets=[CONTRIB])

    def refused(shape):
        return recorded_gather_refused(gather, TensorInfo(TensorProto.STRING, shape), scope)

    scopes = probe(model, lambda node, s: s)
    scope = scopes[0]
    assert refused((3, 2)) and refused(None) and not refused((3, 1)) and not refused((3,))
