"""The rewriter, differentially against ORT's builtin Gather, GatherElements and GatherND."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import IR_VERSION, make_model
from sessions import assert_rewrite_matches, builtin_session

from gathermultiaxis.conformance.fuzz import with_float_boundary
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.harness import single_gather_model

T = TensorProto


def single_node_model(op_type, opset, data_shape, indices_shape, elem_type=T.FLOAT, index_type=T.INT64,
                      **attributes):
    return single_gather_model(op_type, elem_type, index_type, data_shape, indices_shape, opset=opset,
                               name=f"the_{op_type}", **attributes)


def feeds(data, indices):
    return {"data": data, "indices": indices}


RNG = np.random.default_rng(7)
DATA = RNG.standard_normal((4, 5, 6)).astype(np.float32)

# (op, opsets, attributes, data, indices): each runs for every listed opset, with static, symbolic
# and rank-only input shapes.
CASES = {
    "gather-axis0": ("Gather", (7, 11, 13), {"axis": 0}, DATA, RNG.integers(0, 4, (3, 2))),
    "gather-negative-axis": ("Gather", (7, 11, 13), {"axis": -1}, DATA, RNG.integers(0, 6, (2,))),
    "gather-scalar-index": ("Gather", (7, 11, 13), {"axis": 1}, DATA, np.array(3)),       # x[:, 3]
    "gather-negative-indices": ("Gather", (11, 13), {"axis": 1}, DATA, np.array([[-1, -5], [0, 4]])),
    "gather-int32": ("Gather", (13,), {"axis": 2}, DATA, RNG.integers(-6, 6, (2, 1, 3)).astype(np.int32)),
    "gather-elements": ("GatherElements", (11, 13), {"axis": 1}, DATA, RNG.integers(-5, 5, (4, 5, 6))),
    "gather-elements-neg-axis": ("GatherElements", (11, 13), {"axis": -3}, DATA,
                                 RNG.integers(0, 4, (2, 5, 6)).astype(np.int32)),
    "gather-elements-smaller": ("GatherElements", (11, 13), {"axis": 2}, DATA, RNG.integers(0, 6, (2, 3, 9))),
    "gather-nd-pairs": ("GatherND", (11, 12, 13), {}, DATA, RNG.integers(-4, 4, (3, 2))),
    "gather-nd-triples": ("GatherND", (11, 12, 13), {}, DATA, np.array([[[0, 1, 2]], [[3, 4, 5]]])),
    "gather-nd-blocks": ("GatherND", (11, 12, 13), {}, DATA, RNG.integers(0, 4, (2, 2, 1))),
    "gather-nd-batch1": ("GatherND", (12, 13), {"batch_dims": 1}, DATA, RNG.integers(0, 5, (4, 3, 1))),
    "gather-nd-batch2": ("GatherND", (12, 13), {"batch_dims": 2}, DATA, RNG.integers(0, 6, (4, 5, 2, 1))),
    "gather-nd-batch1-pairs-no-trailing": ("GatherND", (12, 13), {"batch_dims": 1}, DATA,
                                           RNG.integers(0, 5, (4, 2, 3, 2))),
}


def declared(shape, how):
    if how == "unknown-rank":
        return None
    if how == "static":
        return list(shape)
    if how == "symbolic":
        return [f"d{i}" for i in range(len(shape))]
    return [None] * len(shape)


@pytest.mark.parametrize("how", ["static", "symbolic", "rank-only", "unknown-rank"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_single_node_matches_builtin(name, how):
    """Unknown ranks (and GatherND's symbolic coordinate size) take the run-time alignment, at every opset
    (below 13 by Reshape to computed shapes)."""
    op_type, opsets, attributes, data, indices = CASES[name]
    for opset in opsets:
        index_type = helper.np_dtype_to_tensor_dtype(indices.dtype)
        model = single_node_model(op_type, opset, declared(data.shape, how), declared(indices.shape, how),
                                  index_type=index_type, **attributes)
        runtime_needed = how == "unknown-rank" or (op_type == "GatherND" and how != "static")
        report = assert_rewrite_matches(model, feeds(data, indices))
        assert (report.rewritten, report.left, report.runtime_aligned) == (1, 0, runtime_needed), report.table()


def test_gather_nd_unknown_tuple_size_before_opset_13_is_aligned_at_run_time():
    """Before issue 17 it was left ("needs opset 13")."""
    model = single_node_model("GatherND", 12, [4, 5, 6], ["n", "k"])
    report = assert_rewrite_matches(model, feeds(RNG.standard_normal((4, 5, 6)).astype(np.float32),
                                                 np.array([[3, -1], [0, 4]])))
    assert report.runtime_aligned == 1 and "coordinate size" in report.outcomes[0].reason


def test_helper_nodes_take_the_form_of_the_opset():
    for opset, axes_as_input in [(11, False), (13, True)]:
        model = single_node_model("Gather", opset, [4, 5, 6], [], axis=1)
        rewritten, _ = rewrite_model(model)
        squeeze = next(n for n in rewritten.graph.node if n.op_type == "Squeeze")
        assert (len(squeeze.input) == 2) is axes_as_input
        assert any(a.name == "axes" for a in squeeze.attribute) is not axes_as_input


ELEMENT_TYPES = [T.FLOAT, T.DOUBLE, T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT16, T.UINT32, T.UINT64,
                 T.BOOL, T.STRING, T.FLOAT16, T.BFLOAT16]


def typed_data(elem_type, shape):
    values = RNG.standard_normal(shape) * 50
    if elem_type == T.STRING:
        return values.astype(int).astype(str).astype(object)
    if elem_type == T.BOOL:
        return values > 0
    if elem_type == T.BFLOAT16:
        tensor = helper.make_tensor("x", T.BFLOAT16, shape, values.astype(np.float32).reshape(-1).tolist())
        return numpy_helper.to_array(tensor)
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    out = values.astype(dtype)
    if dtype.kind == "f":
        out.reshape(-1)[::5] = np.nan
    return out


@pytest.mark.parametrize("elem_type", ELEMENT_TYPES, ids=[T.DataType.Name(t) for t in ELEMENT_TYPES])
@pytest.mark.parametrize("op_type", ["Gather", "GatherElements", "GatherND"])
def test_every_data_type(op_type, elem_type):
    data = typed_data(elem_type, (3, 4))
    # Gather along the last axis: ORT's builtin Gather of strings is wrong when blocks are longer than 1
    attributes, indices = {
        "Gather": ({"axis": 1}, np.array([[3, -1], [0, 2]])),
        "GatherElements": ({"axis": 0}, np.array([[2, 0, 1, -1]])),
        "GatherND": ({}, np.array([[2, 3], [0, 0], [1, -2]])),
    }[op_type]
    model = single_node_model(op_type, 13, [3, 4], list(indices.shape), elem_type=elem_type, **attributes)
    if elem_type == T.BFLOAT16:  # ORT's Python API cannot feed or fetch bfloat16: convert inside the model
        model = with_float_boundary(model, "data", "output")
        data = data.astype(np.float32)
    report = assert_rewrite_matches(model, feeds(data, indices))
    assert report.rewritten == 1
    if elem_type in (T.FLOAT16, T.BFLOAT16):
        rewritten, _ = rewrite_model(model)
        added_casts = [n.op_type for n in rewritten.graph.node].count("Cast") - \
            [n.op_type for n in model.graph.node].count("Cast")
        assert added_casts == 2


def test_builtin_string_gather_bug_is_real():
    """ORT 1.31's builtin Gather copies only the first string of each block (the rewrite is right)."""
    data = np.array([["a", "b"], ["c", "d"]], dtype=object)
    model = single_node_model("Gather", 13, [2, 2], [1], elem_type=T.STRING, axis=0)
    builtin = builtin_session(model).run(None, feeds(data, np.array([1])))[0]
    assert builtin.tolist() == [["c", ""]]  # when this fails, ORT fixed it: drop the workaround in the tests


@pytest.mark.parametrize("elem_type", [T.FLOAT8E4M3FN, T.INT4, T.COMPLEX64])
def test_types_the_bridge_cannot_carry_are_left_and_reported(elem_type):
    model = single_node_model("Gather", 21, [3, 4], [2], elem_type=elem_type, axis=0)
    rewritten, report = rewrite_model(model)
    assert report.rewritten == 0 and report.left == 1
    assert "cannot cross the PyOp bridge" in report.outcomes[0].reason
    assert rewritten.graph == model.graph


def test_gathers_of_other_domains_are_not_touched():
    node = helper.make_node("GatherND", ["data", "indices"], ["output"], domain="com.microsoft", name="ms")
    model = make_model([node], [helper.make_tensor_value_info("data", T.FLOAT, [3, 4]),
                                helper.make_tensor_value_info("indices", T.INT64, [2, 1])],
                       [helper.make_tensor_value_info("output", T.FLOAT, None)],
                       extra_opsets=[helper.make_opsetid("com.microsoft", 1)])
    rewritten, report = rewrite_model(model)
    assert rewritten == model
    (row,) = report.outcomes  # a row of the report all the same (issue 17)
    assert (row.op_type, row.rewritten) == ("com.microsoft.GatherND", False)
    assert row.reason.startswith("inside com.microsoft.GatherND: not rewritten, ")


def test_unknown_rank_before_opset_13_is_aligned_by_reshape_and_reported():
    """Before issue 17 it was left ("a run-time alignment needs opset 13")."""
    node = helper.make_node("Gather", ["data", "indices"], ["output"], name="blind", axis=0)
    model = make_model([node], [helper.make_tensor_value_info("data", T.FLOAT, None),
                                helper.make_tensor_value_info("indices", T.INT64, [2])],
                       [helper.make_tensor_value_info("output", T.FLOAT, None)], opset=12)
    report = assert_rewrite_matches(model, {"data": RNG.standard_normal((3, 2)).astype(np.float32),
                                            "indices": np.array([2, -3])})
    assert (report.left, report.runtime_aligned) == (0, 1)
    assert "rank of 'data' is not known" in report.outcomes[0].reason
    assert "'data' is an input of test declared without a shape" in report.outcomes[0].reason


def test_gather_elements_rank_of_one_input_tells_the_other():
    node = helper.make_node("GatherElements", ["data", "indices"], ["output"], axis=1)
    model = make_model([node], [helper.make_tensor_value_info("data", T.FLOAT, [3, 4]),
                                helper.make_tensor_value_info("indices", T.INT64, None)],
                       [helper.make_tensor_value_info("output", T.FLOAT, None)])
    report = assert_rewrite_matches(model, feeds(DATA[0, :3, :4], np.array([[3, 0], [1, 1], [-1, 2]])))
    assert (report.rewritten, report.left) == (1, 0)


def test_shape_computation_gathers():
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Gather", ["shape", "last_two"], ["tail"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "axis0"], ["batch_1d"]),
             helper.make_node("Mul", ["tail", "tail"], ["tail_squared"]),
             helper.make_node("ReduceProd", ["tail_squared"], ["flat"], keepdims=1),
             helper.make_node("Concat", ["batch_1d", "minus_one"], ["new_shape"], axis=0),
             helper.make_node("Reshape", ["x", "new_shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([1, 2], np.int64), "last_two"),
             numpy_helper.from_array(np.array([0], np.int64), "axis0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, ["N", "H", "W"])],
                       [helper.make_tensor_value_info("y", T.FLOAT, None),
                        helper.make_tensor_value_info("flat", T.INT64, None)], inits)
    report = assert_rewrite_matches(model, {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)})
    assert report.rewritten == 2


def test_if_loop_and_scan_bodies():
    table = numpy_helper.from_array(RNG.standard_normal((10, 3)).astype(np.float32), "table")
    then_graph = helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["then_out"], name="in_then")],
                                   "then", [], [helper.make_tensor_value_info("then_out", T.FLOAT, None)])
    else_graph = helper.make_graph(
        [helper.make_node("GatherElements", ["table", "ids_2d"], ["else_out"], name="in_else", axis=0)],
        "else", [], [helper.make_tensor_value_info("else_out", T.FLOAT, None)])
    loop_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("GatherND", ["table", "pair"], ["picked"], name="in_loop"),
         helper.make_node("Add", ["carried", "picked"], ["carried_out"])],
        "loop", [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
                 helper.make_tensor_value_info("carried", T.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("carried_out", T.FLOAT, [1])])
    scan_body = helper.make_graph(
        [helper.make_node("Gather", ["row", "col"], ["element"], name="in_scan", axis=0),
         helper.make_node("Add", ["acc", "element"], ["acc_out"])],
        "scan", [helper.make_tensor_value_info("acc", T.FLOAT, []), helper.make_tensor_value_info("row", T.FLOAT, [3])],
        [helper.make_tensor_value_info("acc_out", T.FLOAT, [])])
    nodes = [
        helper.make_node("If", ["flag"], ["branch"], name="if", then_branch=then_graph, else_branch=else_graph),
        helper.make_node("Loop", ["trips", "", "start"], ["looped"], name="loop", body=loop_body),
        helper.make_node("Scan", ["zero_f", "table"], ["scanned"], name="scan", body=scan_body, num_scan_inputs=1),
    ]
    inits = [table, numpy_helper.from_array(np.array([[4, 2]], np.int64), "pair"),
             numpy_helper.from_array(np.array(2, np.int64), "col"), numpy_helper.from_array(np.array(3, np.int64), "trips"),
             numpy_helper.from_array(np.zeros(1, np.float32), "start"),
             numpy_helper.from_array(np.array(0, np.float32), "zero_f")]
    model = make_model(nodes, [helper.make_tensor_value_info("flag", T.BOOL, []),
                               helper.make_tensor_value_info("ids", T.INT64, ["n"]),
                               helper.make_tensor_value_info("ids_2d", T.INT64, ["n", 3])],
                       [helper.make_tensor_value_info(n, T.FLOAT, None) for n in ("branch", "looped", "scanned")], inits)
    for flag in (True, False):
        report = assert_rewrite_matches(model, {"flag": np.array(flag), "ids": np.array([9, -1, 0]),
                                                "ids_2d": RNG.integers(0, 10, (2, 3))})
        assert (report.rewritten, report.left) == (4, 0), report.table()


def test_model_local_function_is_inlined_and_rewritten():
    function = helper.make_function(
        "local", "PickRows", ["table", "ids"], ["rows"],
        [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0)], [helper.make_opsetid("", 17)])
    node = helper.make_node("PickRows", ["data", "indices"], ["output"], domain="local", name="call")
    model = make_model([node], [helper.make_tensor_value_info("data", T.FLOAT, ["a", "b"]),
                                helper.make_tensor_value_info("indices", T.INT64, ["c"])],
                       [helper.make_tensor_value_info("output", T.FLOAT, None)],
                       extra_opsets=[helper.make_opsetid("local", 1)])
    model.functions.append(function)
    report = assert_rewrite_matches(model, feeds(DATA[0], np.array([3, 0, -2])))
    assert (report.rewritten, report.left) == (1, 0)


def test_nothing_is_lost_and_rewrite_is_idempotent():
    from gathermultiaxis.examples import build_example_model

    model = build_example_model()
    model.ir_version = 8
    model.doc_string = "model doc"
    model.graph.value_info.append(helper.make_tensor_value_info("embedded", T.FLOAT, ["batch", "sequence", 8]))
    rewritten, report = rewrite_model(model)
    assert report.rewritten == 8 and report.left == 0
    onnx.checker.check_model(rewritten, full_check=True)
    assert rewritten.ir_version == 8  # not onnx's default, which ORT refuses
    assert [(o.domain, o.version) for o in rewritten.opset_import] == [("", 17), ("ai.onnx.contrib", 1)]
    for field in ("input", "output", "initializer"):
        assert list(getattr(rewritten.graph, field)) == list(getattr(model.graph, field)), field
    kept_infos = list(rewritten.graph.value_info)[:len(model.graph.value_info)]
    assert kept_infos == list(model.graph.value_info)
    added_infos = list(rewritten.graph.value_info)[len(model.graph.value_info):]
    graph_outputs = {o.name for o in model.graph.output}
    replaced = {n.output[0] for n in model.graph.node if n.op_type.startswith("Gather")} - graph_outputs - {"embedded"}
    assert {v.name for v in added_infos} == replaced and all(v.type.tensor_type.elem_type for v in added_infos)
    assert (rewritten.doc_string, rewritten.graph.doc_string) == (model.doc_string, model.graph.doc_string)
    # the model's own metadata kept, then the entry naming what made the file and what runs it
    assert list(rewritten.metadata_props)[:-1] == list(model.metadata_props)
    assert rewritten.metadata_props[-1].key == "gathermultiaxis"
    assert rewritten.producer_name == model.producer_name
    original_names = {n.name for n in model.graph.node}
    kept = {n.name for n in rewritten.graph.node}
    assert {"embedding", "reorder", "pick_rows", "second_token", "batch_size", "flatten"} <= kept
    added = [n.name for n in rewritten.graph.node if n.name not in original_names]
    assert added and all(name.split("/")[0] in original_names for name in added), added
    twice, second_report = rewrite_model(rewritten)
    assert second_report.outcomes == []
    assert twice.SerializeToString() == rewritten.SerializeToString()


def test_a_rewritten_model_says_what_made_it_and_what_runs_it(tmp_path):
    """A model-level metadata entry names the package, its version and how to run or lower the file (once,
    however often it is rewritten); the producer stays the exporter's; a model nothing was rewritten in is
    not changed; a lowering that leaves no GatherMultiaxis node drops the entry, one that leaves one keeps it."""
    import gathermultiaxis
    from gathermultiaxis.examples import build_example_model
    from gathermultiaxis.graphs import lower_model

    model = build_example_model()
    model.producer_name, model.producer_version = "pytorch", "2.13.0"
    partly, _ = rewrite_model(model, ["GatherND"])
    rewritten, _ = rewrite_model(partly)  # the rest: the entry is updated, not added twice
    notes = [entry.value for entry in rewritten.metadata_props if entry.key == "gathermultiaxis"]
    assert notes == [f"rewritten by gathermultiaxis {gathermultiaxis.__version__}: run with "
                     "gathermultiaxis.InferenceSession, or `gathermultiaxis lower` it for plain ONNX runtimes"]
    assert (rewritten.producer_name, rewritten.producer_version) == ("pytorch", "2.13.0")
    plain = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                                [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                                                [helper.make_tensor_value_info("y", T.FLOAT, [2])]))
    unchanged, report = rewrite_model(plain)
    assert report.rewritten == 0 and unchanged == plain
    lowered, lowering = lower_model(rewritten)
    assert lowering.left == 0 and list(lowered.metadata_props) == list(model.metadata_props)
    session = gathermultiaxis.InferenceSession(rewritten)  # the session lowers its copy to builtin gathers
    assert session.builtin_gathers > 0 and session.get_modelmeta().custom_metadata_map["gathermultiaxis"] == notes[0]
    assert [e.key for e in rewritten.metadata_props][-1] == "gathermultiaxis"  # the input is not changed
    node = next(n for n in rewritten.graph.node if n.op_type == "GatherMultiaxis")
    next(a for a in node.attribute if a.name == "mode").s = b"nonsense"  # a node the lowering must leave
    kept, lowering = lower_model(rewritten)
    assert lowering.left >= 1 and [e.key for e in kept.metadata_props][-1] == "gathermultiaxis"


def test_ops_selection():
    from gathermultiaxis.examples import build_example_model

    rewritten, report = rewrite_model(build_example_model(), ["GatherND", "GatherElements"])
    assert report.counts() == {"GatherElements": {"rewritten": 1, "left": 0}, "GatherND": {"rewritten": 1, "left": 0}}
    assert sum(n.op_type == "Gather" for n in rewritten.graph.node) == 4  # and 2 in the If branches
    with pytest.raises(ValueError, match="cannot rewrite"):
        rewrite_model(build_example_model(), ["Gather", "Scatter"])


def test_ir_version_of_a_helper_made_model_is_kept():
    model = single_node_model("Gather", 13, [3], [2], axis=0)
    model.ir_version = IR_VERSION
    assert rewrite_model(model)[0].ir_version == IR_VERSION


def test_replaced_outputs_are_declared_with_orts_own_types():
    """Each replaced main-graph output gets the type ORT's load-time inference gives it in the original: a scalar
    keeps an empty shape, a value of unknown rank no shape, a symbolic dim ORT does not know stays unknown."""
    nodes = [helper.make_node("Gather", ["v", "k"], ["scalar"], axis=0),
             helper.make_node("Gather", ["u", "k"], ["unranked"], axis=0),
             helper.make_node("Gather", ["x", "i"], ["rows"], axis=1),
             helper.make_node("Neg", ["scalar"], ["a"]), helper.make_node("Neg", ["unranked"], ["b"]),
             helper.make_node("Neg", ["rows"], ["c"])]
    model = make_model(nodes, [helper.make_tensor_value_info("v", TensorProto.FLOAT, [5]),
                               helper.make_tensor_value_info("k", TensorProto.INT64, []),
                               helper.make_tensor_value_info("u", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, [None, 2])],
                       [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in "abc"])
    rewritten, report = rewrite_model(model)
    assert report.value_types == "ONNX Runtime's load-time types"
    declared = {value.name: value.type.tensor_type for value in rewritten.graph.value_info}
    assert declared["scalar"].HasField("shape") and not declared["scalar"].shape.dim
    assert not declared["unranked"].HasField("shape")
    dims = [(d.WhichOneof("value"), d.dim_value or d.dim_param) for d in declared["rows"].shape.dim]
    assert dims == [("dim_param", "B"), (None, ""), ("dim_value", 2)]
    assert all(t.elem_type == TensorProto.FLOAT for t in declared.values())


def test_where_ort_cannot_load_the_model_the_rewrites_own_types_are_declared():
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], axis=0),
             helper.make_node("Unknown", ["y"], ["z"], domain="no.such.domain")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                       [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                       extra_opsets=[helper.make_opsetid("no.such.domain", 1)])
    rewritten, report = rewrite_model(model)
    assert report.rewritten == 1
    assert report.value_types.startswith("the rewrite's inference (ONNX Runtime cannot load the model"), report.value_types
    (value,) = [v for v in rewritten.graph.value_info if v.name == "y"]
    assert [d.dim_value for d in value.type.tensor_type.shape.dim] == [2, 3]
