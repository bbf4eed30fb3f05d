"""Rank knowledge from every source ORT enforces (issue 17): initializer dims, Constant values and graph
input ranks are facts that no value_info entry hides; inference on the original model is used as far as
it goes; a declared value_info rank only where inference agrees or says nothing; and a run-time
alignment says, node by node, why no rank was known. Each case against ORT's builtin gathers."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from sessions import assert_rewrite_matches
from support import make_model

from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.conformance.roundtrip import check_lowered

T = TensorProto
RNG = np.random.default_rng(17)


def value(name, elem_type, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def runtime_aligned(model):
    """Nodes only a run-time alignment emits (its ranks are Size(Shape(x)))."""
    return sum(node.op_type == "Size" for node in model.graph.node)


def embedding_model(declare_table=True, table_value_info_shape=(10, 4)):
    """The issue's reproduction: initializer ``table`` [10, 4], graph input ``ids`` [N], Gather(table, ids),
    and (as the dynamo exporter and onnxruntime-genai write it) a value_info entry for ``table``."""
    table = numpy_helper.from_array(RNG.standard_normal((10, 4)).astype(np.float32), "table")
    model = make_model([helper.make_node("Gather", ["table", "ids"], ["rows"], name="embed", axis=0)],
                       [value("ids", T.INT64, ["N"])], [value("rows", T.FLOAT, ["N", 4])], [table])
    if declare_table:
        model.graph.value_info.append(value("table", T.FLOAT, table_value_info_shape))
    return model


@pytest.mark.parametrize("declared", [(10, 4), None, (3,), ("a", "b", "c")],
                         ids=["full type and shape", "type only", "stale rank 1", "stale rank 3"])
def test_a_value_info_of_an_initializer_never_hides_its_dims(declared):
    from gathermultiaxis import InferenceSession

    model = embedding_model(table_value_info_shape=declared)
    rewritten, report = rewrite_model(model)
    assert (report.rewritten, report.left, report.runtime_aligned) == (1, 0, 0), report.table()
    assert runtime_aligned(rewritten) == 0
    ids = np.array([3, 0, 9, -1, 3])
    assert_rewrite_matches(model, {"ids": ids})
    session = InferenceSession(rewritten.SerializeToString(), run_builtin_gathers=False)
    assert session.bound_tables > 0
    np.testing.assert_array_equal(session.run(None, {"ids": ids})[0],
                                  numpy_helper.to_array(model.graph.initializer[0])[ids])


def test_a_value_info_of_a_constant_output_or_graph_input_never_hides_its_rank():
    nodes = [helper.make_node("Constant", [], ["table"], value=numpy_helper.from_array(
                 RNG.standard_normal((6, 2, 3)).astype(np.float32), "")),
             helper.make_node("Gather", ["table", "ids"], ["rows"], name="from_constant", axis=1),
             helper.make_node("GatherElements", ["x", "order"], ["sorted"], name="from_input", axis=1)]
    model = make_model(nodes, [value("ids", T.INT64, ["N"]), value("x", T.FLOAT, ["b", 5]),
                               value("order", T.INT64, ["b", 5])],
                       [value("rows", T.FLOAT, None), value("sorted", T.FLOAT, None)])
    model.graph.value_info.extend([value("table", T.FLOAT, None), value("x", T.FLOAT, None),
                                   value("order", T.INT64, [1])])
    rewritten, report = rewrite_model(model)
    assert (report.rewritten, report.runtime_aligned) == (2, 0), report.table()
    assert_rewrite_matches(model, {"ids": np.array([1, 0, -1]), "x": RNG.standard_normal((2, 5)).astype(np.float32),
                                   "order": RNG.integers(-5, 5, (2, 5))})


def test_a_declared_rank_is_used_where_inference_says_nothing():
    """A vendor op no inference knows: its output's declared rank (not its sizes) aligns statically."""
    model = make_model([helper.make_node("Relu", ["x"], ["h"]),
                        helper.make_node("Mystery", ["h"], ["y"], domain="vendor"),
                        helper.make_node("Gather", ["y", "i"], ["z"], name="after_vendor", axis=1)],
                       [value("x", T.FLOAT, [3, 4]), value("i", T.INT64, [2])], [value("z", T.FLOAT, None)],
                       extra_opsets=[helper.make_opsetid("vendor", 1)])
    model.graph.value_info.append(value("y", T.FLOAT, [7, 7]))  # a stale size, a right rank
    rewritten, report = rewrite_model(model)
    assert (report.rewritten, report.runtime_aligned) == (1, 0), report.table()
    assert runtime_aligned(rewritten) == 0


def test_inference_wins_over_a_stale_declared_rank():
    """value_info says rank 1 where inference knows rank 2: inference decides (bit-exact on ORT)."""
    model = make_model([helper.make_node("Relu", ["x"], ["data"]),
                        helper.make_node("Gather", ["data", "i"], ["z"], name="pick", axis=1)],
                       [value("x", T.FLOAT, ["a", "b"]), value("i", T.INT64, ["n"])], [value("z", T.FLOAT, None)])
    model.graph.value_info.append(value("data", T.FLOAT, ["k"]))
    report = assert_rewrite_matches(model, {"x": RNG.standard_normal((3, 4)).astype(np.float32),
                                            "i": np.array([3, -1])})
    assert (report.rewritten, report.runtime_aligned) == (1, 0), report.table()


def test_a_run_time_alignment_says_why_no_rank_was_known():
    model = make_model([helper.make_node("Mystery", ["x"], ["y"], domain="vendor", name="mystery"),
                        helper.make_node("Relu", ["y"], ["h"]),
                        helper.make_node("Gather", ["h", "i"], ["z"], name="late", axis=0)],
                       [value("x", T.FLOAT, [3, 4]), value("i", T.INT64, [2])], [value("z", T.FLOAT, None)],
                       extra_opsets=[helper.make_opsetid("vendor", 1)])
    model.graph.value_info.append(value("y", T.FLOAT, None))  # the element type, as exporters write it
    _, report = rewrite_model(model)
    (outcome,) = report.outcomes
    assert outcome.rewritten and outcome.runtime_aligned, report.table()
    assert "'h'" in outcome.reason and "vendor.Mystery" in outcome.reason and "'mystery'" in outcome.reason
    assert report.runtime_aligned == 1 and report.as_dict()["runtime_aligned"] == 1
    assert "run time" in report.table() and "vendor.Mystery" in report.table()


# ---- run-time alignment at every opset >= 7 ---------------------------------------------------------------

def unknown_rank_gather_model(opset, axis):
    """Gather(Reshape(x, shape), indices): the data's rank is the run-time length of ``shape``, so no
    layer knows it. The outputs (Flatten of the result, and its Shape) have static ranks, for the checker."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["data"]),
             helper.make_node("Reshape", ["i", "indices_shape"], ["indices"]),
             helper.make_node("Gather", ["data", "indices"], ["gathered"], name="gather", axis=axis),
             helper.make_node("Flatten", ["gathered"], ["values"], axis=0),
             helper.make_node("Shape", ["gathered"], ["dims"])]
    return make_model(nodes, [value("x", T.FLOAT, ["n"]), value("shape", T.INT64, ["r"]),
                              value("i", T.INT64, ["m"]), value("indices_shape", T.INT64, ["s"])],
                      [value("values", T.FLOAT, [1, None]), value("dims", T.INT64, [None])], opset=opset,
                      ir_version=7)


@pytest.mark.parametrize("opset", [7, 8, 9, 11, 12])
@pytest.mark.parametrize("axis", [0, 2, -1, -3])
def test_run_time_alignment_below_opset_13(opset, axis):
    """Below opset 13 Unsqueeze/Squeeze take no axes input: Reshapes to computed shapes align the ranks."""
    model = unknown_rank_gather_model(opset, axis)
    rewritten, report = rewrite_model(model)
    assert (report.rewritten, report.runtime_aligned) == (1, 1), report.table()
    assert not any(n.op_type == "Gather" for n in rewritten.graph.node)
    try:
        onnx.checker.check_model(rewritten, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        # Opset 7/8's Constant holds no int64 (graphs/builder.py's constants, fixed apart from this issue):
        # that must be the only complaint.
        assert opset < 9 and "Constant" in str(error) and "tensor(int64)" in str(error), error
    for shape, indices in [((3, 4, 2), np.array([1, -1, 0])), ((2, 3, 2, 2), np.array(1)),
                           ((0, 3, 2), np.array([1, 0]) if axis % 3 else np.zeros(0, np.int64)),
                           ((2, 3, 4), np.zeros((0, 2), np.int64))]:
        x = RNG.standard_normal(int(np.prod(shape))).astype(np.float32)
        assert_rewrite_matches(model, {"x": x, "shape": np.array(shape), "i": indices.reshape(-1),
                                       "indices_shape": np.array(indices.shape, np.int64)})


@pytest.mark.parametrize("opset", [7, 11, 13])
def test_run_time_alignment_refuses_an_axis_below_minus_rank(opset):
    """As ORT does: an error, never a wrapped-around axis."""
    from sessions import builtin_session, custom_session

    model = unknown_rank_gather_model(opset, -4)
    feeds = {"x": RNG.standard_normal(12).astype(np.float32), "shape": np.array([3, 4]), "i": np.array([0]),
             "indices_shape": np.array([1])}
    with pytest.raises(Exception):
        builtin_session(model).run(None, feeds)
    rewritten, report = rewrite_model(model)
    assert report.runtime_aligned == 1
    with pytest.raises(Exception):
        custom_session(rewritten).run(None, feeds)


def dlrm_model(opset):
    """A TorchScript DLRM-style export: two EmbeddingBags (each a Loop of gathers over the bags) and a
    dense layer."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    import io
    import warnings

    class DLRM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.bags = torch.nn.ModuleList([torch.nn.EmbeddingBag(20, 4, mode=mode) for mode in ("sum", "mean")])
            self.dense = torch.nn.Linear(3, 4)

        def forward(self, dense, ids0, offsets0, ids1, offsets1):
            return torch.cat([self.dense(dense), self.bags[0](ids0, offsets0), self.bags[1](ids1, offsets1)], 1)

    args = (torch.randn(2, 3), torch.tensor([1, 2, 4, 5]), torch.tensor([0, 3]), torch.tensor([7, 8]),
            torch.tensor([0, 1]))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(DLRM().eval(), args, buffer, dynamo=False, opset_version=opset,
                          input_names=["dense", "ids0", "offsets0", "ids1", "offsets1"],
                          dynamic_axes={"dense": {0: "B"}, "ids0": {0: "n0"}, "offsets0": {0: "B"},
                                        "ids1": {0: "n1"}, "offsets1": {0: "B"}})
    return onnx.load_model_from_string(buffer.getvalue())


def without_declared_shapes(model):
    """Unknown ranks everywhere a model may leave them unknown: graph inputs and outputs, value_info,
    subgraph outputs (ORT's Loop wants shapes for its body's inputs)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    pending = [model.graph]
    while pending:
        graph = pending.pop()
        del graph.value_info[:]
        for v in (*(graph.input if graph is model.graph else ()), *graph.output):
            v.type.tensor_type.ClearField("shape")
        pending.extend(a.g for n in graph.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
    return model


def all_op_types(graph):
    for node in graph.node:
        yield node.op_type
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from all_op_types(attribute.g)


@pytest.mark.parametrize("shapes", ["as exported", "unknown ranks everywhere"])
def test_dlrm_embedding_bags_at_opset_11(shapes):
    """Main left 4 of 10 gathers (in the Loop bodies: "a run-time alignment needs opset 13"). As exported,
    every rank is known now (the Loop's iteration number is a scalar by the Loop spec); with no declared
    shape at all, the Reshape form of the run-time alignment takes the rest."""
    model = dlrm_model(11)
    if shapes != "as exported":
        model = without_declared_shapes(model)
    rewritten, report = rewrite_model(model)
    assert (report.rewritten, report.left) == (10, 0), report.table()
    assert "Gather" not in set(all_op_types(rewritten.graph))
    assert (report.runtime_aligned == 0) == (shapes == "as exported"), report.table()
    for batch, (n0, n1) in [(2, (4, 2)), (3, (7, 3)), (1, (1, 5))]:
        offsets0 = np.sort(np.concatenate([[0], RNG.integers(0, n0 + 1, batch - 1)]))
        offsets1 = np.sort(np.concatenate([[0], RNG.integers(0, n1 + 1, batch - 1)]))
        feeds = {"dense": RNG.standard_normal((batch, 3)).astype(np.float32), "ids0": RNG.integers(0, 20, n0),
                 "offsets0": offsets0, "ids1": RNG.integers(0, 20, n1), "offsets1": offsets1}
        assert_rewrite_matches(model, feeds)
        lowered = check_lowered(model, feeds)  # rewrite, lower (Loop bodies too), plain ORT: bit-exact
        assert (lowered.verdict, lowered.left) == ("passed", 0), lowered.detail


# ---- gathers inside other domains' ops are rows of the report ----------------------------------------------

def test_gathers_inside_com_microsoft_ops_are_rows_of_the_report():
    """EmbedLayerNormalization (ORT's transformers optimizer) gathers three embeddings inside one kernel;
    GatherBlockQuantized (onnxruntime-genai's int4 tied embeddings) gathers quantized blocks."""
    ms = "com.microsoft"
    tables = {name: numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)
              for name, shape in [("words", (30, 8)), ("positions", (16, 8)), ("segments", (2, 8)),
                                  ("gamma", (8,)), ("beta", (8,)), ("scales", (30, 1))]}
    packed = numpy_helper.from_array(RNG.integers(0, 255, (30, 4), dtype=np.uint8), "packed")
    nodes = [helper.make_node("EmbedLayerNormalization", ["ids", "segment_ids", "words", "positions", "segments",
                                                          "gamma", "beta"], ["embedded", "mask_index"],
                              domain=ms, name="embed", epsilon=1e-5),
             helper.make_node("GatherBlockQuantized", ["packed", "ids64", "scales"], ["dequantized"], domain=ms,
                              name="tied", block_size=16, gather_axis=0, quantize_axis=1, bits=4),
             helper.make_node("Gather", ["embedded", "pick"], ["picked"], name="plain", axis=1)]
    model = make_model(nodes, [value("ids", T.INT32, ["b", "s"]), value("segment_ids", T.INT32, ["b", "s"]),
                               value("ids64", T.INT64, ["n"])],
                       [value("picked", T.FLOAT, None), value("dequantized", T.FLOAT, None)],
                       [*tables.values(), packed, numpy_helper.from_array(np.array([0, -1]), "pick")],
                       extra_opsets=[helper.make_opsetid(ms, 1)])
    rewritten, report = rewrite_model(model)
    rows = {o.op_type: o for o in report.outcomes}
    assert report.counts() == {"Gather": {"rewritten": 1, "left": 0},
                               "com.microsoft.EmbedLayerNormalization": {"rewritten": 0, "left": 1},
                               "com.microsoft.GatherBlockQuantized": {"rewritten": 0, "left": 1}}
    assert rows["com.microsoft.GatherBlockQuantized"].reason.startswith(
        "inside com.microsoft.GatherBlockQuantized: not rewritten, ")
    assert "inside com.microsoft.EmbedLayerNormalization: not rewritten" in report.table()
    assert report.as_dict()["left"] == 2
    feeds = {"ids": RNG.integers(0, 30, (2, 5)).astype(np.int32), "segment_ids": RNG.integers(0, 2, (2, 5)).astype(
        np.int32), "ids64": np.array([3, 29, 0])}
    assert_rewrite_matches(model, feeds)


# ---- dynamo exports: every rank static (slow: each export takes 10-30 s) ---------------------------------

def dynamo_export(name):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")
    pytest.importorskip("onnxscript", reason="onnxscript is not installed (torch's dynamo exporter needs it)")
    import logging
    import warnings

    small = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128, vocab_size=1000)
    torch.manual_seed(0)
    if name == "roberta":
        model = transformers.RobertaModel(transformers.RobertaConfig(max_position_embeddings=66, **small))
    else:  # DeBERTa-v2's relative attention: GatherElements of c2p/p2c scores by relative positions
        model = transformers.DebertaV2Model(transformers.DebertaV2Config(
            max_position_embeddings=64, relative_attention=True, position_buckets=16, pos_att_type=["p2c", "c2p"],
            **small))

    class FirstOutput(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model.eval()

        def forward(self, input_ids):
            return self.model(input_ids).last_hidden_state

    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.onnx.export(FirstOutput(), (torch.randint(0, 1000, (2, 7)),), dynamo=True,
                                     verbose=False).model_proto
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["roberta", "deberta-v2"])
def test_dynamo_exports_need_no_run_time_alignment(name):
    """Main aligned 4 (RoBERTa) and 1 (DeBERTa-v2) gathers at run time, and with runtime_alignment=False
    (rewrite --static-ranks-only, for lowering) left them, GatherElements among them ("the rank of the
    input and of the indices is not known"): the initializers' value_info entries hid their dims."""
    from gathermultiaxis import InferenceSession

    model = dynamo_export(name)
    assert any(value.name in {init.name for init in model.graph.initializer} for value in model.graph.value_info)
    rewritten, report = rewrite_model(model, runtime_alignment=False)
    assert report.left == 0 and report.runtime_aligned == 0, report.table()
    assert InferenceSession(rewritten.SerializeToString(), run_builtin_gathers=False).bound_tables > 0
    feeds = {model.graph.input[0].name: RNG.integers(0, 1000, (2, 7))}
    assert_rewrite_matches(model, feeds)
    lowered = check_lowered(model, feeds)  # rewrite, lower, plain ORT: bit-exact with the original
    assert (lowered.verdict, lowered.left) == ("passed", 0), lowered.detail


@pytest.mark.parametrize("opset", [11, 12])
@pytest.mark.parametrize("op_type, attributes, data_shape, indices",
                         [("Gather", {"axis": 0}, (2, 0, 0), np.array([1])),
                          ("Gather", {"axis": -1}, (0, 3, 0, 2), np.zeros((0, 2), np.int64)),
                          ("GatherND", {}, (1, 1, 0, 1, 2), np.zeros((1, 0, 1), np.int64)),
                          ("GatherElements", {"axis": 1}, (0, 3, 0), np.zeros((0, 2, 0), np.int64))],
                         ids=["gather", "gather-empty-indices", "gather-nd", "gather-elements"])
def test_run_time_alignment_below_opset_13_of_tensors_with_several_size_0_dimensions(opset, op_type, attributes,
                                                                                    data_shape, indices):
    """Reshape's 0 copies an input dimension: a computed shape's 0s must stay sizes (regression: the fuzz
    case GatherND-12 data [1, 1, 0, 1, 2], indices [1, 0, 1] raised in the rewrite's Reshape)."""
    model = make_model([helper.make_node(op_type, ["data", "indices"], ["output"], **attributes)],
                       [value("data", T.FLOAT, None), value("indices", T.INT64, None)],
                       [value("output", T.FLOAT, None)], opset=opset)
    report = assert_rewrite_matches(model, {"data": np.zeros(data_shape, np.float32), "indices": indices})
    assert report.runtime_aligned == 1


@pytest.mark.parametrize("opset, batch_dims, data_shape, indices_shape",
                         [(opset, 0, (2, 3), (4, 0)) for opset in (11, 12, 13, 17)]
                         + [(opset, 0, (2, 3, 2), (2, 5, 0)) for opset in (11, 12, 13, 17)]
                         + [(opset, 1, (2, 3, 4), (2, 3, 0)) for opset in (12, 13, 17)])  # batch_dims: from 12
def test_run_time_aligned_gather_nd_with_no_coordinate(opset, batch_dims, data_shape, indices_shape):
    """Indices [..., 0] read whole slices (k = 0). With no rank known, the run-time alignment squeezed the
    size-0 coordinate dimension and the rewritten model failed ("Dimension of input 3 must be 1 instead
    of 0"); the lowered model must agree too."""
    attributes = {"batch_dims": batch_dims} if opset >= 12 else {}
    model = make_model([helper.make_node("GatherND", ["data", "indices"], ["output"], **attributes)],
                       [value("data", T.FLOAT, None), value("indices", T.INT64, None)],
                       [value("output", T.FLOAT, None)], opset=opset)
    feeds = {"data": RNG.standard_normal(data_shape).astype(np.float32),
             "indices": np.zeros(indices_shape, np.int64)}
    report = assert_rewrite_matches(model, feeds)
    assert report.runtime_aligned == 1
    lowered = check_lowered(model, feeds)
    assert (lowered.verdict, lowered.left) == ("passed", 0), lowered.detail
