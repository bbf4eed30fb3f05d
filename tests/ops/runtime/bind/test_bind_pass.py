"""The session's bind step (graphs.bind.prepare_model; issue 21 items 1-4): the node forms a rewritten
model runs as in gathermultiaxis.InferenceSession (a bound table, constant axes as an attribute, float16
in and out), each bit-identical to ORT's builtin Gather."""

import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from session_cases import constant_axes_model, embedding_model, scan_model, varying_scan_model
from support import assert_bit_identical, gather_multiaxis_model, make_model

import gathermultiaxis
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.ops.runtime.session import prepare_model  # the bind step for the installed bridge

MODEL = gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64)


def node_types(model):
    return [node.op_type for node in model.graph.node]


def test_bound_float16_node_form_and_bits():
    """A float16 table: one bound node (indices, token) returning float16; the alignment Unsqueeze and the
    Cast round trip are gone; the result is builtin Gather's, NaN payloads included."""
    bits = np.random.default_rng(3).integers(0, 2**16, (50, 4), dtype=np.uint16)
    bits[0, :3] = [0x7E01, 0xFD00, 0x8000]
    original = embedding_model(numpy_helper.from_array(bits.view(np.float16), "table"), [None, None])
    rewritten, _ = rewrite_model(original)
    prepared = prepare_model(onnx.ModelProto.FromString(rewritten.SerializeToString()))
    assert node_types(prepared.model) == ["GatherMultiaxisBoundFloat16"], node_types(prepared.model)
    assert list(prepared.model.graph.node[0].input) == ["ids", prepared.token]
    sess = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    builtin = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    for ids in (np.array([[0, 1, 49, -50]]), np.arange(-50, 50).reshape(4, 25)):
        assert_bit_identical(sess.run(None, {"ids": ids})[0], builtin.run(None, {"ids": ids})[0])
    with pytest.raises(gathermultiaxis.GatherIndexError, match="index 50 at"):
        sess.run(None, {"ids": np.array([[50]])})


def test_constant_axes_travel_as_an_attribute():
    prepared = prepare_model(constant_axes_model())
    node = next(n for n in prepared.model.graph.node if n.domain == "ai.onnx.contrib")
    assert node.op_type == "GatherMultiaxisRunFixedAxes" and len(node.input) == 3
    assert {a.name: a.s for a in node.attribute} == {"axes": b"1", "mode": b"error"}
    sess = gathermultiaxis.InferenceSession(constant_axes_model(TensorProto.INT64), run_builtin_gathers=False)
    data = np.arange(6, dtype=np.int64).reshape(2, 3)
    np.testing.assert_array_equal(sess.run(None, {"input": data, "indices": np.array([[2, -3]])})[0], [[2, 0], [5, 3]])
    overridable = onnx.ModelProto()  # axes that a feed can override stay an input
    overridable.CopyFrom(MODEL)
    overridable.graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "axes"))
    node = next(n for n in prepare_model(overridable).model.graph.node if n.domain == "ai.onnx.contrib")
    assert node.op_type == "GatherMultiaxisRun" and node.input[2] == "axes"


def test_float16_input_comes_back_as_float16():
    """A float16 graph input crosses the bridge widened (exactly) and comes back as float16 from the op."""
    value = helper.make_tensor_value_info
    original = make_model([helper.make_node("Gather", ["data", "ids"], ["out"], axis=1)],
                          [value("data", TensorProto.FLOAT16, [None, None]), value("ids", TensorProto.INT64, [None])],
                          [value("out", TensorProto.FLOAT16, None)])
    rewritten, _ = rewrite_model(original)
    prepared = prepare_model(onnx.ModelProto.FromString(rewritten.SerializeToString()))
    assert "GatherMultiaxisRunFixedAxesToFloat16" in node_types(prepared.model)
    assert node_types(prepared.model).count("Cast") == 1, node_types(prepared.model)  # the widening only
    sess = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    builtin = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    data = np.array([[0x7E01, 0xFD00, 0x3C00], [0xFC00, 0x0001, 0x8000]], np.uint16).view(np.float16)
    feeds = {"data": data, "ids": np.array([2, 1, 0, -1])}
    assert_bit_identical(sess.run(None, feeds)[0], builtin.run(None, feeds)[0])
    with pytest.raises(gathermultiaxis.GatherIndexError, match="index 3 at"):
        sess.run(None, {"data": data, "ids": np.array([3])})


# -- tables computed from constants (issue 29 item 1) -----------------------------------------------

def three_ways(original, feeds_list, **kwargs):
    """The rewrite of ``original`` in a binding session, bit-identical to plain ORT on ``original`` and to the
    unbound session on every feed; the binding session is returned."""
    rewritten, _ = rewrite_model(original)
    bound = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"], **kwargs, run_builtin_gathers=False)
    unbound = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"], bind_constants=False, run_builtin_gathers=False)
    builtin = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    for feeds in feeds_list:
        want = builtin.run(None, feeds)
        for got, unbound_got, expected in zip(bound.run(None, feeds), unbound.run(None, feeds), want):
            assert_bit_identical(got, expected)
            assert_bit_identical(unbound_got, expected)
    return bound


def quantized(name, shape, rng, zero_point_type=TensorProto.INT8):
    values = rng.integers(-128, 128, shape) if zero_point_type == TensorProto.INT8 else rng.integers(0, 256, shape)
    dtype = helper.tensor_dtype_to_np_dtype(zero_point_type)
    return numpy_helper.from_array(values.astype(dtype), name)


def gathers_of(tables, ids="ids", axis=0):
    """One builtin Gather of each named table (out0, out1, ...)."""
    return [helper.make_node("Gather", [table, ids], [f"out{number}"], axis=axis) for number, table in enumerate(tables)]


def test_dequantized_tables_are_bound_bit_exact():
    """QDQ embeddings: DequantizeLinear of int8/uint8 initializers (per tensor, per axis, a float16 scale),
    computed once by ORT at bind time, bit for bit what ORT computes at run time."""
    rng = np.random.default_rng(5)
    value = helper.make_tensor_value_info
    scale = np.float32(0.0123456789)  # products that round: a NumPy (x - z) * s in double would differ
    initializers = [
        quantized("q8", [50, 6], rng), numpy_helper.from_array(scale, "s"), numpy_helper.from_array(np.int8(-3), "z"),
        quantized("u8", [50, 6], rng, TensorProto.UINT8),
        numpy_helper.from_array(rng.uniform(1e-3, 1e-1, 6).astype(np.float32), "s_axis"),
        numpy_helper.from_array(rng.integers(0, 256, 6).astype(np.uint8), "z_axis"),
        quantized("q_half", [50, 6], rng), numpy_helper.from_array(np.float16(0.0371), "s_half")]
    nodes = [helper.make_node("DequantizeLinear", ["q8", "s", "z"], ["t_tensor"]),
             helper.make_node("DequantizeLinear", ["u8", "s_axis", "z_axis"], ["t_axis"], axis=1),
             helper.make_node("DequantizeLinear", ["q_half", "s_half"], ["t_half"]),
             *gathers_of(["t_tensor", "t_axis", "t_half"])]
    original = make_model(nodes, [value("ids", TensorProto.INT64, [None, None])],
                          [value(f"out{n}", t, None) for n, t in enumerate([1, 1, TensorProto.FLOAT16])],
                          initializers, opset=19)
    feeds = [{"ids": np.array([[0, 49, -50, 7]])}, {"ids": rng.integers(-50, 50, (3, 5))}]
    sess = three_ways(original, feeds)
    # the two float tables share their indices: one call; the float16 one has no group op type
    assert sess.bound_tables == 3 and sess.bridge_crossings == 2, (sess.bound_tables, sess.bridge_crossings)
    prepared = prepare_model(rewrite_model(original)[0])
    assert not any(node.op_type == "DequantizeLinear" for node in prepared.model.graph.node)
    assert not prepared.model.graph.initializer  # only the chains read them
    with pytest.raises(gathermultiaxis.GatherIndexError, match="index 50 at"):
        sess.run(None, {"ids": np.array([[50]])})


def test_chains_of_views_casts_and_concats_are_bound():
    """Reshape, Transpose, Squeeze, Unsqueeze, Identity (views), Cast and Concat (computed by ORT) over
    initializers and Constants; a table a chain and another reader share stays for the other reader."""
    rng = np.random.default_rng(6)
    value = helper.make_tensor_value_info
    table = rng.standard_normal((4, 10, 3)).astype(np.float32)
    table[0, :3, 0] = [np.nan, -0.0, np.inf]
    integers = rng.integers(-2**40, 2**40, (10, 2))
    initializers = [numpy_helper.from_array(table, "t"), numpy_helper.from_array(integers, "i64"),
                    numpy_helper.from_array(np.array([30, 4], np.int64), "shape"),
                    numpy_helper.from_array(np.array([0], np.int64), "axis0")]
    nodes = [helper.make_node("Reshape", ["t", "shape"], ["reshaped"]),                  # 30 x 4
             helper.make_node("Transpose", ["t"], ["transposed"], perm=[1, 0, 2]),       # 10 x 4 x 3
             helper.make_node("Unsqueeze", ["i64", "axis0"], ["unsqueezed"]),
             helper.make_node("Identity", ["unsqueezed"], ["same"]),
             helper.make_node("Squeeze", ["same", "axis0"], ["squeezed"]),               # 10 x 2 int64
             helper.make_node("Cast", ["squeezed"], ["as_float"], to=TensorProto.FLOAT),  # rounds
             helper.make_node("Constant", [], ["extra"], value=numpy_helper.from_array(np.full((2, 2), 7.5, np.float32))),
             helper.make_node("Concat", ["as_float", "extra"], ["joined"], axis=0),       # 12 x 2
             helper.make_node("Cast", ["t"], ["as_int"], to=TensorProto.INT32),           # NaN, inf: ORT's own
             *gathers_of(["reshaped", "transposed", "joined"]),
             helper.make_node("Gather", ["as_int", "ids"], ["out3"], axis=1),
             helper.make_node("ReduceSum", ["t"], ["total"], keepdims=0)]                 # another reader of t
    original = make_model(nodes, [value("ids", TensorProto.INT64, [None])],
                          [value("out0", 1, None), value("out1", 1, None), value("out2", 1, None),
                           value("out3", TensorProto.INT32, None), value("total", 1, None)], initializers)
    sess = three_ways(original, [{"ids": np.array([0, 9, -10, 3])}, {"ids": np.array([1, -1])}])
    assert sess.bound_tables == 4, sess.bound_tables
    prepared = prepare_model(rewrite_model(original)[0])
    kinds = sorted(node.op_type for node in prepared.model.graph.node)
    assert kinds == ["GatherMultiaxisBoundGroupFloatFloatFloat", "GatherMultiaxisBoundInt32", "ReduceSum"], kinds
    assert [tensor.name for tensor in prepared.model.graph.initializer] == ["t"]


def test_a_view_whose_shape_is_computed_is_computed():
    """A Reshape to a shape that a Concat of Constants makes (as exporters write it): computed by ORT."""
    value = helper.make_tensor_value_info
    table = np.arange(24, dtype=np.float32).reshape(4, 6)
    constant = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array([size], np.int64)))
                for name, size in (("rows", 8), ("columns", -1))]
    original = make_model([*constant, helper.make_node("Concat", ["rows", "columns"], ["shape"], axis=0),
                            helper.make_node("Reshape", ["t", "shape"], ["reshaped"]), *gathers_of(["reshaped"])],
                           [value("ids", TensorProto.INT64, [None])], [value("out0", 1, None)],
                           [numpy_helper.from_array(table, "t")])
    sess = three_ways(original, [{"ids": np.array([0, 7, -8, 3])}])
    assert sess.bound_tables == 1 and sess.bridge_crossings == 1


def test_tables_are_computed_in_one_batch_unless_ort_refuses_one(monkeypatch):
    """Two computed tables: one ORT session computes both. With a third that ORT refuses (a Reshape to the
    wrong size, its shape made by a Concat), each is computed alone: the good ones are bound, the bad one is
    left to the run, which fails as the unbound run fails."""
    from gathermultiaxis.ops.runtime import session as session_module

    value = helper.make_tensor_value_info
    rng = np.random.default_rng(9)
    constants = [quantized("qa", [20, 4], rng), quantized("qb", [30, 4], rng),
                 numpy_helper.from_array(np.float32(0.05), "s"), numpy_helper.from_array(np.zeros((4, 3), np.float32), "t")]
    shape = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array([size], np.int64)))
             for name, size in (("five", 5), ("two", 2))]
    nodes = [helper.make_node("DequantizeLinear", ["qa", "s"], ["a"]), helper.make_node("DequantizeLinear", ["qb", "s"], ["b"]),
             *shape, helper.make_node("Concat", ["five", "two"], ["bad_shape"], axis=0),
             helper.make_node("Reshape", ["t", "bad_shape"], ["bad"]),
             helper.make_node("Gather", ["a", "ids"], ["out0"], axis=0),
             helper.make_node("Gather", ["b", "ids"], ["out1"], axis=0)]
    outputs = [value("out0", 1, None), value("out1", 1, None)]
    good = make_model(nodes[:2] + nodes[-2:], [value("ids", TensorProto.INT64, [None])], outputs, constants)
    bad = make_model([*nodes, helper.make_node("Gather", ["bad", "ids"], ["out2"], axis=0)],
                     [value("ids", TensorProto.INT64, [None])], [*outputs, value("out2", 1, None)], constants)
    sessions = []
    evaluate = session_module.evaluate_constants
    monkeypatch.setattr(session_module, "evaluate_constants",
                        lambda model, base_dir: sessions.append(len(model.graph.output)) or evaluate(model, base_dir))
    sess = three_ways(good, [{"ids": np.array([0, 19, -20])}])
    assert sess.bound_tables == 2 and sessions == [2], (sess.bound_tables, sessions)
    del sessions[:]
    rewritten = rewrite_model(bad)[0]
    sess = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    assert sess.bound_tables == 2 and sessions == [3, 1, 1, 1], (sess.bound_tables, sessions)
    unbound = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"], bind_constants=False, run_builtin_gathers=False)
    for run in (sess.run, unbound.run):
        with pytest.raises(Exception, match="(?i)reshape"):
            run(None, {"ids": np.array([0])})


def test_a_chain_ort_refuses_is_left_to_the_run():
    """A Reshape to a wrong size is not bound: the run fails as ORT fails (the unbound path), not the bind."""
    value = helper.make_tensor_value_info
    original = make_model([helper.make_node("Reshape", ["t", "shape"], ["bad"]), *gathers_of(["bad"])],
                          [value("ids", TensorProto.INT64, [None])], [value("out0", 1, None)],
                          [numpy_helper.from_array(np.zeros((4, 3), np.float32), "t"),
                           numpy_helper.from_array(np.array([5, 2], np.int64), "shape")])
    sess = gathermultiaxis.InferenceSession(rewrite_model(original)[0], providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    assert sess.bound_tables == 0
    with pytest.raises(Exception, match="(?i)reshape"):
        sess.run(None, {"ids": np.array([0])})


# -- one call for gathers that share their indices (issue 29 item 2) ---------------------------------

def tree_level_model(extra_tables=()):
    """One level of a tree traversal (Hummingbird's tree_trav): the features, thresholds, left and right
    children of the current nodes, four constant tables gathered with the same node ids."""
    rng = np.random.default_rng(7)
    tables = {"features": rng.integers(0, 5, 31).astype(np.int64),
              "thresholds": rng.standard_normal(31).astype(np.float32),
              "lefts": rng.integers(0, 31, 31).astype(np.int64), "rights": rng.integers(0, 31, 31).astype(np.int64),
              **dict(extra_tables)}
    tables["thresholds"][:3] = [np.nan, -0.0, np.inf]
    value = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["node_ids", "offset"], ["ids"]), *gathers_of(list(tables))]
    outputs = [value(f"out{n}", helper.np_dtype_to_tensor_dtype(t.dtype), None) for n, t in enumerate(tables.values())]
    initializers = [numpy_helper.from_array(table, name) for name, table in tables.items()]
    initializers.append(numpy_helper.from_array(np.array(0, np.int64), "offset"))
    return make_model(nodes, [value("node_ids", TensorProto.INT64, [None, None])], outputs, initializers)


def test_tables_sharing_indices_are_gathered_in_one_call():
    """Four tables, one crossing: outputs bit-identical (dtype, shape, values) to plain ORT and to the
    ungrouped session; an index out of range raises for the run, naming the index."""
    original = tree_level_model()
    feeds = [{"node_ids": np.array([[0, 30, -31, 4]])}, {"node_ids": np.arange(-31, 31).reshape(2, 31)}]
    sess = three_ways(original, feeds)
    assert sess.bound_tables == 4 and sess.bridge_crossings == 1, (sess.bound_tables, sess.bridge_crossings)
    prepared = prepare_model(rewrite_model(original)[0])
    groups = [node for node in prepared.model.graph.node if node.domain == "ai.onnx.contrib"]
    assert [node.op_type for node in groups] == ["GatherMultiaxisBoundGroupFloatInt64Int64Int64"]
    with pytest.raises(gathermultiaxis.GatherIndexError, match="index 31 at"):
        sess.run(None, {"node_ids": np.array([[31]])})
    sess.run(None, feeds[0])  # the failed run left nothing behind


def test_groups_hold_at_most_four_tables_of_float_and_int64():
    """Six tables with the same indices: a group of four, a group of the next (a float table and an int64
    one), and a double table gathered alone (no group op type for float64); a smaller table's error wins
    when it comes first in the graph."""
    rng = np.random.default_rng(8)
    extra = {"values": rng.standard_normal(31).astype(np.float32), "depths": rng.integers(0, 9, 31).astype(np.int64),
             "weights": rng.standard_normal(31)}
    original = tree_level_model(extra)
    sess = three_ways(original, [{"node_ids": np.array([[0, 30, -31, 4]])}])
    assert sess.bound_tables == 7 and sess.bridge_crossings == 3, (sess.bound_tables, sess.bridge_crossings)
    prepared = prepare_model(rewrite_model(original)[0])
    kinds = sorted(node.op_type for node in prepared.model.graph.node if node.domain == "ai.onnx.contrib")
    assert kinds == ["GatherMultiaxisBoundDouble", "GatherMultiaxisBoundGroupFloatInt64",
                     "GatherMultiaxisBoundGroupFloatInt64Int64Int64"], kinds


def test_grouping_is_not_done_without_binding():
    sess = gathermultiaxis.InferenceSession(rewrite_model(tree_level_model())[0], bind_constants=False, run_builtin_gathers=False)
    assert sess.bound_tables == 0 and sess.bridge_crossings == 4


# -- no ORT warning about initializers the bind step left unread (issue 30 item 14) -----------------

def test_ort_warns_about_no_initializer_the_bind_step_leaves():
    """The rewritten example (If branches with constant axes) in InferenceSession, bound and unbound, at
    ORT's default log level: ORT's stderr holds no "Removing initializer" warning. The same child shows
    that the capture sees ORT's warning for a model that has an unread initializer."""
    code = textwrap.dedent("""
        import onnx, onnxruntime as ort, numpy as np
        import gathermultiaxis
        from gathermultiaxis.examples import EXAMPLE_PATH
        from gathermultiaxis.graphs import rewrite_model
        rewritten, _ = rewrite_model(onnx.load(EXAMPLE_PATH))
        gathermultiaxis.InferenceSession(rewritten, run_builtin_gathers=False)
        gathermultiaxis.InferenceSession(rewritten, bind_constants=False, run_builtin_gathers=False)
        ort.InferenceSession(rewritten.SerializeToString(), gathermultiaxis.session_options())
        print("MARK", flush=True)
        import sys; sys.stderr.write("MARK\\n"); sys.stderr.flush()
        unread = onnx.helper.make_tensor("unread_one", onnx.TensorProto.FLOAT, [1], [1.0])
        rewritten.graph.initializer.append(unread)
        ort.InferenceSession(rewritten.SerializeToString(), gathermultiaxis.session_options())
    """)
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0 and "MARK" in child.stdout, child.stderr[-3000:]
    before, after = child.stderr.split("MARK\n", 1)
    assert "Removing initializer" not in before, before
    assert "Removing initializer 'unread_one'" in after, after


def subgraph_gather_models():
    """A Gather of an outer input in a Loop body, a Scan body and both If branches, rewritten, with every
    Constant of the subgraphs turned into an initializer of its subgraph (as ORT's optimizer writes them:
    the axes the bind step makes an attribute are then initializers nothing reads)."""
    value = helper.make_tensor_value_info
    x, idx = value("x", TensorProto.FLOAT, [2, 3]), value("idx", TensorProto.INT64, [2])
    out = value("g", TensorProto.FLOAT, [2, 2])

    def gather(src="x", output="g"):
        return helper.make_node("Gather", [src, "idx"], [output], axis=1)

    loop_body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]), gather()], "loop_body",
                                  [value("i", TensorProto.INT64, []), value("cond_in", TensorProto.BOOL, [])],
                                  [value("cond_out", TensorProto.BOOL, []), out])
    scan_body = helper.make_graph([gather("row")], "scan_body", [value("row", TensorProto.FLOAT, [2, 3])], [out])
    models = {
        "loop": make_model([helper.make_node("Loop", ["n", ""], ["y"], body=loop_body)],
                           [x, idx, value("n", TensorProto.INT64, [])], [value("y", TensorProto.FLOAT, [None, 2, 2])]),
        "scan": make_model([helper.make_node("Scan", ["xs"], ["y"], num_scan_inputs=1, body=scan_body)],
                           [value("xs", TensorProto.FLOAT, [4, 2, 3]), idx], [value("y", TensorProto.FLOAT, [4, 2, 2])]),
        "if": make_model([helper.make_node("If", ["c"], ["y"], then_branch=helper.make_graph([gather()], "then", [], [out]),
                                           else_branch=helper.make_graph([gather()], "else", [], [out]))],
                         [x, idx, value("c", TensorProto.BOOL, [])], [value("y", TensorProto.FLOAT, [2, 2])]),
    }
    rewritten = {}
    for name, model in models.items():
        model, _ = rewrite_model(model)
        for node in model.graph.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    graph = attribute.g
                    for constant in [n for n in graph.node if n.op_type == "Constant"]:
                        tensor = helper.get_attribute_value(constant.attribute[0])
                        tensor.name = constant.output[0]
                        graph.initializer.append(tensor)
                        graph.node.remove(constant)
                    assert graph.initializer and any(n.op_type == "GatherMultiaxis" for n in graph.node), name
        rewritten[name] = model
    return rewritten


def test_no_removing_initializer_warning_in_loop_scan_and_if_bodies(tmp_path):
    """A rewritten gather in a Loop body, a Scan body and If branches (axes as subgraph initializers) in
    InferenceSession, bound and unbound, at ORT's default log level: no "Removing initializer" warning. The
    capture sees one for an unread initializer added to the Loop body."""
    paths = []
    for name, model in subgraph_gather_models().items():
        onnx.save(model, str(tmp_path / f"{name}.onnx"))
        paths.append(str(tmp_path / f"{name}.onnx"))
    code = textwrap.dedent(f"""
        import sys, onnx, onnxruntime as ort
        import gathermultiaxis
        paths = {paths!r}
        for path in paths:
            model = onnx.load(path)
            gathermultiaxis.InferenceSession(model, run_builtin_gathers=False)
            gathermultiaxis.InferenceSession(model, bind_constants=False, run_builtin_gathers=False)
        print("MARK", flush=True)
        sys.stderr.write("MARK\\n"); sys.stderr.flush()
        loop = onnx.load(paths[0])
        loop.graph.node[0].attribute[0].g.initializer.append(
            onnx.helper.make_tensor("unread_one", onnx.TensorProto.FLOAT, [1], [1.0]))
        gathermultiaxis.InferenceSession(loop, run_builtin_gathers=False)
    """)
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0 and "MARK" in child.stdout, child.stderr[-3000:]
    before, after = child.stderr.split("MARK\n", 1)
    assert "Removing initializer" not in before, before
    assert "Removing initializer 'unread_one'" in after, after


def test_a_scan_body_output_of_changing_shape_is_copied_by_a_concat():
    """Only a Scan body output that a GatherMultiaxis node writes and that is declared with a rank of at least 1
    goes through the one-input Concat (its run, bit for bit and with ORT's error: session_cases.case_scan_varying)."""
    rewritten, _ = rewrite_model(varying_scan_model())
    for bind in (True, False):
        body = prepare_model(onnx.ModelProto.FromString(rewritten.SerializeToString()), bind=bind).model.graph.node[0].attribute[0].g
        copy = body.node[-1]
        assert (copy.op_type, list(copy.input), list(copy.output)) == ("Concat", ["picked"], ["picked/scan_copy"])
        assert [output.name for output in body.output] == ["picked/scan_copy"]
    static = prepare_model(scan_model()).model.graph.node[0].attribute[0].g  # declared [2]: a copy too
    assert static.node[-1].op_type == "Concat" and static.output[0].name == "picked/scan_copy"
    scalar = scan_model()
    scalar.graph.node[0].attribute[0].g.output[0].type.tensor_type.shape.ClearField("dim")  # rank 0: none
    body = prepare_model(scalar).model.graph.node[0].attribute[0].g
    assert "Concat" not in [node.op_type for node in body.node] and body.output[0].name == "picked"
