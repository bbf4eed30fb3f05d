"""Tiny transformers models (random weights from a config, no download) exported by TorchScript: the rewrite's
value_info leaves ORT's fusions as they were (Longformer), and rewrite then lower gives back the original's
gathers where their indices come through a long computation (Funnel's and BigBird's GatherElements)."""

from __future__ import annotations

import collections
import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from support import assert_bit_identical

import gathermultiaxis
from gathermultiaxis.graphs import lower_model, rewrite_model


def export(name: str, sequence: int) -> onnx.ModelProto:
    """``name`` ("longformer", "funnel", "bigbird") from a tiny config, exported with dynamic batch and sequence."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")
    configs = {
        "longformer": lambda: transformers.LongformerModel(transformers.LongformerConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
            attention_window=[4], max_position_embeddings=64)),
        "funnel": lambda: transformers.FunnelModel(transformers.FunnelConfig(
            vocab_size=100, d_model=32, n_head=2, d_head=16, d_inner=64, block_sizes=[1, 1], num_decoder_layers=1)),
        "bigbird": lambda: transformers.BigBirdModel(transformers.BigBirdConfig(  # block-sparse over 18 tokens
            vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
            attention_type="block_sparse", block_size=2, num_random_blocks=2, max_position_embeddings=128)),
    }

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    torch.manual_seed(0)
    module = LastHiddenState(configs[name]()).eval()
    inputs = (torch.randint(0, 100, (2, sequence)), torch.ones(2, sequence, dtype=torch.int64))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, buffer, opset_version=17, dynamo=False,
                          input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                        "attention_mask": {0: "batch", 1: "sequence"}})
    return onnx.load_from_string(buffer.getvalue())


def feeds(sequence: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(sequence)
    return {"input_ids": rng.integers(0, 100, (2, sequence)), "attention_mask": np.ones((2, sequence), np.int64)}


def optimized_by_ort(model: onnx.ModelProto, tmp_path, inputs) -> tuple[np.ndarray, collections.Counter]:
    """ORT's default session on ``model``: its output, and the op types of the graph it optimized to."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    output = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, inputs)
    optimized = onnx.load(options.optimized_model_filepath)
    return output[0], collections.Counter((node.domain, node.op_type) for node in optimized.graph.node)


@pytest.mark.slow
def test_the_rewrites_value_info_leaves_orts_fusions_as_they_were(tmp_path):
    """Longformer: ONNX's inference gives some gather outputs sizes and shared ``dim_param`` names ORT's does not
    know; declared, they would let ORT fuse an Add and a LayerNormalization into a SkipLayerNormalization that
    rounds differently. The rewrite declares ORT's own types of the original: the same fusions, bit-exact."""
    model = export("longformer", 16)
    rewritten, report = rewrite_model(model)
    assert report.left == 0 and report.value_types == "ONNX Runtime's load-time types", report.value_types
    inputs = feeds(16)
    want, original_ops = optimized_by_ort(model, tmp_path, inputs)
    lowered, _ = lower_model(rewritten)  # the default session's builtin gathers, in a file ORT can optimize
    got, lowered_ops = optimized_by_ort(lowered, tmp_path, inputs)
    assert lowered_ops == original_ops
    assert_bit_identical(got, want)
    session = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"])
    assert session.bridge_crossings == 0
    assert_bit_identical(session.run(None, inputs)[0], want)


@pytest.mark.parametrize("name, sequence", [("funnel", 16), ("bigbird", 32)])
def test_gather_elements_after_a_long_index_computation_comes_back(name, sequence):
    """Funnel's and BigBird's GatherElements read indices computed through hundreds of nodes: rewrite then lower
    gives back the original's op types and counts, and the default session crosses the bridge 0 times."""
    model = export(name, sequence)
    assert any(node.op_type == "GatherElements" for node in model.graph.node)
    rewritten, report = rewrite_model(model)
    assert report.left == 0 and report.runtime_aligned == 0, report.table()
    lowered, lowered_report = lower_model(rewritten)
    assert {o.source for o in lowered_report.outcomes} == {"rewrite record"}, lowered_report.table()
    assert collections.Counter(n.op_type for n in lowered.graph.node) == collections.Counter(
        n.op_type for n in model.graph.node)
    session = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"])
    assert session.bridge_crossings == 0
    inputs = feeds(sequence)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    assert_bit_identical(session.run(None, inputs)[0], want)
    plain = ort.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"])
    assert_bit_identical(plain.run(None, inputs)[0], want)
