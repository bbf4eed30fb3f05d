"""The lowering's forms (graphs/lower/, form_plans and form_emitter, graphs/provenance.py): every node in its
cheapest exact standard form. A rewritten model lowers back to the original's op types and counts; a
GatherMultiaxis the rewrite did not write takes the form its semantics allow; every result is compared
bit for bit against ORT running the original (or the custom op), in every mode."""

from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from sessions import builtin_session, custom_session
from support import assert_bit_identical, make_model, reversal_model

from gathermultiaxis.graphs import lower_model, rewrite_model
from gathermultiaxis.graphs.lower.form_plans import (WEBNN_TARGET, CoordinatesPlan, ElementsPlan, GatherPlan, NDPlan,
                                                     form_choices, plan_forms)
from gathermultiaxis.graphs.lower.form_semantics import Semantics
from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.provenance import KEY, replaced_gather
from gathermultiaxis.ops import DOMAIN, Mode

CONTRIB = helper.make_opsetid(DOMAIN, 1)


def op_counts(model: onnx.ModelProto) -> Counter:
    return Counter(node.op_type for node in model.graph.node if node.op_type != "Constant")


def default_options_session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def runs(session, feeds):
    try:
        return session.run(None, feeds)
    except Exception as error:  # noqa: BLE001 - ORT's own error types
        return error


def assert_same_outcome(actual, expected):
    if isinstance(expected, Exception):
        assert isinstance(actual, Exception), f"the reference raised {expected!r}, the lowered model did not"
        return
    assert not isinstance(actual, Exception), actual
    for a, e in zip(actual, expected):
        assert_bit_identical(a, e)


# -- a model of Gather, GatherElements and GatherND only, in each mode of use ------------------------

def gathers_model() -> onnx.ModelProto:
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    negative = numpy_helper.from_array(np.array([-1, 0, -10], np.int64), "negative")
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["embedded"], axis=0, name="embedding"),
        helper.make_node("Gather", ["x", "column"], ["picked"], axis=1, name="x[:, i]"),
        helper.make_node("GatherElements", ["x", "positions"], ["taken"], axis=1, name="torch.gather"),
        helper.make_node("GatherND", ["batched", "tuples"], ["by_batch"], batch_dims=1, name="gather_nd_batch"),
        helper.make_node("GatherND", ["x", "coordinates"], ["points"], name="gather_nd_full"),
        helper.make_node("Gather", ["table", "negative"], ["from_end"], axis=0, domain=""),  # unnamed, domain set
    ]
    source = nodes[0].metadata_props.add()  # an exporter's metadata (torch's dynamo writes such entries)
    source.key, source.value = "pkg.torch.onnx.name_scopes", "['', 'embedding']"
    nodes[0].doc_string = "the token embedding"
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "length"]),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5]),
              helper.make_tensor_value_info("column", TensorProto.INT64, []),
              helper.make_tensor_value_info("positions", TensorProto.INT64, [3, 2]),
              helper.make_tensor_value_info("batched", TensorProto.FLOAT, [2, 4, 3]),
              helper.make_tensor_value_info("tuples", TensorProto.INT64, [2, 5, 1]),
              helper.make_tensor_value_info("coordinates", TensorProto.INT64, [4, 2])]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
               for name in ("embedded", "picked", "taken", "by_batch", "points", "from_end")]
    return make_model(nodes, inputs, outputs, [table, negative], opset=18)


def gathers_feeds(seed: int, in_range: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    ids = rng.integers(-10, 10, (2, 7))
    if not in_range:
        ids[1, 3] = 10  # out of range for the table
    return {"ids": ids, "x": rng.standard_normal((3, 5)).astype(np.float32),
            "column": np.array(rng.integers(-5, 5)), "positions": rng.integers(-5, 5, (3, 2)),
            "batched": rng.standard_normal((2, 4, 3)).astype(np.float32), "tuples": rng.integers(-4, 4, (2, 5, 1)),
            "coordinates": np.stack([rng.integers(-3, 3, 4), rng.integers(-5, 5, 4)], axis=1)}


def test_rewrite_then_lower_gives_back_the_original_op_types_and_counts():
    model = gathers_model()
    rewritten, rewrite_report = rewrite_model(model)
    assert rewrite_report.rewritten == 6 and op_counts(rewritten)["GatherMultiaxis"] == 6
    lowered, report = lower_model(rewritten)
    assert report.left == 0 and {o.source for o in report.outcomes} == {"rewrite record"}
    assert op_counts(lowered) == op_counts(model)
    assert report.forms() == {"Gather": 3, "GatherElements": 1, "GatherND": 2}
    # the very nodes: names (or none), domains as set, attributes, the exporter's metadata, no record left
    assert [n.SerializeToString() for n in lowered.graph.node] == [n.SerializeToString() for n in model.graph.node]
    for seed in range(4):
        feeds = gathers_feeds(seed, in_range=seed != 3)
        expected = runs(builtin_session(model), feeds)
        assert isinstance(expected, Exception) == (seed == 3)
        for session in (builtin_session(lowered), default_options_session(lowered)):
            assert_same_outcome(runs(session, feeds), expected)


def without_records(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        kept = [entry for entry in node.metadata_props if entry.key != KEY]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    return copy


def test_without_the_records_each_node_still_takes_one_standard_gather():
    """The forms from semantics alone: the rewrite's alignment nodes stay around, but no node takes the
    general decomposition."""
    model = gathers_model()
    rewritten = without_records(rewrite_model(model)[0])
    assert not any(replaced_gather(node) for node in rewritten.graph.node)
    lowered, report = lower_model(rewritten)
    assert report.left == 0 and {o.source for o in report.outcomes} == {"semantics"}
    assert "general" not in report.forms(), report.table()
    counts = op_counts(lowered)
    gathers = sum(counts[op] for op in ("Gather", "GatherElements", "GatherND"))
    assert gathers == 6 and not {"Range", "Shape", "If", "Where"} & set(counts)
    for seed in range(4):
        feeds = gathers_feeds(seed, in_range=seed != 3)
        assert_same_outcome(runs(builtin_session(lowered), feeds), runs(builtin_session(model), feeds))


def test_a_record_the_graph_no_longer_bears_out_is_not_used():
    """A record is a claim: a node whose mode was changed after the rewrite lowers from its semantics."""
    model = gathers_model()
    rewritten = rewrite_model(model)[0]
    for node in rewritten.graph.node:
        if node.op_type == "GatherMultiaxis":
            node.attribute[0].s = b"clamp"
    lowered, report = lower_model(rewritten)
    assert report.left == 0 and {o.source for o in report.outcomes} == {"semantics"}
    feeds = gathers_feeds(3, in_range=False)  # out of range: clamped, not raised
    expected = custom_session(rewritten).run(None, feeds)
    for actual, wanted in zip(builtin_session(lowered).run(None, feeds), expected):
        assert_bit_identical(actual, wanted)


def test_run_time_aligned_nodes_lower_to_the_one_gather():
    """Ranks unknown everywhere: the rewrite aligns at run time (Shape / Range / Unsqueeze), the lowering
    still gives back exactly the original gathers."""
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], axis=1),
             helper.make_node("GatherElements", ["x", "j"], ["z"], axis=-1),
             helper.make_node("GatherND", ["x", "k"], ["w"], batch_dims=1)]
    model = make_model(nodes, [helper.make_tensor_value_info(n, t, None) for n, t in
                               [("x", TensorProto.FLOAT), ("i", TensorProto.INT64), ("j", TensorProto.INT64),
                                ("k", TensorProto.INT64)]],
                       [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "yzw"], opset=18)
    rewritten, rewrite_report = rewrite_model(model)
    assert rewrite_report.runtime_aligned == 3 and op_counts(rewritten)["Range"] > 0
    lowered, report = lower_model(rewritten)
    assert op_counts(lowered) == op_counts(model), report.table()
    rng = np.random.default_rng(0)
    for shape in [(2, 3, 4), (3, 4), (2, 0, 3)]:
        x = rng.standard_normal(shape).astype(np.float32)
        feeds = {"x": x, "i": rng.integers(-shape[1], max(shape[1], 1), (2,)) if shape[1] else np.zeros(0, np.int64),
                 "j": rng.integers(0, shape[-1], shape[:-1] + (2,)), "k": rng.integers(0, max(shape[1], 1), (shape[0], 2, 1))}
        assert_same_outcome(runs(builtin_session(lowered), feeds), runs(builtin_session(model), feeds))


def test_a_reversal_through_range_stays_right_under_ort_defaults():
    """ORT's GatherToSliceFusion gets Gather(x, Range(T-1, -1, -1)) wrong under its default options
    (README, "Upstream problems"); the lowering does not give that Gather back, so the right answer wins."""
    model, x = reversal_model(), np.arange(12, dtype=np.float32).reshape(3, 4)
    assert default_options_session(model).run(None, {"x": x})[0].shape == (0, 4)  # ORT's bug, still there
    lowered, report = lower_model(rewrite_model(model)[0])
    producers = {output: node for node in lowered.graph.node for output in node.output}
    assert report.left == 0
    assert all(producers[node.input[1]].op_type != "Range" for node in lowered.graph.node if node.op_type == "Gather"
               and node.input[1] in producers), report.table()
    for session in (builtin_session(lowered), default_options_session(lowered)):
        assert_bit_identical(session.run(None, {"x": x})[0], x[::-1])


# -- hand-written GatherMultiaxis nodes: the form their semantics allow ------------------------------

# (name, input shape, indices shape, axes, expected form)
HAND_WRITTEN = [
    ("embedding", (10, 4), (3, 1), [0], "Gather"),
    ("column", (3, 5), (1, 2), [1], "Gather"),
    ("index dims after the axis", (5, 1, 3), (4, 6, 1), [0], "Gather"),
    ("take_along_axis", (4, 6), (4, 3), [1], "GatherElements"),
    ("take_along_axis, broadcast rows", (4, 6, 2), (1, 3, 2), [1], "GatherElements"),
    ("full coordinates", (4, 5), (3, 2), [0, 1], "GatherND"),
    ("batch dims", (2, 4, 5, 3), (2, 6, 1, 2), [1, 2], "GatherND"),
    ("multiaxis (x, y) on NHWC", (2, 8, 8, 3), (1, 5, 5, 2), [1, 2], "GatherND"),
    ("multiaxis (y, x) on NHWC", (2, 8, 8, 3), (1, 5, 5, 2), [2, 1], "GatherND"),
    ("axes apart", (3, 4, 5), (2, 4, 2), [0, 2], "general"),
]
MODES = ["error", "error_nonempty", "clamp", "zero"]


def hand_written_model(shape, indices_shape, axes, mode, elem_type=TensorProto.FLOAT, index_type=TensorProto.INT64):
    node = helper.make_node("GatherMultiaxis", ["x", "i", "axes"], ["y"], domain=DOMAIN, mode=mode, name="gma")
    return make_model([node], [helper.make_tensor_value_info("x", elem_type, list(shape)),
                               helper.make_tensor_value_info("i", index_type, list(indices_shape))],
                      [helper.make_tensor_value_info("y", elem_type, None)],
                      [numpy_helper.from_array(np.array(axes, np.int64), "axes")], opset=18, extra_opsets=[CONTRIB])


def hand_written_indices(rng, shape, indices_shape, axes, out_of_range: bool):
    k = len(axes)
    sizes = np.array([shape[a] for a in axes] * (int(np.prod(indices_shape)) // k))
    spread = 3 if out_of_range else 0
    values = rng.integers(-sizes - spread, sizes + spread)
    if out_of_range:
        values[0] = sizes[0] + 2
    return values.reshape(indices_shape).astype(np.int64)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name, shape, indices_shape, axes, form", HAND_WRITTEN, ids=[c[0] for c in HAND_WRITTEN])
def test_hand_written_nodes_take_their_form(name, shape, indices_shape, axes, form, mode):
    model = hand_written_model(shape, indices_shape, axes, mode)
    lowered, report = lower_model(model)
    assert [(o.form, o.source) for o in report.outcomes] == [(form, "semantics")], report.table()
    if form != "general":
        counts = op_counts(lowered)
        assert counts[form] == 1 and not {"Shape", "Range", "If", "Reshape", "Flatten"} & set(counts), counts
    rng = np.random.default_rng(len(name))
    for out_of_range in (False, True):
        x = rng.standard_normal(shape).astype(np.float32)
        x.flat[:3] = [-0.0, np.nan, -np.inf]  # signs and NaN positions must survive (ORT's Where keeps -0.0 only
        # from its third input: the zero mode's Where reads the values there)
        feeds = {"x": x, "i": hand_written_indices(rng, shape, indices_shape, axes, out_of_range)}
        expected = runs(custom_session(model), feeds)  # the custom op in ORT: the definition
        assert isinstance(expected, Exception) == (out_of_range and mode.startswith("error"))
        assert_same_outcome(runs(builtin_session(lowered), feeds), expected)


@pytest.mark.parametrize("elem_type", [TensorProto.BOOL, TensorProto.INT16, TensorProto.STRING, TensorProto.UINT8])
@pytest.mark.parametrize("mode", MODES)
def test_forms_for_other_element_types(elem_type, mode):
    """Booleans are zeroed with And; types ORT's Where lacks take the general form in mode "zero"."""
    shape, indices_shape, axes = (4, 6), (4, 3), [1]
    model = hand_written_model(shape, indices_shape, axes, mode, elem_type, TensorProto.INT32)
    lowered, report = lower_model(model)
    assert report.left == 0
    if mode == "zero" and elem_type == TensorProto.INT16:
        assert report.outcomes[0].form == "general" and "Where" in report.outcomes[0].reason
    else:
        assert report.outcomes[0].form == "GatherElements", report.table()
    rng = np.random.default_rng(elem_type)
    values = rng.integers(0, 2, shape)
    x = values.astype(object).astype(str) if elem_type == TensorProto.STRING else \
        values.astype(helper.tensor_dtype_to_np_dtype(elem_type))
    for out_of_range in (False, True):
        feeds = {"x": x, "i": hand_written_indices(rng, shape, indices_shape, axes, out_of_range).astype(np.int32)}
        assert_same_outcome(runs(builtin_session(lowered), feeds), runs(custom_session(model), feeds))


def test_opset_11_takes_the_forms_its_ops_allow():
    """No batch_dims before opset 12 and no integer Min / Max: GatherND with batch dims and "clamp" fall
    back to the general form, with the reason."""
    model = hand_written_model((2, 4, 5, 3), (2, 6, 1, 2), [1, 2], "error_nonempty")
    model.opset_import[0].version = 11
    lowered, report = lower_model(model)
    assert report.outcomes[0].form == "general" and "batch_dims needs opset 12" in report.outcomes[0].reason
    clamp = hand_written_model((10, 4), (3, 1), [0], "clamp")
    clamp.opset_import[0].version = 11
    assert lower_model(clamp)[1].outcomes[0].form == "general"
    error = hand_written_model((10, 4), (3, 1), [0], "error")
    error.opset_import[0].version = 11
    assert lower_model(error)[1].outcomes[0].form == "Gather"


@pytest.mark.parametrize("shape, indices_shape, axes", [((4, 6, 2), (1, 3, 2), [1]), ((2, 8, 8, 3), (1, 5, 5, 2), [1, 2]),
                                                       ((2, 8, 8, 3), (1, 5, 5, 2), [2, 1])])
def test_constant_indices_are_prepared_into_one_constant(shape, indices_shape, axes):
    """Constant int32 indices: cast, expanded, unfolded and permuted at lowering time into one constant,
    with no constant of an intermediate step left unread."""
    rng = np.random.default_rng(7)
    indices = hand_written_indices(rng, shape, indices_shape, axes, out_of_range=False).astype(np.int32)
    model = hand_written_model(shape, indices_shape, axes, "error")
    model.graph.input.pop()  # the indices become an initializer
    model.graph.initializer.append(numpy_helper.from_array(indices, "i"))
    lowered, report = lower_model(model)
    assert report.outcomes[0].form != "general"
    assert [node.op_type for node in lowered.graph.node] == ["Constant", report.outcomes[0].form]
    x = rng.standard_normal(shape).astype(np.float32)
    assert_bit_identical(builtin_session(lowered).run(None, {"x": x})[0], custom_session(model).run(None, {"x": x})[0])


def _static_semantics(data_shape, indices_shape, axes, mode=Mode.CLAMP, elem_type=TensorProto.FLOAT):
    return Semantics(len(data_shape), tuple(axes), mode, TensorInfo(elem_type, tuple(data_shape)),
                     TensorInfo(TensorProto.INT64, tuple(indices_shape)))


def test_each_target_plans_its_own_forms_in_its_own_words():
    two_axes = _static_semantics((4, 5, 3), (2, 1, 2), (0, 1))
    plans, reasons = plan_forms(two_axes, 17)
    assert plans == [NDPlan(0, (), (), None, None, (), 1)]
    assert reasons == ["Gather: Gather reads one axis", "GatherElements: GatherElements reads one axis"]
    assert plan_forms(two_axes, 17) == plan_forms(two_axes, 17)  # (pure)
    assert form_choices(two_axes, 17, WEBNN_TARGET) == [
        "not one Gather: several axes", "not one GatherElements: several axes", CoordinatesPlan(0, False)]
    # a batch dimension before the axis: ONNX's GatherND takes it as batch_dims, WebNN's as coordinates
    batched = _static_semantics((2, 5, 3), (2, 4, 1), (1,))
    assert [type(p) for p in plan_forms(batched, 17)[0]] == [ElementsPlan, NDPlan]
    assert [type(c) for c in form_choices(batched, 17, WEBNN_TARGET)] == [str, ElementsPlan, CoordinatesPlan]
    # "zero" on int16: ORT's Where has no kernel, WebNN zeroes by a zero slice
    int16 = _static_semantics((5, 3), (2, 1), (0,), Mode.ZERO, TensorProto.INT16)
    assert plan_forms(int16, 17) == ([], ["ORT's Where has no kernel for INT16 (mode 'zero')"])
    assert form_choices(int16, 17, WEBNN_TARGET)[0] == GatherPlan(0, (), (1,))
