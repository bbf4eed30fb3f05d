"""Run-time-aligned nodes as their recorded gather (ops.runtime.bind.recorded_nodes): one GatherMultiaxisRecorded
node where the record holds, bit-identical to ORT's builtin gathers and to today's Run path, the same errors;
a record the graph no longer bears out keeps the Run path."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import assert_bit_identical, make_model

import gathermultiaxis
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.graphs.provenance import KEY
from gathermultiaxis.ops.runtime.bind import BindOptions
from gathermultiaxis.ops.runtime.bind.recorded_nodes import remove_recorded_alignments
from gathermultiaxis.ops.runtime.run_ops import RECORDED_OP_TYPE, RUN_OP_TYPE
from gathermultiaxis.ops.runtime.session import prepare_model

CPU = ["CPUExecutionProvider"]
TODAY = BindOptions(recorded_form=False)


def unranked(name, elem_type):
    return helper.make_tensor_value_info(name, elem_type, None)


def unranked_gather(op_type, elem_type=TensorProto.FLOAT, index_type=TensorProto.INT64, **attributes):
    """One gather whose inputs have no known rank: the rewrite aligns it at run time."""
    node = helper.make_node(op_type, ["data", "indices"], ["y"], **attributes)
    return make_model([node], [unranked("data", elem_type), unranked("indices", index_type)],
                      [unranked("y", elem_type)])


def prepared_types(rewritten, builtin_gathers=False, options=BindOptions()):
    """Every node's op type in the session's in-memory model (subgraphs included)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(rewritten)
    model = prepare_model(copy, None, builtin_gathers=builtin_gathers, options=options).model
    types = []
    for holder in gathermultiaxis.graphs.ir.walk.node_holders(model):
        types += [node.op_type for node in holder.node]
    return types


def kernel_session(rewritten, options=BindOptions()):
    return gathermultiaxis.InferenceSession(rewritten, providers=CPU, run_builtin_gathers=False,
                                            bind_options=options)


def check_three_ways(original, feeds_list):
    """The recorded session, today's Run path and ORT's builtin give the same bits on every feed."""
    rewritten, _ = rewrite_model(original)
    types = prepared_types(rewritten)
    assert RECORDED_OP_TYPE in types and RUN_OP_TYPE not in types, types
    recorded, today = kernel_session(rewritten), kernel_session(rewritten, TODAY)
    builtin = ort.InferenceSession(original.SerializeToString(), providers=CPU)
    for feeds in feeds_list:
        want = builtin.run(None, feeds)
        for got, old, expected in zip(recorded.run(None, feeds), today.run(None, feeds), want):
            assert_bit_identical(got, expected)
            assert_bit_identical(old, expected)
    return rewritten


def arange(*shape, dtype=np.float32):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("index_type", [TensorProto.INT64, TensorProto.INT32])
def test_gather_at_every_rank(axis, index_type):
    """One session, data and indices of several ranks (the op plans each rank pair once), negative indices."""
    index_dtype = helper.tensor_dtype_to_np_dtype(index_type)
    feeds = []
    for data_shape in [(5,), (4, 3), (2, 3, 4)]:
        if axis == 1 and len(data_shape) == 1:
            continue
        size = data_shape[axis]
        for indices in (np.array(size - 1), np.array([0, -1, size - 1]), np.array([[0, 1], [-size, 0]])):
            feeds.append({"data": arange(*data_shape), "indices": indices.astype(index_dtype)})
    rewritten = check_three_ways(unranked_gather("Gather", index_type=index_type, axis=axis), feeds)
    assert len(prepared_types(rewritten)) < len(prepared_types(rewritten, options=TODAY)) // 5


@pytest.mark.parametrize("elem_type,values", [
    (TensorProto.INT64, np.array([[-(2**62), 7], [3, 2**63 - 1]], dtype=np.int64)),
    (TensorProto.BOOL, np.array([[True, False], [False, True]])),
    (TensorProto.UINT64, np.array([[2**64 - 1, 0], [5, 2**63]], dtype=np.uint64)),
    (TensorProto.DOUBLE, np.array([[np.nan, -0.0], [np.inf, 1e-310]])),
    (TensorProto.STRING, np.array([["a", "bc"], ["", "def"]], dtype=object)),
])
def test_gather_of_every_kind_of_data(elem_type, values):
    feeds = [{"data": values, "indices": np.array([[1, 0, 1]], dtype=np.int64)}]
    check_three_ways(unranked_gather("Gather", elem_type, axis=1), feeds)


def test_gather_elements_with_indices_smaller_than_the_data():
    """GatherElements' run-time form cuts the data to the indices' extents (ORT accepts smaller indices)."""
    feeds = [{"data": arange(3, 4), "indices": np.array([[3, 0, -1], [1, 2, 0]], dtype=np.int64)},
             {"data": arange(2, 3, 4), "indices": np.array([[[0, 1], [2, -3]]], dtype=np.int64)},
             {"data": arange(5), "indices": np.array([4, -5, 0], dtype=np.int64)}]
    check_three_ways(unranked_gather("GatherElements", axis=-1), feeds)
    feeds[0]["indices"] = np.array([[2, 0, -1], [1, 2, 0]], dtype=np.int64)
    check_three_ways(unranked_gather("GatherElements", axis=0), feeds[:1] + feeds[2:])


@pytest.mark.parametrize("batch_dims,feeds", [
    (0, [{"data": arange(3, 4), "indices": np.array([[2, -1], [0, 3]], dtype=np.int64)},
         {"data": arange(3, 4), "indices": np.array([[[1], [2]]], dtype=np.int64)},
         {"data": arange(2, 3, 4), "indices": np.array([[1, 2, 3]], dtype=np.int64)},
         {"data": arange(2, 3), "indices": np.zeros((2, 0), dtype=np.int64)}]),
    (1, [{"data": arange(2, 3, 4), "indices": np.array([[[1], [2]], [[0], [-1]]], dtype=np.int64)},
         {"data": arange(2, 3, 4), "indices": np.array([[1, 3], [2, 0]], dtype=np.int64)},
         {"data": arange(2, 3, 4), "indices": np.array([[2], [0]], dtype=np.int64)}]),
])
def test_gather_nd_with_batch_dims(batch_dims, feeds):
    check_three_ways(unranked_gather("GatherND", batch_dims=batch_dims), feeds)


@pytest.mark.parametrize("op_type,attributes,feeds", [
    ("Gather", {"axis": 1}, {"data": arange(2, 3, 4), "indices": np.array([[0, 3]], dtype=np.int64)}),
    ("Gather", {"axis": 0}, {"data": arange(4), "indices": np.array(-5, dtype=np.int64)}),
    ("GatherElements", {"axis": 1}, {"data": arange(3, 4), "indices": np.array([[0, 9]], dtype=np.int64)}),
    ("GatherND", {"batch_dims": 1}, {"data": arange(2, 3, 4), "indices": np.array([[1, 4], [0, 0]], dtype=np.int64)}),
])
def test_an_index_out_of_range_gets_todays_error(op_type, attributes, feeds):
    """The op aligns as the graph did: the same error, naming the same index at the same position."""
    rewritten, _ = rewrite_model(unranked_gather(op_type, **attributes))
    with pytest.raises(Exception) as today:
        kernel_session(rewritten, TODAY).run(None, feeds)
    session = kernel_session(rewritten)
    with pytest.raises(Exception) as recorded:
        session.run(None, feeds)
    assert type(recorded.value) is type(today.value)
    assert str(recorded.value) == str(today.value)
    assert "out of range" in str(recorded.value)
    assert session.run(None, {**feeds, "indices": np.zeros_like(feeds["indices"])})  # the session still runs


@pytest.mark.parametrize("op_type,attributes,feeds", [
    ("GatherElements", {"axis": 0}, {"data": arange(3, 4), "indices": np.array([0, 1], dtype=np.int64)}),
    ("GatherElements", {"axis": 0}, {"data": arange(3), "indices": np.array([[0, 1]], dtype=np.int64)}),
    ("Gather", {"axis": 1}, {"data": arange(3), "indices": np.array([0], dtype=np.int64)}),
    ("GatherND", {"batch_dims": 0}, {"data": arange(3), "indices": np.array(0, dtype=np.int64)}),
    ("GatherND", {"batch_dims": 1}, {"data": arange(2, 3), "indices": np.array([[0, 1, 1], [0, 0, 0]], dtype=np.int64)}),
])
def test_a_wrong_rank_raises_the_runs_error(op_type, attributes, feeds):
    """Ranks no alignment fits: an error of the run (as the Run path's, never a process abort)."""
    rewritten, _ = rewrite_model(unranked_gather(op_type, **attributes))
    with pytest.raises(Exception):
        kernel_session(rewritten, TODAY).run(None, feeds)
    with pytest.raises(Exception, match="GatherMultiaxis"):
        kernel_session(rewritten).run(None, feeds)


def edited(rewritten, edit):
    model = onnx.ModelProto()
    model.CopyFrom(rewritten)
    node = next(node for node in model.graph.node if node.op_type == "GatherMultiaxis")
    edit(model, node)
    return model


def record_of(node):
    return next(entry for entry in node.metadata_props if entry.key == KEY)


def other_axis(model, node):
    entry = record_of(node)
    value = json.loads(entry.value)
    value["attributes"]["axis"] = 0
    entry.value = json.dumps(value)


def other_data(model, node):
    entry = record_of(node)
    value = json.loads(entry.value)
    value["inputs"][0] = "indices"
    entry.value = json.dumps(value)


def second_reader(model, node):
    model.graph.node.append(helper.make_node("Identity", [node.output[0]], ["also"]))
    model.graph.output.append(unranked("also", TensorProto.FLOAT))


def changed_constant(model, node):
    constant = next(n for n in model.graph.node if n.op_type == "Constant"
                    and numpy_helper.to_array(n.attribute[0].t).tolist() in (1, [1]))
    value = numpy_helper.to_array(constant.attribute[0].t)
    constant.attribute[0].t.CopyFrom(numpy_helper.from_array(value + 1))


@pytest.mark.parametrize("edit", [other_axis, other_data, second_reader, changed_constant])
def test_a_record_the_graph_no_longer_bears_out_keeps_the_run_path(edit):
    rewritten, _ = rewrite_model(unranked_gather("Gather", axis=1))
    model = edited(rewritten, edit)
    types = prepared_types(model)
    assert RUN_OP_TYPE in types and RECORDED_OP_TYPE not in types
    feeds = {"data": arange(2, 3, 4), "indices": np.array([[0, 2]], dtype=np.int64)}
    for got, want in zip(kernel_session(model).run(None, feeds), kernel_session(model, TODAY).run(None, feeds)):
        assert_bit_identical(got, want)


def test_constant_indices_are_recorded_constant_data_is_not():
    """mamba's indices are Constant nodes: recorded. Constant data stays with the bound path (Run here)."""
    indices = helper.make_node("Constant", [], ["indices"], value=numpy_helper.from_array(np.array([[2, 0]])))
    node = helper.make_node("Gather", ["data", "indices"], ["y"], axis=1)
    constant_indices = make_model([indices, node], [unranked("data", TensorProto.FLOAT)],
                                  [unranked("y", TensorProto.FLOAT)])
    check_three_ways(constant_indices, [{"data": arange(2, 3)}, {"data": arange(4, 3, 2)}])
    table = numpy_helper.from_array(arange(3, 4), "data")
    constant_data = make_model([node], [unranked("indices", TensorProto.INT64)], [unranked("y", TensorProto.FLOAT)],
                               [table])
    rewritten, _ = rewrite_model(constant_data)
    assert RECORDED_OP_TYPE not in prepared_types(rewritten)


def zoo_like_model():
    """Shape arithmetic and gathers of unknown ranks, chained, one in an If branch: a TorchScript export's kind."""
    loop_gather = helper.make_node("Gather", ["x", "last"], ["row"], axis=0)
    branch = helper.make_graph([loop_gather], "then", [], [unranked("row", TensorProto.FLOAT)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])], "else", [],
                              [unranked("same", TensorProto.FLOAT)])
    nodes = [
        helper.make_node("Constant", [], ["last"], value=numpy_helper.from_array(np.array(-1))),
        helper.make_node("Gather", ["x", "ids"], ["picked"], axis=0),
        helper.make_node("GatherElements", ["picked", "order"], ["sorted"], axis=-1),
        helper.make_node("GatherND", ["sorted", "coords"], ["nd"], batch_dims=0),
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["positive"]),
        helper.make_node("If", ["positive"], ["branch"], then_branch=branch, else_branch=other),
    ]
    return make_model(nodes, [unranked("x", TensorProto.FLOAT), unranked("ids", TensorProto.INT64),
                              unranked("order", TensorProto.INT64), unranked("coords", TensorProto.INT64)],
                      [unranked("nd", TensorProto.FLOAT), unranked("branch", TensorProto.FLOAT)],
                      [numpy_helper.from_array(np.array(0, dtype=np.float32), "zero")])


def test_a_zoo_like_model(recwarn):
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((4, 5)).astype(np.float32), "ids": np.array([3, 0, -1]),
              "order": np.array([[4, 0], [1, 1], [-1, 2]]), "coords": np.array([[0, 1], [2, 0]])},
             {"x": np.abs(rng.standard_normal((3, 2, 2))).astype(np.float32), "ids": np.array([[2], [0]]),
              "order": np.array([[[[1, 0]]], [[[0, 0]]]]), "coords": np.array([[0, 0, 0, 1]])}]
    rewritten = check_three_ways(zoo_like_model(), feeds)
    types = prepared_types(rewritten)
    assert types.count(RECORDED_OP_TYPE) == 4 and not {"Shape", "Range", "Concat"} & set(types)


def test_the_default_session_records_the_nodes_it_keeps_for_the_kernel():
    """A string Gather of blocks of more than one element stays on the kernel (ORT's string Gather is wrong
    there, docs/upstream.md): the default session runs it as a recorded node, right where ORT is not."""
    original = unranked_gather("Gather", TensorProto.STRING, axis=0)
    rewritten, _ = rewrite_model(original)
    types = prepared_types(rewritten, builtin_gathers=True)
    assert RECORDED_OP_TYPE in types and "Gather" not in types and "Shape" not in types
    session = gathermultiaxis.InferenceSession(rewritten, providers=CPU)
    today = gathermultiaxis.InferenceSession(rewritten, providers=CPU, bind_options=TODAY)
    data = np.array([["a", "bc", "d"], ["e", "", "fgh"]], dtype=object)
    for indices in (np.array([1, 0, -1]), np.array([[0], [1]]), np.array(1)):
        got = session.run(None, {"data": data, "indices": indices})[0]
        assert_bit_identical(got, np.take(data, indices, axis=0))
        assert_bit_identical(got, today.run(None, {"data": data, "indices": indices})[0])


def test_remove_recorded_alignments_drops_only_what_nothing_reads():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["s"], ["n"]),
             helper.make_node("Shape", ["x"], ["kept"])]
    model = make_model(nodes, [unranked("x", TensorProto.FLOAT)], [unranked("kept", TensorProto.INT64)])
    assert not remove_recorded_alignments(model, set())
    assert remove_recorded_alignments(model, {"n"})
    assert [node.output[0] for node in model.graph.node] == ["kept"]


def test_a_static_alignment_is_not_taken_for_a_run_time_one():
    """GatherElements of known ranks cuts its data with computed ends but constant axes: the fixed-axes path, no
    proof tried; of unknown ranks its Slice's axes are computed: recorded."""
    node = helper.make_node("GatherElements", ["data", "indices"], ["y"], axis=1)
    ranked = make_model([node], [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["a", "b"]),
                                 helper.make_tensor_value_info("indices", TensorProto.INT64, ["c", "d"])],
                        [unranked("y", TensorProto.FLOAT)])
    rewritten, _ = rewrite_model(ranked)
    assert "Slice" in [node.op_type for node in rewritten.graph.node]
    types = prepared_types(rewritten)
    assert "GatherMultiaxisRunFixedAxes" in types and RECORDED_OP_TYPE not in types
    assert RECORDED_OP_TYPE in prepared_types(rewrite_model(unranked_gather("GatherElements", axis=1))[0])


def test_a_proof_that_fails_keeps_the_run_path(monkeypatch):
    import gathermultiaxis.graphs.lower.recorded_form as recorded_form_module

    def broken(node, scope):
        raise RuntimeError("a proof that breaks")

    monkeypatch.setattr(recorded_form_module, "recorded_form", broken)
    rewritten, _ = rewrite_model(unranked_gather("Gather", axis=0))
    types = prepared_types(rewritten)
    assert RUN_OP_TYPE in types and RECORDED_OP_TYPE not in types
