"""graphs.lower.session_lowering: the session's record-first lowering gives the full analysis' model and report,
without the whole-model inference where every node is decided so, and falls back where one is not."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import make_model

from gathermultiaxis.graphs import lower_model, rewrite_model
from gathermultiaxis.graphs.lower import session_lowering
from gathermultiaxis.graphs.lower.session_lowering import (NeedsAnalysis, derive_ranks, fact_infos,
                                                           lower_single_gathers, main_graph_scope, undecided)
from gathermultiaxis.graphs.passes import driver
from gathermultiaxis.graphs.provenance import KEY
from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.ranks.typing_copy import STRIP_ABOVE_BYTES

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def embedding_model(ids_shape=("B", 3), computed_ids=True, shape_known=True):
    """A table Gather (its indices computed from an input, or the input) and a GatherElements on inputs."""
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    nodes = [helper.make_node("Gather", ["table", "ids_abs" if computed_ids else "ids"], ["rows"], axis=0,
                              name="gather"),
             helper.make_node("GatherElements", ["x", "order"], ["taken"], axis=1, name="elements")]
    if computed_ids:
        nodes.insert(0, helper.make_node("Abs", ["ids"], ["ids_abs"], name="abs"))
    shape = (lambda dims: dims) if shape_known else (lambda dims: None)
    inputs = [helper.make_tensor_value_info("ids", INT64, shape(list(ids_shape))),
              helper.make_tensor_value_info("x", FLOAT, shape([3, 5])),
              helper.make_tensor_value_info("order", INT64, shape([3, 2]))]
    outputs = [helper.make_tensor_value_info("rows", FLOAT, None), helper.make_tensor_value_info("taken", FLOAT, None)]
    rewritten, _ = rewrite_model(make_model(nodes, inputs, outputs, [table], opset=17))
    return rewritten


def full_analysis(model):
    return lower_model(model, single_gather_only=True)


def same_result(quick, full):
    assert quick[0].SerializeToString(deterministic=True) == full[0].SerializeToString(deterministic=True)
    assert [vars(o) for o in quick[1].outcomes] == [vars(o) for o in full[1].outcomes]


@pytest.mark.parametrize("shape_known", [True, False])
def test_recorded_nodes_are_lowered_without_the_inference(monkeypatch, shape_known):
    model = embedding_model(shape_known=shape_known)
    full = full_analysis(model)
    assert [o.source for o in full[1].outcomes] == ["rewrite record"] * 2

    def no_inference(light):
        raise AssertionError("the record-first lowering ran the whole-model inference")

    monkeypatch.setattr(driver, "inferred", no_inference)
    same_result(lower_single_gathers(model), full)


def test_a_record_the_local_ranks_do_not_prove_goes_to_the_analysis(monkeypatch):
    """A static alignment whose indices' rank only ONNX's inference gives (no rank rule for the op)."""
    model = embedding_model()
    abs_node = next(node for node in model.graph.node if node.op_type == "Abs")
    abs_node.op_type, abs_node.domain = "Celu", ""  # (a float op: ranks by inference only; the graph stays valid to read)
    scope, facts = main_graph_scope(model, None)
    assert "rank" in undecided(model, scope, facts) or "element type" in undecided(model, scope, facts)
    calls = []
    monkeypatch.setattr(driver, "inferred", lambda light, real=driver.inferred: calls.append(1) or real(light))
    same_result(lower_single_gathers(model), full_analysis(model))
    assert calls  # the analysis ran


def test_a_copied_record_is_refused_as_the_analysis_refuses_it():
    model = embedding_model()
    gathers = [node for node in model.graph.node if node.op_type == "GatherMultiaxis"]
    record = next(entry.value for entry in gathers[0].metadata_props if entry.key == KEY)
    for entry in gathers[1].metadata_props:
        if entry.key == KEY:
            entry.value = record  # a stale record: the Gather's, on the GatherElements node
    quick, full = lower_single_gathers(model), full_analysis(model)
    same_result(quick, full)
    assert quick[1].outcomes[1].source != "rewrite record"


def test_a_gather_in_a_loop_body_goes_to_the_analysis():
    body = helper.make_graph(
        [helper.make_node("Gather", ["table", "i"], ["row"], axis=0, name="inner"),
         helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("row", FLOAT, None)])
    table = numpy_helper.from_array(np.ones((4, 2), np.float32), "table")
    loop = helper.make_node("Loop", ["n", ""], ["rows"], body=body)
    model, _ = rewrite_model(make_model([loop], [helper.make_tensor_value_info("n", INT64, [])],
                                        [helper.make_tensor_value_info("rows", FLOAT, None)], [table], opset=17))
    scope, facts = main_graph_scope(model, None)
    assert "subgraph" in undecided(model, scope, facts)
    same_result(lower_single_gathers(model), full_analysis(model))


def test_fact_infos_give_what_the_typing_copy_enforces():
    big = numpy_helper.from_array(np.zeros(STRIP_ABOVE_BYTES // 8 + 1, np.int64), "big")
    small = numpy_helper.from_array(np.zeros((2, 3), np.float32), "small")
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", FLOAT, [5, 4])], [big, small])
    infos, facts = fact_infos(graph, {}, True)
    assert facts == {"big": TensorInfo(INT64, (None,)), "small": TensorInfo(FLOAT, (2, 3)),
                     "x": TensorInfo(FLOAT, ("N", 4))}
    assert infos["y"] == TensorInfo(FLOAT, None)  # a declared output: its element type, never its shape
    body_infos, _ = fact_infos(helper.make_graph([], "body", [helper.make_tensor_value_info("x", INT64, [])], []),
                               infos, False)
    assert body_infos["x"] == TensorInfo(INT64, None)  # a body input hides the outer name


def test_derive_ranks_runs_the_rank_rules_back_to_the_facts_only():
    nodes = [helper.make_node("Unsqueeze", ["x", "axes"], ["u"]), helper.make_node("Neg", ["u"], ["v"]),
             helper.make_node("Relu", ["x"], ["unrelated"])]
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    model = make_model(nodes, [helper.make_tensor_value_info("x", FLOAT, [3])],
                       [helper.make_tensor_value_info("v", FLOAT, None),
                        helper.make_tensor_value_info("unrelated", FLOAT, None)], [axes], opset=17)
    scope, _ = main_graph_scope(model, None)
    derive_ranks(["v"], scope)
    assert scope.infos["v"].rank == 2 and scope.infos["v"].elem_type == FLOAT
    assert scope.infos["unrelated"].rank is None  # (its declared element type only: not derived)


def test_the_record_first_pass_stops_at_a_node_it_cannot_decide():
    model = embedding_model()
    for value in model.graph.input:  # the ranks are no longer facts
        value.type.tensor_type.ClearField("shape")
    quick = session_lowering.RecordFirstPass(single_gather_only=True)
    with pytest.raises(NeedsAnalysis):
        quick(model)
    same_result(lower_single_gathers(model), full_analysis(model))


def test_the_model_is_not_changed():
    model = embedding_model()
    before = model.SerializeToString(deterministic=True)
    lower_single_gathers(model)
    assert model.SerializeToString(deterministic=True) == before
