"""Ranks that never give up (four layers), sizes only from what ORT enforces, functions, types kept:
each against ORT's builtin gathers bit for bit, and one regression test per wrong result or failure of
issue 11 (ranks, sizes, functions, types)."""

import io
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from sessions import assert_rewrite_matches, custom_session
from support import make_model

from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.graphs.rewrite.rank_layers import RANK_RULES
from gathermultiaxis.graphs.ranks import rank_rules
from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo


def apply_rank_rule(node, inputs, constants):
    return rank_rules.apply_rank_rule(node, inputs, constants, RANK_RULES)


T = TensorProto
RNG = np.random.default_rng(11)


def value(name, elem_type, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def strip_shapes(model):
    """Unknown ranks everywhere: graph inputs and outputs without shapes, no value_info."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for v in (*model.graph.input, *model.graph.output):
        v.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    return model


# ---- layer 3: rank rules, one op at a time ------------------------------------------------------------

def no_constants(name):
    return None


RANK_RULE_CASES = [
    (helper.make_node("Flatten", ["x"], ["y"]), [TensorInfo(T.FLOAT, None)], 2),
    (helper.make_node("Reshape", ["x", "s"], ["y"]), [TensorInfo(T.FLOAT, None), TensorInfo(T.INT64, (3,))], 3),
    (helper.make_node("Shape", ["x"], ["y"]), [TensorInfo(T.FLOAT, (None, None))], 1),
    (helper.make_node("Size", ["x"], ["y"]), [TensorInfo(T.FLOAT, None)], 0),
    (helper.make_node("STFT", ["x", "s"], ["y"]), [TensorInfo(T.FLOAT, None), TensorInfo(T.INT64, ())], 4),
    (helper.make_node("Add", ["a", "b"], ["y"]), [TensorInfo(T.FLOAT, (None,)), TensorInfo(T.FLOAT, (2, 3, 4))], 3),
    (helper.make_node("Where", ["c", "a", "b"], ["y"]),
     [TensorInfo(T.BOOL, (1, 1)), TensorInfo(T.FLOAT, ()), TensorInfo(T.FLOAT, (5,))], 2),
    (helper.make_node("SkipLayerNormalization", ["x", "s", "g"], ["y"], domain="com.microsoft"),
     [TensorInfo(T.FLOAT, (None, None, 8))] * 3, 3),
    (helper.make_node("FastGelu", ["x"], ["y"], domain="com.microsoft"), [TensorInfo(T.FLOAT, (None, 8))], 2),
    (helper.make_node("BiasGelu", ["x", "b"], ["y"], domain="com.microsoft"),
     [TensorInfo(T.FLOAT, (None, None, 8)), TensorInfo(T.FLOAT, (8,))], 3),
    (helper.make_node("Attention", ["x", "w", "b"], ["y"], domain="com.microsoft"),
     [TensorInfo(T.FLOAT, (None, None, 8)), TensorInfo(T.FLOAT, (8, 24)), TensorInfo(T.FLOAT, (24,))], 3),
]


@pytest.mark.parametrize("node, inputs, rank", RANK_RULE_CASES, ids=[c[0].op_type for c in RANK_RULE_CASES])
def test_rank_rule(node, inputs, rank):
    outputs = apply_rank_rule(node, inputs, no_constants)
    assert outputs[0].rank == rank


def test_rank_rules_for_shape_lengths_feed_a_reshape():
    """Unsqueeze of a scalar and Concat of 1-D pieces keep lengths: a Reshape's rank is its shape's length."""
    unsqueeze = helper.make_node("Unsqueeze", ["s", "axes"], ["v"])
    piece = apply_rank_rule(unsqueeze, [TensorInfo(T.INT64, ()), TensorInfo(T.INT64, (1,))],
                            lambda name: np.array([0]) if name == "axes" else None)[0]
    assert piece.shape == (1,)
    joined = apply_rank_rule(helper.make_node("Concat", ["a", "b", "c"], ["s"], axis=0),
                             [piece, piece, TensorInfo(T.INT64, (2,))], no_constants)[0]
    assert joined.shape == (4,)
    assert apply_rank_rule(helper.make_node("Reshape", ["x", "s"], ["y"]), [TensorInfo(T.FLOAT, None), joined],
                           no_constants)[0].rank == 4


def test_rank_rule_cannot_tell():
    assert apply_rank_rule(helper.make_node("Add", ["a", "b"], ["y"]),
                           [TensorInfo(T.FLOAT, None), TensorInfo(T.FLOAT, (2,))], no_constants) is None
    assert apply_rank_rule(helper.make_node("NoSuchOp", ["a"], ["y"]), [TensorInfo(T.FLOAT, (2,))],
                           no_constants) is None
    assert ("com.microsoft", "SkipLayerNormalization") in RANK_RULES


# ---- real shapes of models ------------------------------------------------------------------------------

def stft_model():
    """STFT of a signal of symbolic length: ONNX's inference gives up on the output's shape entirely."""
    nodes = [helper.make_node("STFT", ["signal", "step", "window"], ["spec"], onesided=1),
             helper.make_node("Gather", ["spec", "bin"], ["one_bin"], name="pick_bin", axis=2),
             helper.make_node("GatherND", ["spec", "pairs"], ["frames"], name="pick_frames", batch_dims=1),
             helper.make_node("Gather", ["spec", "re"], ["real"], name="pick_real", axis=-1)]
    inits = [numpy_helper.from_array(np.array(4, np.int64), "step"),
             numpy_helper.from_array(np.hanning(8).astype(np.float32), "window"),
             numpy_helper.from_array(np.array([1, -1]), "bin"),
             numpy_helper.from_array(np.array([[[0, 1]], [[1, 2]]]), "pairs"),
             numpy_helper.from_array(np.array(0), "re")]
    return make_model(nodes, [value("signal", T.FLOAT, [2, "L", 1])],
                      [value(n, T.FLOAT, None) for n in ("one_bin", "frames", "real")], inits)


@pytest.mark.parametrize("length", [16, 21, 64])
def test_stft_on_symbolic_signal_length(length):
    report = assert_rewrite_matches(stft_model(), {"signal": RNG.standard_normal((2, length, 1)).astype(np.float32)})
    assert (report.rewritten, report.left) == (3, 0), report.table()


def torch_model():
    """A TorchScript export with GPT-2's split-heads Reshape (a shape computed from Shape/Gather/Concat),
    a Reshape to a product of sizes, and a Flatten, with gathers after each."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.embedding = torch.nn.Embedding(50, 8)

        def forward(self, tokens, pick):
            h = self.embedding(tokens)                                   # [B, T, 8]
            heads = h.view(h.size()[:-1] + (2, 4))                      # computed-shape Reshape
            wide = heads.reshape(torch.Size([heads.shape[0], heads.shape[1] * heads.shape[2], heads.shape[3]]))
            flat = torch.flatten(wide, 1)                                # Flatten
            return heads[:, -1], torch.gather(flat, 1, pick), flat[:, 3], wide[:, :, 1]

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Heads().eval(), (torch.randint(0, 50, (2, 5)), torch.randint(0, 40, (2, 3))), buffer,
                          input_names=["tokens", "pick"], output_names=["last", "chosen", "column", "middle"],
                          dynamic_axes={"tokens": {0: "b", 1: "t"}, "pick": {0: "b", 1: "p"}}, opset_version=17,
                          dynamo=False)
    return onnx.load_model_from_string(buffer.getvalue())


@pytest.mark.parametrize("shapes", ["as exported", "unknown ranks everywhere"])
def test_torchscript_export_with_computed_reshape_and_flatten(shapes):
    model = torch_model()
    if shapes != "as exported":
        model = strip_shapes(model)
    for batch, seq in [(2, 5), (1, 1), (3, 9)]:
        feeds = {"tokens": RNG.integers(0, 50, (batch, seq)), "pick": RNG.integers(-8 * seq, 8 * seq, (batch, 4))}
        report = assert_rewrite_matches(model, feeds)
        assert report.left == 0 and report.rewritten == 11, report.table()


def torch_data_dependent_model():
    """A TorchScript export whose last Reshape takes a shape of data-dependent length (the dims > 1 of
    its input's shape): no inference knows the rank of the gather after it; only the run tells."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    import torch.onnx.operators

    class DataDependent(torch.nn.Module):
        def forward(self, x, i):
            shape = torch._shape_as_tensor(x)
            heads = torch.onnx.operators.reshape_from_tensor_shape(x, torch.cat([shape[:-1], torch.tensor([2, 4])]))
            flat = torch.flatten(heads, 1)
            squeezed = torch.onnx.operators.reshape_from_tensor_shape(heads, shape[shape > 1])
            return heads[:, -1], flat[:, i], squeezed[..., 0]

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(DataDependent(), (torch.randn(2, 5, 8), torch.tensor([1, 0])), buffer, input_names=["x", "i"],
                          dynamic_axes={"x": {0: "b", 1: "t"}}, opset_version=17, dynamo=False)
    return onnx.load_model_from_string(buffer.getvalue())


def test_torchscript_export_with_a_reshape_to_a_data_dependent_rank():
    model = torch_data_dependent_model()
    for shape in [(2, 5, 8), (3, 2, 8), (4, 7, 8)]:  # the trace baked axis 2 into the last gather
        report = assert_rewrite_matches(model, {"x": RNG.standard_normal(shape).astype(np.float32),
                                                "i": np.array([1, -1])})
        assert (report.rewritten, report.left) == (4, 0), report.table()


def test_example_model_with_unknown_ranks_everywhere():
    from gathermultiaxis.examples import build_example_model, example_inputs

    model = strip_shapes(build_example_model())
    report = assert_rewrite_matches(model, example_inputs())
    assert (report.rewritten, report.left) == (8, 0), report.table()


# ---- sizes: only what ORT enforces -------------------------------------------------------------------------

def relu_fed(nodes, inputs, outputs, declared):
    """The gather reads Relu outputs whose value_info declares sizes they do not have (ORT ignores them)."""
    model = make_model([helper.make_node("Relu", ["x"], ["data"]), helper.make_node("Identity", ["i"], ["indices"]),
                        *nodes], inputs, outputs, opset=13)
    model.graph.value_info.extend(declared)
    return model


@pytest.mark.parametrize("columns", [3, 1])
def test_a_value_info_size_does_not_decide_the_gather_elements_crop(columns):
    """Regression: value_info said data and indices agree off the axis, so the data was not cut: an
    error with 3 index columns, a silently wrong [2, 7] output (broadcast) with 1."""
    gather = helper.make_node("GatherElements", ["data", "indices"], ["y"], axis=0)
    model = relu_fed([gather], [value("x", T.FLOAT, ["a", "b"]), value("i", T.INT64, ["c", "d"])],
                     [value("y", T.FLOAT, None)],
                     [value("data", T.FLOAT, [4, columns]), value("indices", T.INT64, [2, columns])])
    x = RNG.standard_normal((4, 7)).astype(np.float32)  # 7 columns at run time
    report = assert_rewrite_matches(model, {"x": x, "i": RNG.integers(0, 4, (2, columns))})
    assert report.rewritten == 1


def test_a_value_info_size_does_not_decide_the_gather_nd_coordinate_size():
    """Regression: value_info declared pairs ([n, 2]) where the indices hold single coordinates."""
    gather = helper.make_node("GatherND", ["data", "indices"], ["y"])
    model = relu_fed([gather], [value("x", T.FLOAT, ["a", "b"]), value("i", T.INT64, ["c", "d"])],
                     [value("y", T.FLOAT, None)], [value("indices", T.INT64, ["n", 2])])
    report = assert_rewrite_matches(model, {"x": RNG.standard_normal((4, 5)).astype(np.float32),
                                            "i": np.array([[3], [0], [-1]])})
    assert report.rewritten == 1


# ---- functions ------------------------------------------------------------------------------------------

def call_model(function, call_attributes=None, inputs=None, extra_inputs=()):
    call = helper.make_node(function.name, [*function.input], ["output"], domain="local", name="call",
                            **(call_attributes or {}))
    model = make_model([call], inputs or [value("data", T.FLOAT, ["a", "b"]), value("indices", T.INT64, ["c"]),
                                          *extra_inputs],
                       [value("output", T.FLOAT, None)], extra_opsets=[helper.make_opsetid("local", 1)])
    model.functions.append(function)
    return model


def test_function_attribute_default_is_applied_before_inlining():
    """Regression: onnx.inliner drops the default, and the rewrite gathered along axis 0 instead of 1."""
    gather = helper.make_node("Gather", ["data", "indices"], ["output"])
    gather.attribute.append(helper.make_attribute_ref("axis", onnx.AttributeProto.INT, ref_attr_name="which"))
    function = helper.make_function("local", "Pick", ["data", "indices"], ["output"], [gather],
                                    [helper.make_opsetid("", 17)], attributes=[])
    function.attribute_proto.append(helper.make_attribute("which", 1))
    model = call_model(function)
    report = assert_rewrite_matches(model, {"data": RNG.standard_normal((5, 5)).astype(np.float32),
                                            "indices": np.array([4, 0, -1, 2])})  # valid on both axes
    assert (report.rewritten, report.left) == (1, 0)
    explicit = call_model(function, {"which": 0})  # a value set on the call wins over the default
    report = assert_rewrite_matches(explicit, {"data": RNG.standard_normal((3, 5)).astype(np.float32),
                                               "indices": np.array([2, 0])})
    assert report.rewritten == 1


def test_gather_in_an_if_inside_a_function_is_rewritten():
    """Regression: a gather in a subgraph of a model-local function was neither rewritten nor reported."""
    branch = helper.make_graph([helper.make_node("Gather", ["data", "indices"], ["picked"], name="in_if", axis=1)],
                               "branch", [], [value("picked", T.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Identity", ["data"], ["same"])], "other", [],
                              [value("same", T.FLOAT, None)])
    function = helper.make_function(
        "local", "MaybePick", ["data", "indices", "flag"], ["output"],
        [helper.make_node("If", ["flag"], ["output"], then_branch=branch, else_branch=other)],
        [helper.make_opsetid("", 17)])
    model = call_model(function, extra_inputs=[value("flag", T.BOOL, [])])
    data = RNG.standard_normal((3, 5)).astype(np.float32)
    report = assert_rewrite_matches(model, {"data": data, "indices": np.array([4, 0]), "flag": np.array(True)})
    assert (report.rewritten, report.left) == (1, 0), report.table()


def test_gather_in_a_function_no_node_calls_is_reported():
    function = helper.make_function("local", "Unused", ["t", "i"], ["o"],
                                    [helper.make_node("Gather", ["t", "i"], ["o"], name="unused_gather")],
                                    [helper.make_opsetid("", 17)])
    model = make_model([helper.make_node("Identity", ["x"], ["y"])], [value("x", T.FLOAT, [2])],
                       [value("y", T.FLOAT, [2])])
    model.functions.append(function)
    rewritten, report = rewrite_model(model)
    # onnx's inliner drops a selected function that no node calls; one it keeps would be reported
    assert report.left == 1 and "no node calls" in report.outcomes[0].reason or \
        (report.outcomes == [] and not rewritten.functions)


# ---- types kept ------------------------------------------------------------------------------------------

def test_scan_body_output_declared_without_a_shape():
    """Regression: ORT's Scan requires shapes for every body output, and inferred none through the custom
    op ("Subgraph must have the shape set for all outputs"); the replaced output's value_info gives it."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["row", "col"], ["element"], name="in_scan", axis=0),
         helper.make_node("Add", ["acc", "element"], ["acc_out"]), helper.make_node("Identity", ["element"], ["each"])],
        "scan", [value("acc", T.FLOAT, []), value("row", T.FLOAT, [3])],
        [value("acc_out", T.FLOAT, None), value("each", T.FLOAT, None)])
    model = make_model([helper.make_node("Scan", ["zero", "table"], ["total", "all"], body=body, num_scan_inputs=1)],
                       [value("table", T.FLOAT, ["n", 3])], [value("total", T.FLOAT, None), value("all", T.FLOAT, None)],
                       [numpy_helper.from_array(np.array(0, np.float32), "zero"),
                        numpy_helper.from_array(np.array(2, np.int64), "col")])
    report = assert_rewrite_matches(model, {"table": RNG.standard_normal((4, 3)).astype(np.float32)})
    assert report.rewritten == 1


def test_onnx_understands_rewritten_models_and_a_second_rewrite_is_a_no_op():
    for model in (stft_model(), strip_shapes(stft_model())):
        rewritten, _ = rewrite_model(model)
        inferred = onnx.shape_inference.infer_shapes(rewritten, strict_mode=True)
        if model.graph.output[0].type.tensor_type.HasField("shape"):  # the checker wants output shapes
            onnx.checker.check_model(inferred, full_check=True)
        types = {v.name: v.type.tensor_type for v in (*inferred.graph.value_info, *inferred.graph.output)}
        assert types["one_bin"].elem_type == T.FLOAT and types["one_bin"].HasField("shape")
        twice, report = rewrite_model(rewritten)
        assert report.outcomes == [] and twice.SerializeToString() == rewritten.SerializeToString()


def test_schema_shape_inference_uses_the_geometry_rules():
    from gathermultiaxis.ops.contract import DATA_TYPES, DOMAIN, OP_TYPE
    from gathermultiaxis.graphs import schema

    constraints = {c.type_param_str: set(c.allowed_type_strs) for c in onnx.defs.get_schema(OP_TYPE, 1, DOMAIN).type_constraints}
    assert constraints["T"] == {f"tensor({T.DataType.Name(t).lower()})" for t in DATA_TYPES}
    schema.register_schema()  # again: nothing happens
    node = helper.make_node(OP_TYPE, ["x", "i", "axes"], ["y"], domain=DOMAIN, mode="error")
    model = make_model([node], [value("x", T.FLOAT, [4, 5, 1]), value("i", T.INT64, [1, "n", 6])],
                       [value("y", T.FLOAT, [None] * 3)], [numpy_helper.from_array(np.array([0, 2]), "axes")],
                       extra_opsets=[helper.make_opsetid(DOMAIN, 1)])
    out = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph.output[0].type.tensor_type
    assert [d.dim_value if d.HasField("dim_value") else None for d in out.shape.dim] == [1, 5, 3]


# ---- no data-propagation blow-up -------------------------------------------------------------------------

def test_a_large_static_index_costs_no_gigabytes(tmp_path):
    """Regression: shape inference with data propagation materialised a 1e8-element Constant index
    (+6.2 GB). Here 2e7 elements (160 MB; main: +3.2 GB): the rewrite, in a child process, may add at most
    256 MiB to the peak RSS the model itself set."""
    script = textwrap.dedent("""
        import resource, numpy as np
        from onnx import helper, numpy_helper, TensorProto as T
        from gathermultiaxis.graphs import rewrite_model
        index = numpy_helper.from_array(np.zeros(20_000_000, np.int64), "")
        nodes = [helper.make_node("Constant", [], ["idx"], value=index),
                 helper.make_node("Gather", ["x", "idx"], ["y"], axis=0)]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [3])],
                                  [helper.make_tensor_value_info("y", T.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
        del index
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        _, report = rewrite_model(model)
        assert report.rewritten == 1, report.table()
        print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    before, peak = map(int, result.stdout.split()[-2:])
    print(f"peak RSS {before} MiB before the rewrite, {peak} MiB after")
    assert peak - before < 256


# ---- com.microsoft ops that ORT's optimizers write -----------------------------------------------------

def contrib_model():
    """FastGelu and SkipLayerNormalization (com.microsoft): ONNX's inference knows neither."""
    ms = "com.microsoft"
    nodes = [helper.make_node("FastGelu", ["x"], ["gelu"], domain=ms),
             helper.make_node("SkipLayerNormalization", ["gelu", "skip", "gamma", "beta"], ["normed"], domain=ms,
                              epsilon=1e-5),
             helper.make_node("Gather", ["normed", "rows"], ["picked"], name="pick", axis=1),
             helper.make_node("GatherElements", ["gelu", "order"], ["sorted"], name="reorder", axis=2)]
    inits = [numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32), "gamma"),
             numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32), "beta"),
             numpy_helper.from_array(np.array([2, 0, -1]), "rows")]
    return make_model(nodes, [value("x", T.FLOAT, ["b", "s", 8]), value("skip", T.FLOAT, ["b", "s", 8]),
                              value("order", T.INT64, ["b", "s", "k"])],
                      [value("picked", T.FLOAT, None), value("sorted", T.FLOAT, None)], inits,
                      extra_opsets=[helper.make_opsetid(ms, 1)])


@pytest.mark.parametrize("layers", ["all", "without ORT's symbolic inference", "without the rank rules"])
def test_ranks_through_com_microsoft_ops(layers, monkeypatch):
    """Layers 2 and 3 each find these ranks on their own."""
    from gathermultiaxis.graphs.rewrite import rank_layers
    from gathermultiaxis.graphs.ranks.symbolic_ranks import SymbolicInference

    if layers == "without ORT's symbolic inference":
        monkeypatch.setattr(rank_layers, "symbolic_inference", lambda light: SymbolicInference({}))
    if layers == "without the rank rules":
        monkeypatch.setattr(rank_layers, "apply_rank_rule", lambda node, inputs, constants, rules: None)
    x = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    feeds = {"x": x, "skip": RNG.standard_normal((2, 4, 8)).astype(np.float32),
             "order": RNG.integers(-8, 8, (2, 4, 5))}
    report = assert_rewrite_matches(contrib_model(), feeds)
    assert (report.rewritten, report.left) == (2, 0), report.table()
    rewritten, _ = rewrite_model(contrib_model())
    assert not any(n.op_type == "Size" for n in rewritten.graph.node)  # static alignment: ranks were found


@pytest.mark.parametrize("elem_type", [T.FLOAT16, T.STRING, T.BOOL, T.INT8], ids=T.DataType.Name)
@pytest.mark.parametrize("op_type", ["Gather", "GatherElements", "GatherND"])
def test_run_time_alignment_for_every_kind_of_type(op_type, elem_type):
    values = RNG.standard_normal((3, 4)) * 50
    data = {T.FLOAT16: values.astype(np.float16), T.STRING: values.astype(int).astype(str).astype(object),
            T.BOOL: values > 0, T.INT8: values.astype(np.int8)}[elem_type]
    attributes, indices = {"Gather": ({"axis": 1}, np.array([[3], [-1]])),  # blocks of 1: ORT's string bug
                           "GatherElements": ({"axis": 0}, np.array([[2, 0, 1, -1]])),
                           "GatherND": ({}, np.array([[2, 3], [0, 0], [1, -2]]))}[op_type]
    node = helper.make_node(op_type, ["data", "indices"], ["output"], **attributes)
    model = make_model([node], [value("data", elem_type, None), value("indices", T.INT64, None)],
                       [value("output", elem_type, None)], opset=13)
    report = assert_rewrite_matches(model, {"data": data, "indices": indices})
    assert report.rewritten == 1


def test_scan_body_gather_output_declared_without_a_shape_and_a_wrong_body_input_size():
    """Regression: the replaced node's output is the body output itself (no value_info can type it), and
    the body input declares 3 columns where the scan slices hold 5 (ORT does not enforce it)."""
    body = helper.make_graph([helper.make_node("GatherElements", ["row", "idx"], ["picked"], name="in_scan", axis=0)],
                             "scan", [value("row", T.FLOAT, [2, 3])], [value("picked", T.FLOAT, None)])
    model = make_model([helper.make_node("Scan", ["table"], ["all"], body=body, num_scan_inputs=1)],
                       [value("table", T.FLOAT, ["n", 2, "w"])], [value("all", T.FLOAT, None)],
                       [numpy_helper.from_array(np.array([[1, 0, 1], [0, 0, 1]], np.int64), "idx")])
    report = assert_rewrite_matches(model, {"table": RNG.standard_normal((3, 2, 5)).astype(np.float32)})
    assert report.rewritten == 1


@pytest.mark.parametrize("axis", [2, -3])
def test_run_time_alignment_refuses_an_axis_out_of_range(axis):
    """An axis out of range for the run-time rank is an error, as in ORT, never a wrapped-around axis."""
    from sessions import builtin_session

    node = helper.make_node("Gather", ["data", "indices"], ["output"], axis=axis)
    model = make_model([node], [value("data", T.FLOAT, None), value("indices", T.INT64, None)],
                       [value("output", T.FLOAT, None)])
    feeds = {"data": RNG.standard_normal((3, 4)).astype(np.float32), "indices": np.array([0, 1])}
    with pytest.raises(Exception):
        builtin_session(model).run(None, feeds)
    rewritten, report = rewrite_model(model)
    assert report.rewritten == 1
    with pytest.raises(Exception, match="out of range|differ|Invalid|invalid"):
        custom_session(rewritten).run(None, feeds)


def test_no_file_is_left_in_the_working_folder(tmp_path, monkeypatch):
    """ORT's SymbolicShapeInference.infer_shapes saves "sym_shape_infer_temp.onnx" into the working
    folder when its inference is incomplete (here: an op of a vendor domain nobody knows); the rewriter
    runs its steps without that. The rank stays unknown: the run-time alignment takes the gather."""
    monkeypatch.chdir(tmp_path)
    model = make_model([helper.make_node("Mystery", ["x"], ["y"], domain="vendor"),
                        helper.make_node("Gather", ["y", "i"], ["z"], axis=0)],
                       [value("x", T.FLOAT, [3, 4]), value("i", T.INT64, [2])], [value("z", T.FLOAT, None)],
                       extra_opsets=[helper.make_opsetid("vendor", 1)])
    model.graph.value_info.append(value("y", T.FLOAT, None))  # the element type, as exporters write it
    rewritten, report = rewrite_model(model)
    assert report.rewritten == 1 and list(tmp_path.iterdir()) == []
    assert any(n.op_type == "Range" for n in rewritten.graph.node)


def test_the_lowering_proves_records_with_the_rewrites_ranks():
    """Ranks only layers 2 and 3 find (outputs of com.microsoft ops) prove the rewrite's records too: every
    node lowers to the gather it replaced and runs as that builtin gather in the default session."""
    import gathermultiaxis
    from gathermultiaxis.graphs import lower_model

    rewritten, report = rewrite_model(contrib_model())
    assert (report.rewritten, report.runtime_aligned) == (2, 0), report.table()
    lowered, lowering = lower_model(rewritten)
    assert [(o.form, o.source) for o in lowering.outcomes] == [("Gather", "rewrite record"),
                                                                ("GatherElements", "rewrite record")]
    assert sorted(n.op_type for n in lowered.graph.node) == sorted(n.op_type for n in contrib_model().graph.node)
    session = gathermultiaxis.InferenceSession(rewritten.SerializeToString())
    assert session.builtin_gathers == 2
