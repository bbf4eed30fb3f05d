"""graphs.lower.recorded_form: the record proven by the graph's structure, and the lowering's forms checked
as emitted."""

from __future__ import annotations

import collections
import json

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from lowering_probe import CONTRIB, constant, probe
from support import assert_bit_identical, make_model

import gathermultiaxis
from gathermultiaxis.graphs import lower_model, rewrite_model
from gathermultiaxis.graphs.lower.recorded_form import recorded_form
from gathermultiaxis.graphs.provenance import KEY, replaced_gather


# -- the record, proven by the graph ---------------------------------------------------------------------

def rewritten_gathers(shape_known=True):
    """A Gather, GatherElements and GatherND, rewritten (statically, or at run time where no shape is known)."""
    shape = (lambda dims: dims) if shape_known else (lambda dims: None)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0, name="gather"),
             helper.make_node("GatherElements", ["x", "order"], ["taken"], axis=1, name="elements"),
             helper.make_node("GatherND", ["x", "pairs"], ["picked"], name="nd")]
    inputs = [helper.make_tensor_value_info("table", TensorProto.FLOAT16, shape([10, 4])),
              helper.make_tensor_value_info("ids", TensorProto.INT64, shape([2, 3])),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, shape([3, 5])),
              helper.make_tensor_value_info("order", TensorProto.INT64, shape([3, 2])),
              helper.make_tensor_value_info("pairs", TensorProto.INT64, shape([4, 2]))]
    outputs = [helper.make_tensor_value_info(name, elem, None) for name, elem in
               (("rows", TensorProto.FLOAT16), ("taken", TensorProto.FLOAT), ("picked", TensorProto.FLOAT))]
    model = make_model(nodes, inputs, outputs, opset=17)
    rewritten, report = rewrite_model(model)
    assert report.runtime_aligned == (0 if shape_known else 3)
    return model, rewritten


@pytest.mark.parametrize("shape_known", [True, False])
def test_the_rewrites_own_chain_is_recognised(shape_known):
    _, rewritten = rewritten_gathers(shape_known)
    found = probe(rewritten, lambda node, scope: recorded_form(node, scope))
    assert [form.gather.op_type for form in found] == ["Gather", "GatherElements", "GatherND"]


def test_a_static_chain_is_not_taken_where_the_graph_no_longer_proves_the_ranks():
    _, rewritten = rewritten_gathers(shape_known=True)
    for value in rewritten.graph.input:  # the ranks the rewrite aligned for are not proven any more
        value.type.tensor_type.ClearField("shape")
    del rewritten.graph.value_info[:]
    found = probe(rewritten, lambda node, scope: recorded_form(node, scope))
    assert found == [None, None, None]


@pytest.mark.parametrize("edit", ["mode", "axes", "tail", "upstream"])
def test_an_edit_of_the_chain_makes_the_record_not_hold(edit):
    _, rewritten = rewritten_gathers()
    node = next(n for n in rewritten.graph.node if n.op_type == "GatherMultiaxis" and n.name == "gather")
    if edit == "mode":
        node.attribute[0].s = b"clamp"
    elif edit == "axes":
        rewritten.graph.node.insert(0, constant("other_axes", [0]))
        node = next(n for n in rewritten.graph.node if n.op_type == "GatherMultiaxis" and n.name == "gather")
        node.input[2] = "other_axes"
    elif edit == "tail":
        reader = next(n for n in rewritten.graph.node if node.output[0] in n.input)
        reader.op_type = "Identity" if reader.op_type != "Identity" else "Neg"
        del reader.attribute[:]
    else:
        producer = next(n for n in rewritten.graph.node if node.input[0] in n.output)
        producer.op_type = "Identity"  # the widening Cast of the float16 table becomes a plain copy
        del producer.attribute[:]
    found = probe(rewritten, lambda n, scope: recorded_form(n, scope))
    assert found[0] is None and found[1:] != [None, None]


def test_a_long_computation_of_the_indices_does_not_hide_the_record():
    """The rewrite's chain is recognised by its structure, not by a search of everything upstream (BigBird's and
    Funnel's GatherElements compute their indices through hundreds of nodes)."""
    nodes = [constant("one", 1)]
    current = "order"
    for number in range(300):
        nodes.append(helper.make_node("Add", [current, "one"] if number % 2 == 0 else [current, "minus"], [f"o{number}"]))
        current = f"o{number}"
    nodes.insert(0, constant("minus", -1))
    nodes.append(helper.make_node("GatherElements", ["x", current], ["taken"], axis=1))
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 5]),
                               helper.make_tensor_value_info("order", TensorProto.INT64, ["B", 2])],
                       [helper.make_tensor_value_info("taken", TensorProto.FLOAT, None)])
    rewritten, _ = rewrite_model(model)
    lowered, report = lower_model(rewritten)
    assert [(o.form, o.source) for o in report.outcomes] == [("GatherElements", "rewrite record")]
    assert collections.Counter(n.op_type for n in lowered.graph.node) == collections.Counter(
        n.op_type for n in model.graph.node)


@pytest.mark.parametrize("op, axis", [("Gather", 0), ("Gather", 1), ("Gather", -1), ("GatherElements", 1),
                                      ("GatherND", None)])
@pytest.mark.parametrize("ranks_known", [True, False], ids=["static", "run-time"])
def test_below_opset_13_rewrite_then_lower_gives_back_the_original(op, axis, ranks_known):
    """Opset 11: the run-time alignment is Reshapes and Expands to computed shapes (no Unsqueeze with axes
    inputs) and leaves no node that nothing reads; the indices come through 300 nodes. Lowered: the original's
    op counts, and ORT's results."""
    nodes = [constant("one", 1), constant("minus", -1)]
    current = "i"
    for number in range(300):
        nodes.append(helper.make_node("Add", [current, "one" if number % 2 == 0 else "minus"], [f"o{number}"]))
        current = f"o{number}"
    nodes.append(helper.make_node(op, ["x", current], ["y"], **({} if axis is None else {"axis": axis})))
    shape = (lambda dims: dims) if ranks_known else (lambda dims: None)
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape([3, 4])),
                               helper.make_tensor_value_info("i", TensorProto.INT64, shape([3, 2]))],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=11)
    rewritten, rewrite_report = rewrite_model(model)
    assert rewrite_report.runtime_aligned == (0 if ranks_known else 1)
    lowered, report = lower_model(rewritten)
    assert [(o.form, o.source) for o in report.outcomes] == [(op, "rewrite record")]
    assert collections.Counter(n.op_type for n in lowered.graph.node) == collections.Counter(
        n.op_type for n in model.graph.node)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "i": np.array([[2, 0], [1, 1], [0, 2]])}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    plain = ort.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"])
    assert_bit_identical(plain.run(None, feeds)[0], want)


def test_the_rewrite_writes_one_record_and_drops_a_carried_one():
    model, _ = rewritten_gathers()
    for node in model.graph.node:
        stale = node.metadata_props.add()
        stale.key, stale.value = KEY, json.dumps({"op_type": "Gather", "inputs": ["a", "b"], "output": "c"})
    rewritten, _ = rewrite_model(model)
    records = [[e for e in n.metadata_props if e.key == KEY] for n in rewritten.graph.node
               if n.op_type == "GatherMultiaxis"]
    assert [len(r) for r in records] == [1, 1, 1]
    assert [replaced_gather(n).data for n in rewritten.graph.node if n.op_type == "GatherMultiaxis"] == [
        "table", "x", "x"]


@pytest.mark.parametrize("text", [
    '{"op_type":"Gather","inputs":["x","i"],"output":"y","attributes":{"axis":0},"domain":"com.microsoft"}',
    '{"op_type":"Gather","inputs":["x","i"],"output":"y","attributes":{"axis":0,"mode":1}}',
    '{"op_type":"Gather","inputs":["x","i"],"output":"y","attributes":{"axis":"0"}}',
    '{"op_type":"Gather","inputs":["x","i"],"output":"y","attributes":{"axis":true}}',
    '{"op_type":"Slice","inputs":["x","i"],"output":"y"}',
    '{"op_type":"Gather","inputs":["x"],"output":"y"}',
    '{not json',
])
def test_a_record_that_is_not_one_is_ignored(text):
    node = helper.make_node("GatherMultiaxis", ["x", "i", "axes"], ["y"], domain="ai.onnx.contrib", mode="error")
    entry = node.metadata_props.add()
    entry.key, entry.value = KEY, text
    assert replaced_gather(node) is None


def test_two_records_on_one_node_are_ignored():
    _, rewritten = rewritten_gathers()
    node = next(n for n in rewritten.graph.node if n.op_type == "GatherMultiaxis")
    assert replaced_gather(node) is not None
    node.metadata_props.append(next(e for e in node.metadata_props if e.key == KEY))
    assert replaced_gather(node) is None


# -- float16: the Cast back never narrows in float32 ----------------------------------------------------

HALF_NANS = np.array([0x7E01, 0xFE03, 0x7E55, 0x3C00], np.uint16).view(np.float16)


def test_float16_nan_payloads_survive_the_forms_chosen_from_semantics():
    """Without a record, the form is chosen from the node's semantics; the rewrite's Squeeze and Cast back go
    after the narrow gathered values, so no float32 Cast quiets a payload."""
    model = make_model([helper.make_node("GatherND", ["x", "i"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4]),
                        helper.make_tensor_value_info("i", TensorProto.INT64, [3, 2])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)])
    rewritten, _ = rewrite_model(model)
    for node in rewritten.graph.node:
        del node.metadata_props[:]
    lowered, report = lower_model(rewritten)
    assert report.outcomes[0].source == "semantics"
    assert not any(n.op_type == "Cast" for n in lowered.graph.node)
    feeds = {"x": np.stack([HALF_NANS, HALF_NANS[::-1]]), "i": np.array([[0, 0], [1, 1], [0, 2]])}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for runner in (ort.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"]),
                   gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"]),
                   gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"],
                                                    run_builtin_gathers=False)):
        assert_bit_identical(runner.run(None, feeds)[0], want)



def test_axes_out_of_range_raise_in_the_run_time_general_form_under_orts_defaults():
    """Axes computed at run time by a Range (the rewrite's run-time GatherND alignment writes one) are checked
    against the input's rank by GatherElements: a Gather of them would be a Slice under ORT's default options,
    which clamps an out-of-range axis where the op raises."""
    nodes = [constant("zero", 0), constant("one", 1), helper.make_node("Shape", ["i"], ["i_shape"]),
             helper.make_node("Gather", ["i_shape", "zero"], ["count"], axis=0),  # 2 axes for 2 indices: a run-time Range
             helper.make_node("Range", ["zero", "count", "one"], ["axes"]),
             helper.make_node("GatherMultiaxis", ["x", "i", "axes"], ["y"], domain="ai.onnx.contrib", mode="error")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, ["m"])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], extra_opsets=[CONTRIB])
    lowered, report = lower_model(model)
    assert [(o.lowered, o.form) for o in report.outcomes] == [(True, "general")]
    feeds = {"x": np.arange(4, dtype=np.float32), "i": np.array([0, 2])}
    with pytest.raises(Exception, match="out of range|out of data bounds|indices element"):
        gathermultiaxis.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    plain = ort.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="Out of range value in index tensor"):  # GatherElements' own error
        plain.run(None, feeds)
