"""graphs.rewrite.rewrite_pass: rewrite_model turns the asked-for gathers into GatherMultiaxis nodes whose
outputs equal the original's, and leaves the rest."""

import importlib.util

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from gathermultiaxis.graphs.provenance import MODEL_KEY
from gathermultiaxis.graphs.passes import NodePass
from gathermultiaxis.graphs.rewrite.rewrite_pass import RewriteDetail, RewritePass, rewrite_model
from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE


def two_gathers():
    nodes = [helper.make_node("Gather", ["data", "ids"], ["rows"], axis=0, name="g"),
             helper.make_node("GatherElements", ["rows", "pick"], ["out"], axis=1, name="ge")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [5, 4]),
                                           helper.make_tensor_value_info("ids", TensorProto.INT64, [3]),
                                           helper.make_tensor_value_info("pick", TensorProto.INT64, [3, 2])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_rewritten_model_computes_what_the_original_does():
    if importlib.util.find_spec("onnxruntime_extensions") is None:  # found, not imported (that is slow)
        pytest.skip("the rewritten model runs through onnxruntime-extensions, not installed")
    from gathermultiaxis.harness import make_session

    model = two_gathers()
    rewritten, report = rewrite_model(model)
    assert report.rewritten == 2
    assert [n.op_type for n in rewritten.graph.node if n.domain == DOMAIN].count(OP_TYPE) == 2
    assert not [n for n in rewritten.graph.node if n.op_type in ("Gather", "GatherElements")]
    assert any(o.domain == DOMAIN for o in rewritten.opset_import)
    assert MODEL_KEY in [e.key for e in rewritten.metadata_props]
    rng = np.random.default_rng(0)
    feeds = {"data": rng.standard_normal((5, 4)).astype(np.float32), "ids": np.array([4, 0, -1], np.int64),
             "pick": np.array([[0, 3], [1, 1], [-4, 2]], np.int64)}
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    got = make_session(rewritten, custom=True).run(None, feeds)[0]
    np.testing.assert_array_equal(got, expected)


def test_only_the_asked_for_ops_are_rewritten():
    model = two_gathers()
    before = model.SerializeToString()
    rewritten, report = rewrite_model(model, ops=("GatherElements",), ort_value_types=False)
    assert report.rewritten == 1
    assert [n.op_type for n in rewritten.graph.node if n.op_type in ("Gather", "GatherElements")] == ["Gather"]
    assert model.SerializeToString() == before  # the input model is not changed


def test_a_model_with_nothing_rewritten_stays_as_it_was():
    model = two_gathers()
    rewritten, report = rewrite_model(model, ops=(), ort_value_types=False)
    assert report.rewritten == 0
    assert rewritten.SerializeToString() == model.SerializeToString()


def test_unknown_op_types_are_refused():
    with pytest.raises(ValueError, match="cannot rewrite"):
        rewrite_model(two_gathers(), ops=("Slice",))
    assert RewritePass(("Gather",)).report.rewritten == 0


def test_the_rewrite_pass_is_a_node_pass_whose_detail_says_run_time_alignment():
    model = two_gathers()
    del model.graph.input[0].type.tensor_type.shape.dim[:]  # data's rank unknown: Gather aligned at run time
    model.graph.input[0].type.tensor_type.ClearField("shape")
    rewrite = RewritePass(("Gather", "GatherElements"))
    result = rewrite(model)
    assert isinstance(rewrite, NodePass) and result.modified and result.report is rewrite.report
    rows = {row.node: row for row in rewrite.report.outcomes}
    assert rows["g"].rewritten and rows["g"].runtime_aligned and "rank" in rows["g"].reason
    assert rows["ge"].rewritten and not rows["ge"].runtime_aligned and rows["ge"].reason == ""
    row = rewrite.outcome(model.graph.node[0], "main graph", RewriteDetail("why", runtime_aligned=True), "")
    assert (row.rewritten, row.reason, row.runtime_aligned) == (True, "why", True)
    assert rewrite.outcome(model.graph.node[0], "main graph", None, "left").reason == "left"


def test_types_read_already_are_the_ones_it_would_read():
    pytest.importorskip("onnxruntime", reason="ORT's types are read by onnxruntime")
    from gathermultiaxis.graphs.ort_types import ort_value_types, plain_session_options
    from gathermultiaxis.graphs.rewrite.rewrite_pass import ORT_TYPES, ort_type_names

    model = two_gathers()
    assert ort_type_names(model) == ["rows"]  # "out" is declared by the graph
    assert ort_type_names(model, ("GatherElements",)) == []
    read = ort_value_types(model, ort_type_names(model), session_options=plain_session_options)
    given, given_report = rewrite_model(model, ort_types_read=read)
    asked, asked_report = rewrite_model(model)
    assert given.SerializeToString() == asked.SerializeToString()
    assert given_report.value_types == asked_report.value_types == ORT_TYPES
    with pytest.raises(ValueError, match="ort_optimize"):
        rewrite_model(model, ort_optimize=True, ort_types_read=read)
