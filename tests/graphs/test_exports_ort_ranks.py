"""Exports whose ranks only ORT's reading gives, built by the exporters their users use: TorchScript's
``nonzero(as_tuple=True)`` (a transformers Longformer with global attention: SplitToSequence with keepdims=0
and a scalar split), skl2onnx's KNNImputer (model-local functions at an older opset than the model's, If
nodes), and Loops with scan outputs. Each: no gather left, none aligned at run time unless only the run
time knows its rank, bit for bit against ORT's builtin kernels in the package's default session (ORT's
default options and optimizations off), on the kernel path and lowered, and rewrite then lower gives back
the original's op types and counts."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import onnx
import onnx.shape_inference
import onnxruntime as ort
import pytest
from support import assert_bit_identical

from gathermultiaxis import InferenceSession
from gathermultiaxis.graphs import lower_model, rewrite_model

PROVIDERS = ["CPUExecutionProvider"]


def op_counts(model: onnx.ModelProto) -> Counter:
    return Counter(node.op_type for node in model.graph.node if node.op_type != "Constant")


def options_off() -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


def assert_same(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_bit_identical(a, e)


def assert_exact_every_way(model, rewritten, feeds, ort_defaults: bool = True):
    """The rewrite against the original on ORT's builtin kernels: the default session (ORT's defaults when
    ``ort_defaults``, and optimizations off), the kernel path, and the lowered model, whose op types and
    counts are the original's."""
    want_off = ort.InferenceSession(model.SerializeToString(), options_off(), providers=PROVIDERS).run(None, feeds)
    if ort_defaults:
        want = ort.InferenceSession(model.SerializeToString(), providers=PROVIDERS).run(None, feeds)
        assert_same(InferenceSession(rewritten, providers=PROVIDERS).run(None, feeds), want)
    assert_same(InferenceSession(rewritten, options_off(), providers=PROVIDERS).run(None, feeds), want_off)
    kernel = InferenceSession(rewritten, options_off(), providers=PROVIDERS, run_builtin_gathers=False)
    assert_same(kernel.run(None, feeds), want_off)
    lowered, lowering = lower_model(rewritten)
    assert lowering.left == 0, lowering.table()
    assert_same(ort.InferenceSession(lowered.SerializeToString(), options_off(), providers=PROVIDERS).run(None, feeds),
                want_off)
    assert op_counts(lowered) == op_counts(model)


# ---- TorchScript nonzero(as_tuple=True): Longformer's global attention --------------------------------------

@pytest.fixture(scope="module")
def longformer(tmp_path_factory):
    """A tiny transformers Longformer (random weights) exported by TorchScript with a global attention mask;
    its first layer's ``nonzero(as_tuple=True)`` becomes SplitToSequence(axis=1, keepdims=0) of a scalar 1."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")
    torch.manual_seed(0)
    config = transformers.LongformerConfig(vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                           intermediate_size=32, attention_window=[4, 4], max_position_embeddings=64)
    inner = transformers.LongformerModel(config).eval()

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, global_attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              global_attention_mask=global_attention_mask).last_hidden_state

    names = ["input_ids", "attention_mask", "global_attention_mask"]
    ids = torch.randint(0, 100, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    global_mask = torch.zeros(2, 16, dtype=torch.int64)
    global_mask[:, 0] = 1
    path = tmp_path_factory.mktemp("longformer") / "longformer.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Encoder().eval(), (ids, mask, global_mask), str(path), opset_version=17, dynamo=False,
                          input_names=names, output_names=["hidden"],
                          dynamic_axes={name: {0: "batch", 1: "sequence"} for name in names})
    global_mask[1, 5] = 1  # run with another count of global tokens per row than exported
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "global_attention_mask": global_mask.numpy()}
    return onnx.load(str(path)), feeds


@pytest.mark.slow
def test_longformer_torchscript_nonzero_as_tuple(longformer):
    """Before: the Gathers reading the SplitToSequence's elements were aligned for rank 2 where ORT gives
    rank 1, and the kernel path failed ("axis 2 is not in valid range [-2,1]")."""
    model, feeds = longformer
    splits = [node for node in model.graph.node if node.op_type == "SplitToSequence"]
    assert splits and all(onnx.helper.get_attribute_value(a) == 0 for node in splits for a in node.attribute
                          if a.name == "keepdims")
    rewritten, report = rewrite_model(model)
    assert report.rewritten > 300 and report.left == 0, report.table()
    assert report.runtime_aligned == 0, report.table()
    assert_exact_every_way(model, rewritten, feeds, ort_defaults=False)


@pytest.mark.slow
def test_longformer_torchscript_under_ort_defaults(longformer):
    model, feeds = longformer
    rewritten, _ = rewrite_model(model)
    want = ort.InferenceSession(model.SerializeToString(), providers=PROVIDERS).run(None, feeds)
    assert_same(InferenceSession(rewritten, providers=PROVIDERS).run(None, feeds), want)


# ---- skl2onnx KNNImputer: model-local functions at an older opset than the model's -------------------------

@pytest.fixture(scope="module")
def knn_imputer():
    """skl2onnx writes KNNImputer's 9 local functions at opset 21 in a model at 22."""
    pytest.importorskip("sklearn", reason="scikit-learn is not installed (pip install scikit-learn)")
    skl2onnx = pytest.importorskip("skl2onnx", reason="skl2onnx is not installed (pip install skl2onnx)")
    from sklearn.impute import KNNImputer

    rng = np.random.default_rng(0)
    x = rng.random((20, 4)).astype(np.float32)
    x[rng.random(x.shape) < 0.2] = np.nan
    model = skl2onnx.to_onnx(KNNImputer(n_neighbors=3).fit(x), x[:1], target_opset=22)
    return model, {model.graph.input[0].name: x}


def different_rank_if_outputs(model: onnx.ModelProto) -> set[str]:
    """The outputs of If nodes (in any graph) whose branches give different ranks by ONNX's inference."""
    from gathermultiaxis.graphs.ir.walk import node_holders

    def rank(graph, name):
        for value in (*graph.value_info, *graph.output):
            if value.name == name and value.type.tensor_type.HasField("shape"):
                return len(value.type.tensor_type.shape.dim)
        return None

    found = set()
    for holder in node_holders(onnx.shape_inference.infer_shapes(model, strict_mode=False)):
        for node in (n for n in holder.node if n.op_type == "If"):
            branches = {a.name: a.g for a in node.attribute}
            then, other = branches["then_branch"], branches["else_branch"]
            found.update(name for k, name in enumerate(node.output)
                         if rank(then, then.output[k].name) != rank(other, other.output[k].name))
    return found


@pytest.mark.slow
def test_knn_imputer_functions_at_an_older_opset(knn_imputer):
    """Before: 22 of 23 gathers left ("Model has functions with incompatible opset versions"). Each inlined
    call holds an If whose branches give ranks 3 and 2 (a Gather of the donors, or the distances as they
    are): the gathers computed from it are aligned at run time, since only the condition tells the rank."""
    from gathermultiaxis.graphs.passes import pass_copy
    from gathermultiaxis.graphs.sources.registry import GATHER_OPS

    model, feeds = knn_imputer
    assert {o.version for f in model.functions for o in f.opset_import if o.domain in ("", "ai.onnx")} == {21}
    rewritten, report = rewrite_model(model)
    assert report.left == 0 and report.rewritten > 80, report.table()
    # the original with its functions inlined, as the rewrite reads it: what the lowering gives back
    inlined, failure = pass_copy(model, lambda node: node.op_type in GATHER_OPS and node.domain in ("", "ai.onnx"))
    assert failure == ""
    undecided = different_rank_if_outputs(inlined)
    assert undecided
    aligned = [o for o in report.outcomes if o.runtime_aligned]
    assert aligned and all(any(repr(name) in o.reason for name in undecided) for o in aligned), report.table()
    assert_exact_every_way(inlined, rewritten, feeds)
    want = ort.InferenceSession(model.SerializeToString(), options_off(), providers=PROVIDERS).run(None, feeds)
    assert_same(InferenceSession(rewritten, options_off(), providers=PROVIDERS, run_builtin_gathers=False).run(
        None, feeds), want)


# ---- Loop scan outputs, and bodies reading constants of the enclosing graph ----------------------------------

def viterbi_scan_model() -> onnx.ModelProto:
    """A CRF Viterbi decode written with onnx.helper at opset 21: the forward Loop's bodies read their axes
    from the main graph's initializers and give the backpointers as a scan output, which the main graph
    gathers and the backtrace Loop's body gathers from the enclosing graph."""
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    def tensor(name, values, dtype=np.int64):
        return numpy_helper.from_array(np.array(values, dtype), name)

    forward = helper.make_graph([
        helper.make_node("Add", ["i", "one"], ["t"]),
        helper.make_node("Gather", ["emissions", "t"], ["e_t"], axis=0),
        helper.make_node("Unsqueeze", ["score_in", "axis2"], ["score3"]),
        helper.make_node("Add", ["score3", "transitions"], ["total"]),
        helper.make_node("ReduceMax", ["total", "axis1"], ["best"], keepdims=0),
        helper.make_node("ArgMax", ["total"], ["pointer"], axis=1, keepdims=0),
        helper.make_node("Add", ["best", "e_t"], ["score_out"]),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    ], "forward", [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
                   helper.make_tensor_value_info("score_in", T.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("score_out", T.FLOAT, None),
         helper.make_tensor_value_info("pointer", T.INT64, None)])
    backtrace = helper.make_graph([
        helper.make_node("Sub", ["last_step", "j"], ["step"]),
        helper.make_node("Gather", ["pointers", "step"], ["bp"], axis=0),
        helper.make_node("GatherElements", ["bp", "tag_in"], ["tag_out"], axis=1),
        helper.make_node("Identity", ["tag_out"], ["tag_scan"]),
        helper.make_node("Identity", ["cond2_in"], ["cond2_out"]),
    ], "backtrace", [helper.make_tensor_value_info("j", T.INT64, []), helper.make_tensor_value_info("cond2_in", T.BOOL, []),
                     helper.make_tensor_value_info("tag_in", T.INT64, ["batch", 1])],
        [helper.make_tensor_value_info("cond2_out", T.BOOL, []), helper.make_tensor_value_info("tag_out", T.INT64, None),
         helper.make_tensor_value_info("tag_scan", T.INT64, None)])
    nodes = [
        helper.make_node("Shape", ["emissions"], ["shape"], start=0, end=1),
        helper.make_node("Squeeze", ["shape"], ["steps"]),
        helper.make_node("Sub", ["steps", "one"], ["trips"]),
        helper.make_node("Sub", ["trips", "one"], ["last_step"]),
        helper.make_node("Gather", ["emissions", "zero"], ["score0"], axis=0),
        helper.make_node("Loop", ["trips", "true", "score0"], ["score", "pointers"], body=forward),
        helper.make_node("ArgMax", ["score"], ["last_tag"], axis=1, keepdims=1),
        helper.make_node("Loop", ["trips", "true", "last_tag"], ["first_tag", "path"], body=backtrace),
        helper.make_node("Gather", ["pointers", "ends"], ["end_pointers"], axis=0),
        helper.make_node("ReduceMax", ["score", "axis1"], ["best_score"], keepdims=0),
    ]
    rng = np.random.default_rng(0)
    initializers = [tensor("transitions", rng.standard_normal((6, 6)), np.float32), tensor("one", 1), tensor("zero", 0),
                    tensor("axis1", [1]), tensor("axis2", [2]), tensor("ends", [0, -1]), tensor("true", True, np.bool_)]
    graph = helper.make_graph(nodes, "viterbi", [helper.make_tensor_value_info("emissions", T.FLOAT, ["steps", "batch", 6])],
                              [helper.make_tensor_value_info(name, elem, None) for name, elem in (
                                  ("path", T.INT64), ("first_tag", T.INT64), ("end_pointers", T.INT64),
                                  ("best_score", T.FLOAT))], initializers)
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("steps", [12, 3])
def test_loop_scan_output_read_in_the_main_graph_and_a_body(steps):
    """Before: the forward body's Unsqueeze read its axes from the main graph, which ONNX's inference of a
    body does not see, so neither the backpointers nor the Loop's scan output had a rank, and the gathers
    reading them (one in the main graph, one in the backtrace body) were aligned at run time."""
    model = viterbi_scan_model()
    feeds = {"emissions": np.random.default_rng(steps).standard_normal((steps, 2, 6)).astype(np.float32)}
    rewritten, report = rewrite_model(model)
    assert (report.rewritten, report.left, report.runtime_aligned) == (5, 0, 0), report.table()
    assert_exact_every_way(model, rewritten, feeds)
