"""graphs/webnn (webnn_pass: ``lower --target webnn``, and ``webnn-check``): every GatherMultiaxis becomes ops that
map one-to-one onto WebNN, bit-identical on plain ORT (graph optimizations off, as ``check`` compares)
wherever the original does not raise; the lowered nodes are all inside what ORT's WebNN EP takes."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.conformance.cases import default_suite
from gathermultiaxis.cli import main
from gathermultiaxis.conformance.fuzz import fuzz_case
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.graphs.webnn import NotStatic, lower_for_webnn, lowering_findings, webnn_check
from gathermultiaxis.harness import bit_identical, make_session
from gathermultiaxis.ops import Mode, gather_multiaxis
from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE


def compare(model, feeds) -> str:
    """"exact", "raises" (the original refuses the feeds: WebNN cannot raise), or what differs."""
    try:
        want = make_session(model, custom=False).run(None, feeds)
    except Exception:  # noqa: BLE001
        return "raises"
    shapes = {name: value.shape for name, value in feeds.items()}
    rewritten, _ = rewrite_model(model)
    lowered, report = lower_for_webnn(rewritten, shapes)
    assert not any(node.domain == DOMAIN for node in lowered.graph.node)
    got = make_session(lowered, custom=False).run(None, feeds)
    if not all(bit_identical(a, b) for a, b in zip(got, want)):
        return "differs"
    findings = lowering_findings(lowered, report, shapes)
    return "exact" if not findings else f"findings: {findings[:2]}"


def test_onnx_node_tests_and_the_example():
    verdicts = {}
    for case in default_suite():
        for number, data_set in enumerate(case.data_sets or []):
            try:
                verdicts[f"{case.name}#{number}"] = compare(case.model, data_set.feeds)
            except Exception as error:  # noqa: BLE001 - ORT cannot run some node tests at all
                verdicts[f"{case.name}#{number}"] = f"not runnable: {type(error).__name__}"
    bad = {name: v for name, v in verdicts.items() if v not in ("exact", "raises") and not v.startswith("not runnable")}
    assert not bad, bad
    assert sum(v == "exact" for v in verdicts.values()) >= 70


def test_fuzz_cases():
    counts = {}
    for seed in range(150):
        case = fuzz_case(seed)
        for data_set in case.data_sets:
            verdict = compare(case.model, data_set.feeds)
            counts[verdict] = counts.get(verdict, 0) + 1
    assert set(counts) <= {"exact", "raises"}, counts
    assert counts["exact"] >= 100


def _model(node, inputs, initializers=(), opset=17):
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("name, node, data, indices", [
    ("gather_nd batch_dims 1", helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1),
     np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.array([[[2], [0]], [[1], [-1]]])),
    ("broadcasting gather_elements", helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1),
     np.arange(20, dtype=np.float32).reshape(4, 5), np.array([[4, 0], [1, -2]])),
    ("rank-0 gather", helper.make_node("Gather", ["x", "i"], ["y"], axis=0),
     np.arange(5, dtype=np.float32), np.array(3)),
])
def test_what_the_webnn_ops_cannot_take_directly(name, node, data, indices):
    """GatherND with batch_dims, GatherElements with smaller indices, a scalar index: after rewrite and
    the WebNN lowering, every node is inside the EP's subset, and the result is ORT's."""
    model = _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(data.shape)),
                          helper.make_tensor_value_info("i", TensorProto.INT64, list(indices.shape))])
    assert webnn_check(model)  # the original is outside the subset
    feeds = {"x": data, "i": indices}
    assert compare(model, feeds) == "exact"
    rewritten, _ = rewrite_model(model)
    lowered, report = lower_for_webnn(rewritten)
    assert report.left == 0 and webnn_check(lowered) == []


@pytest.mark.parametrize("mode", [Mode.CLAMP, Mode.ZERO, Mode.ERROR])
def test_out_of_range_indices(mode):
    """clamp and zero as the kernel does them; error cannot raise in WebNN and reads as clamp does."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.array([[5, -1, 0, -7]])  # axes [1, 0] folded: (5, -1) and (0, -7)
    node = helper.make_node(OP_TYPE, ["x", "i", "axes"], ["y"], domain=DOMAIN, mode=mode.value)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([1, 0]), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                              ir_version=8)
    lowered, report = lower_for_webnn(model)
    assert report.lowered == 1 and webnn_check(lowered) == []
    got = make_session(lowered, custom=False).run(None, {"x": data, "i": indices})[0]
    expected = gather_multiaxis(data, indices, [1, 0], Mode.CLAMP if mode == Mode.ERROR else mode)
    np.testing.assert_array_equal(got, expected)


def test_symbolic_shapes_need_input_shapes(tmp_path, capsys):
    model = _model(helper.make_node("Gather", ["x", "i"], ["y"], axis=0),
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3]),
                    helper.make_tensor_value_info("i", TensorProto.INT64, ["m"])])
    rewritten, _ = rewrite_model(model)
    with pytest.raises(NotStatic, match="'x', 'i' have symbolic or unknown dims"):
        lower_for_webnn(rewritten)
    path = tmp_path / "r.onnx"
    onnx.save(rewritten, str(path))
    assert main(["lower", str(path), "-o", str(tmp_path / "w.onnx"), "--target", "webnn"]) == 2
    assert "give --input-shapes" in capsys.readouterr().err
    assert main(["lower", str(path), "-o", str(tmp_path / "w.onnx"), "--target", "webnn",
                 "--input-shapes", "x:[5,3]", "i:[2]"]) == 0
    assert main(["webnn-check", str(tmp_path / "w.onnx")]) == 0
    assert "every node is within WebNN's subset" in capsys.readouterr().out
    assert main(["webnn-check", str(path), "--input-shapes", "x:[5,3]", "i:[2]"]) == 1  # the custom op


def test_check_webnn_mode(capsys):
    """``check --webnn``: the runner lowers each case for WebNN with each data set's shapes; a data set the
    original refuses is "not compared" (WebNN cannot raise), never a pass."""
    assert main(["check", "--webnn", "--fuzz", "60", "--allow", "not compared"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    passed, failed, not_compared = (int(summary.split(", ")[i].split()[0]) for i in range(3))
    assert failed == 0 and passed >= 40 and passed + not_compared <= 60


# -- The form of each node: the fewest WebNN ops (issue 27, item 3)

def _gather_multiaxis_model(data_shape, indices_shape, axes, index_type=TensorProto.INT64, mode="error"):
    node = helper.make_node(OP_TYPE, ["x", "i", "axes"], ["y"], domain=DOMAIN, mode=mode)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(data_shape)),
                                            helper.make_tensor_value_info("i", index_type, list(indices_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(axes, np.int64), "axes")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=8)


def _with_mode(model, mode):
    """A copy of the rewritten ``model`` with every GatherMultiaxis node in ``mode``."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        if node.domain == DOMAIN:
            next(a for a in node.attribute if a.name == "mode").s = mode.value.encode()
    return copy


def _op_counts(model) -> dict[str, int]:
    counts = {}
    for node in model.graph.node:
        if node.op_type != "Constant":  # constants: initializers to ORT's WebNN EP
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def _indices(rng, shape, dims, dtype, in_range: bool):
    """Indices of ``shape`` where position p indexes an axis of size ``dims`` (broadcast) at p: within
    [-dim, dim - 1], or (not ``in_range``) also up to 3 past either end, the first one past the end and
    the last one before the start."""
    dims = np.broadcast_to(np.asarray(dims, np.int64), shape)
    reach = 0 if in_range else 3
    values = rng.integers(-dims - reach, dims + reach)
    if not in_range:
        flat, flat_dims = values.reshape(-1), dims.reshape(-1)
        flat[0], flat[-1] = flat_dims[0] + 2, -flat_dims[-1] - 3
    return values.astype(dtype)


_I64, _I32 = TensorProto.INT64, TensorProto.INT32


def _standard(node, data_shape, indices_shape, index_type=_I64):
    """A model of one standard gather, rewritten (a GatherMultiaxis node, as users get it)."""
    model = _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(data_shape)),
                          helper.make_tensor_value_info("i", index_type, list(indices_shape))])
    return rewrite_model(model)[0]


# name, rewritten model, data shape, indices shape, index dtype, axis size at each index position, form, the
# lowered model's ops (not counting Constants: initializers to the EP) in modes error, error_nonempty, clamp
FORM_CASES = [
    ("embedding", _standard(helper.make_node("Gather", ["x", "i"], ["y"], axis=0), (10, 4), (2, 3)),
     (10, 4), (2, 3), np.int64, 10, "Gather", {"Gather": 1, "Min": 1, "Max": 1, "Cast": 1}),
    ("x[:, i] with int32 indices", _standard(helper.make_node("Gather", ["x", "i"], ["y"], axis=1), (3, 10, 4), (5,),
                                             _I32),
     (3, 10, 4), (5,), np.int32, 10, "Gather", {"Gather": 1, "Min": 1, "Max": 1}),
    ("GatherElements, exact shapes", _standard(helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1),
                                               (4, 6), (4, 3)),
     (4, 6), (4, 3), np.int64, 6, "GatherElements", {"GatherElements": 1, "Min": 1, "Max": 1, "Cast": 1}),
    ("GatherElements, indices broadcast on the last dim", _gather_multiaxis_model((4, 6, 5), (4, 3, 1), [1]),
     (4, 6, 5), (4, 3, 1), np.int64, 6, "GatherElements",
     {"Expand": 1, "GatherElements": 1, "Min": 1, "Max": 1, "Cast": 1}),
    ("GatherND", _standard(helper.make_node("GatherND", ["x", "i"], ["y"]), (4, 5, 6), (3, 2)),
     (4, 5, 6), (3, 2), np.int64, [4, 5], "GatherND", {"GatherND": 1, "Min": 1, "Max": 1}),
    ("GatherND, tuples on dims the data lacks (dynamo's aten.index)",
     _standard(helper.make_node("GatherND", ["x", "i"], ["y"]), (4, 6), (1, 1, 3, 5, 2)),
     (4, 6), (1, 1, 3, 5, 2), np.int64, [4, 6], "GatherND", {"GatherND": 1, "Min": 1, "Max": 1}),
    ("GatherND, batch_dims 1", _standard(helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1),
                                         (2, 3, 4, 5), (2, 6, 2)),
     (2, 3, 4, 5), (2, 6, 2), np.int64, [3, 4], "GatherND", {"GatherND": 1, "Concat": 1, "Min": 1, "Max": 1}),
    # (the Gather puts the components in the data's order; the Reshape: the node's output is [5, 1])
    ("tuples in reversed axis order, int32", _gather_multiaxis_model((3, 4), (5, 2), [1, 0], _I32),
     (3, 4), (5, 2), np.int32, [4, 3], "GatherND",
     {"GatherND": 1, "Gather": 1, "Min": 1, "Max": 1, "Cast": 1, "Reshape": 1}),
]


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("name, model, data_shape, indices_shape, dtype, dims, form, ops", FORM_CASES,
                         ids=[case[0] for case in FORM_CASES])
def test_each_form_is_the_fewest_webnn_ops(name, model, data_shape, indices_shape, dtype, dims, form, ops, mode):
    """One gather per node (and no more than its form needs), bit-identical to ORT running the
    GatherMultiaxis node, in every mode, with indices in range and out of range (error modes read as
    clamp), and within what ORT's WebNN EP takes."""
    model = _with_mode(model, mode)
    lowered, report = lower_for_webnn(model)
    assert report.forms() == {form: 1} and report.left == 0, report.table()
    assert webnn_check(lowered) == []
    counts = _op_counts(lowered)
    if mode == Mode.ZERO:
        extra = {op: n - ops.get(op, 0) for op, n in counts.items() if n != ops.get(op, 0)}
        axes = 2 if form == "GatherND" else 1
        assert extra == {"Add": 1, "Concat": axes}, counts  # the data read as [data, data, zeros] per axis
    else:
        assert counts == ops
    rng = np.random.default_rng(7)
    data = rng.standard_normal(data_shape).astype(np.float32)
    data.reshape(-1)[:2] = [np.float32("nan"), np.float32(-0.0)]  # bits, not values, compared
    for in_range in (True, False):
        feeds = {"x": data, "i": _indices(rng, indices_shape, dims, dtype, in_range)}
        reference = model if in_range or mode in (Mode.CLAMP, Mode.ZERO) else _with_mode(model, Mode.CLAMP)
        want = make_session(reference, custom=True).run(None, feeds)[0]
        got = make_session(lowered, custom=False).run(None, feeds)[0]
        assert bit_identical(got, want), (in_range, got, want)


@pytest.mark.parametrize("rows, clamped", [(6, False), (5, True)])
def test_indices_in_range_by_construction_are_not_clamped(rows, clamped):
    """Indices an ArgMax over 6 values makes (0 to 5) need no clamp into a table of 6 rows, and two
    gathers at them share one cast; into a table of 5 rows they are clamped (also once for both)."""
    tables = [numpy_helper.from_array(np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) + k, f"t{k}")
              for k in range(2)]
    nodes = [helper.make_node("ArgMax", ["x"], ["i"], axis=1, keepdims=0),
             helper.make_node("Gather", ["t0", "i"], ["y0"], axis=0),
             helper.make_node("Gather", ["t1", "i"], ["y1"], axis=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6])],
                              [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None) for k in range(2)],
                              tables)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    lowered, report = lower_for_webnn(rewrite_model(model)[0])
    assert report.forms() == {"Gather": 2} and webnn_check(lowered) == []
    expected = {"ArgMax": 1, "Cast": 1, "Gather": 2} | ({"Min": 1, "Max": 1} if clamped else {})
    assert _op_counts(lowered) == expected
    x = np.random.default_rng(3).standard_normal((3, 6)).astype(np.float32)
    x[0, 5] = 9  # row 0 reads index 5: past the end of 5 rows (the original raises; the clamped read is row 4)
    got = make_session(lowered, custom=False).run(None, {"x": x})
    indices = np.clip(x.argmax(axis=1), 0, rows - 1)
    for k in range(2):
        np.testing.assert_array_equal(got[k], numpy_helper.to_array(tables[k])[indices])


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("node, data_shape, indices_shape, dims, ops", [
    (helper.make_node("Gather", ["x", "i"], ["y"], axis=0), (4, 3), (2, 5), 4, {"Gather": 1, "Cast": 1}),
    (helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1), (4, 5), (4, 3), 5,
     {"GatherElements": 1, "Cast": 1}),
    (helper.make_node("GatherND", ["x", "i"], ["y"]), (4, 5, 6), (3, 2), [4, 5], {"GatherND": 1}),
], ids=["Gather", "GatherElements", "GatherND"])
def test_float16_is_gathered_as_float16(node, data_shape, indices_shape, dims, ops, mode):
    """The rewrite's float32 round trip around a float16 gather (the custom op has no float16) goes:
    WebNN gathers float16, bit-identical (NaN payloads, -0.0) to the custom op on the round trip."""
    model = _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, list(data_shape)),
                          helper.make_tensor_value_info("i", TensorProto.INT64, list(indices_shape))])
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    rewritten = _with_mode(rewrite_model(model)[0], mode)
    lowered, report = lower_for_webnn(rewritten)
    assert report.left == 0 and webnn_check(lowered) == []
    counts = _op_counts(lowered)
    expected = ops | {"Min": 1, "Max": 1}  # no Cast to float32 and back: the Casts are the indices' to int32
    if mode == Mode.ZERO:
        expected |= {"Add": 1, "Concat": 2 if "GatherND" in ops else 1}
    assert counts == expected
    rng = np.random.default_rng(11)
    data = rng.standard_normal(data_shape).astype(np.float16)
    data.reshape(-1)[:2] = [np.float16("nan"), np.float16(-0.0)]
    for in_range in (True, False):
        feeds = {"x": data, "i": _indices(rng, indices_shape, dims, np.int64, in_range)}
        reference = rewritten if in_range or mode in (Mode.CLAMP, Mode.ZERO) else _with_mode(rewritten, Mode.CLAMP)
        want = make_session(reference, custom=True).run(None, feeds)[0]
        got = make_session(lowered, custom=False).run(None, feeds)[0]
        assert bit_identical(got, want), (in_range, got, want)


@pytest.mark.parametrize("elem_type, bounds_constant, expected", [
    (TensorProto.FLOAT, True, []),
    (TensorProto.INT64, True, ["Clip of a non-float tensor"]),
    (TensorProto.FLOAT, False, ["input 2 ('high') is not a constant"]),
])
def test_webnn_check_reads_clip_as_the_ep_does(elem_type, bounds_constant, expected):
    """ORT's WebNN EP takes Clip only with constant float/float16 bounds (why the lowering clamps indices
    with Min and Max)."""
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    bounds = [numpy_helper.from_array(np.array(0, dtype), "low")]
    inputs = [helper.make_tensor_value_info("x", elem_type, [3])]
    if bounds_constant:
        bounds.append(numpy_helper.from_array(np.array(5, dtype), "high"))
    else:
        inputs.append(helper.make_tensor_value_info("high", elem_type, []))
    graph = helper.make_graph([helper.make_node("Clip", ["x", "low", "high"], ["y"], name="clip")], "g", inputs,
                              [helper.make_tensor_value_info("y", elem_type, [3])], bounds)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    reasons = [finding.reason for finding in webnn_check(model)]
    assert len(reasons) == len(expected) and all(r.startswith(e) for r, e in zip(reasons, expected)), reasons


def test_the_general_form_says_why_no_single_gather_fits():
    """Axes 0 and 2 around a dim the output keeps: no gather of WebNN's takes them in one; the report's
    row for the node (``lower --json``) gives the general form and why, and the result is the custom op's."""
    model = _gather_multiaxis_model((3, 4, 5), (6, 1, 2), [2, 0])
    lowered, report = lower_for_webnn(model)
    assert report.as_dict()["forms"] == {"general": 1} and webnn_check(lowered) == []
    (row,) = report.as_dict()["nodes"]
    assert row["form"] == "general" and "not one block of adjacent dims" in row["reason"], row
    rng = np.random.default_rng(5)
    feeds = {"x": rng.standard_normal((3, 4, 5)).astype(np.float32),
             "i": _indices(rng, (6, 1, 2), [5, 3], np.int64, in_range=True)}
    want = make_session(model, custom=True).run(None, feeds)[0]
    assert bit_identical(make_session(lowered, custom=False).run(None, feeds)[0], want)


def test_a_folded_integer_table_is_stored_once():
    """The rewrite's Unsqueeze of a quantized (uint8) table is folded to a constant: the initializer it read
    goes with it (a newcomer saw the table stored twice, and ORT warning about the unused initializer)."""
    table = numpy_helper.from_array(np.arange(40, dtype=np.uint8).reshape(10, 4), "table")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0)], "quantized_embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("rows", TensorProto.UINT8, [2, 3, 4])], [table]),
        opset_imports=[helper.make_opsetid("", 18)])
    lowered, report = lower_for_webnn(rewrite_model(model)[0])
    assert report.left == 0
    read = {name for node in lowered.graph.node for name in node.input}
    assert [t.name for t in lowered.graph.initializer if t.name not in read] == []
    stored = sum(t.raw_data.count(bytes(range(40))) for t in lowered.graph.initializer) + sum(
        a.t.raw_data.count(bytes(range(40))) for node in lowered.graph.node for a in node.attribute if a.name == "value")
    assert stored == 1
    ids = np.array([[0, 9, -1], [3, 3, 5]])
    assert bit_identical(make_session(lowered, custom=False).run(None, {"ids": ids})[0],
                         make_session(model, custom=False).run(None, {"ids": ids})[0])


def test_lower_for_webnn_is_a_sequence_of_passes():
    from gathermultiaxis.graphs.lower import LowerReport
    from gathermultiaxis.graphs.webnn.webnn_pass import (EmptyExpandsAsConstants, LowerWhatIsLeft, UnnameReplacedDims,
                                                         WebNNPass, webnn_lowering)

    node = helper.make_node(OP_TYPE, ["x", "i", "axes"], ["y"], domain=DOMAIN, mode="clamp")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3]),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, [2, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([0], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    report = LowerReport()
    steps = webnn_lowering(model, None, None, report)
    assert [type(step) for step in steps.passes] == [WebNNPass, UnnameReplacedDims, LowerWhatIsLeft,
                                                     EmptyExpandsAsConstants]
    result = steps(model)
    assert result.model is not model and [n.op_type for n in model.graph.node] == [OP_TYPE]  # a copy
    lowered, expected = lower_for_webnn(model)
    assert result.model.SerializeToString() == lowered.SerializeToString()
    assert report.as_dict() == expected.as_dict() and report.forms() == {"Gather": 1}
