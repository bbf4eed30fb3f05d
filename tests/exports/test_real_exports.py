"""Real exports (issue 17): transformers models with random weights, exported by torch's dynamo exporter
and by TorchScript, rewritten, run, lowered. For each one:

- the rewrite leaves no gather and aligns none at run time (every rank the model states is used);
- ``gathermultiaxis.InferenceSession`` binds the constant tables (the embeddings) of the model;
- the rewritten model is bit-identical to the original on plain onnxruntime;
- the lowered model holds standard ONNX ops only and is bit-identical on plain onnxruntime;
- the KV-cache decode steps (symbolic batch, sequence and past lengths) pass ``gathermultiaxis check``
  with generated inputs.

Slow (~3 min idle: the dynamo exporter takes ~8 s a model); needs torch and transformers.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch", reason="torch is not installed: no export to test")
pytest.importorskip("transformers", reason="transformers is not installed: no export to test")

import onnxruntime as ort  # noqa: E402

from gathermultiaxis.conformance.input_generation import generated_inputs  # noqa: E402
from gathermultiaxis.cli import main  # noqa: E402
from gathermultiaxis.exports.models import DECODER_EXPORTS, EXPORTS, TORCHSCRIPT_EXPORTS, build_exports  # noqa: E402
from gathermultiaxis.graphs import lower_model, rewrite_model  # noqa: E402
from gathermultiaxis.harness import bit_identical  # noqa: E402
from gathermultiaxis.ops import InferenceSession  # noqa: E402

NAMES = [name for name in (*EXPORTS, *TORCHSCRIPT_EXPORTS, *DECODER_EXPORTS) if not name.startswith("hummingbird")]
# Vision models: ViT's one Gather reads the hidden states (the class token), and the exporters fold
# Swin's relative-position-bias Gather into a constant, so no gather of theirs reads a constant table.
NO_CONSTANT_TABLE = {"vit_dynamo", "vit_torchscript", "swin_dynamo", "swin_torchscript"}
PROVIDERS = ["CPUExecutionProvider"]
ORT_ERRORS = (ort.capi.onnxruntime_pybind11_state.Fail, ort.capi.onnxruntime_pybind11_state.InvalidArgument,
              ort.capi.onnxruntime_pybind11_state.RuntimeException)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exports")
    written, skipped = build_exports(folder, NAMES)
    assert not skipped, skipped  # every exporter works with the pinned torch and transformers
    return folder


def _load(folder, name):
    model = onnx.load(str(folder / f"{name}.onnx"))
    with np.load(folder / f"{name}.inputs.npz") as arrays:
        return model, {key: arrays[key] for key in arrays.files}


def _same(got, want) -> bool:
    return len(got) == len(want) and all(bit_identical(g, w) for g, w in zip(got, want))


def _constant_data_gathers(model: onnx.ModelProto) -> int:
    constants = {init.name for init in model.graph.initializer}
    constants |= {out for node in model.graph.node if node.op_type == "Constant" for out in node.output}
    return sum(node.op_type in ("Gather", "GatherElements", "GatherND") and node.input[0] in constants
               for node in model.graph.node)


@pytest.mark.parametrize("name", NAMES)
def test_rewrite_bind_lower_bit_exact(exports, name):
    model, feeds = _load(exports, name)
    want = ort.InferenceSession(model.SerializeToString(), providers=PROVIDERS).run(None, feeds)
    rewritten, report = rewrite_model(model)
    assert report.rewritten > 0 and report.left == 0, report.table()
    assert report.runtime_aligned == 0, report.table()

    session = InferenceSession(rewritten, providers=PROVIDERS, run_builtin_gathers=False)
    if name in NO_CONSTANT_TABLE:
        assert _constant_data_gathers(model) == 0 and session.bound_tables == 0
    else:
        assert _constant_data_gathers(model) > 0 and session.bound_tables > 0
    assert _same(session.run(None, feeds), want)
    default = InferenceSession(rewritten, providers=PROVIDERS)  # as users create it: builtin where one gather does
    assert default.builtin_gathers + default.bridge_crossings >= 1 and default.builtin_gathers > 0
    assert _same(default.run(None, feeds), want)

    lowered, lowering = lower_model(rewritten)
    assert lowering.left == 0
    domains = {node.domain for node in lowered.graph.node} | {op.domain for op in lowered.opset_import}
    assert domains <= {"", "ai.onnx"}, domains
    assert _same(ort.InferenceSession(lowered.SerializeToString(), providers=PROVIDERS).run(None, feeds), want)


@pytest.mark.parametrize("name", list(DECODER_EXPORTS))
def test_check_feeds_kv_cache_decoders(exports, name, capsys):
    """Symbolic dims sized one name at a time (the mask's length is the past plus the new tokens): with
    every name at one size the original refuses the generated inputs, and the case was "not compared"."""
    model, _ = _load(exports, name)
    refused = ort.InferenceSession(model.SerializeToString(), providers=PROVIDERS)
    with pytest.raises(ORT_ERRORS):  # every dim at 3: the mask is 3 long where past + new is 6
        refused.run(None, generated_inputs(model, 0, 3))
    assert main(["check", str(exports / f"{name}.onnx")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("1 passed, 0 failed, 0 not compared")


@pytest.mark.parametrize("name", NAMES)
def test_lowered_for_webnn(exports, name):
    """``lower --target webnn`` with the inputs' shapes: bit-identical on plain ORT (optimizations off), and
    no node it emitted is outside WebNN's subset (the models' own ops may be: IsNaN, Range, ...)."""
    from gathermultiaxis.graphs.webnn import lower_for_webnn, lowering_findings
    from gathermultiaxis.harness import make_session

    model, feeds = _load(exports, name)
    shapes = {key: value.shape for key, value in feeds.items()}
    want = make_session(model, custom=False).run(None, feeds)
    lowered, report = lower_for_webnn(rewrite_model(model)[0], shapes)
    assert report.left == 0, report.table()
    assert _same(make_session(lowered, custom=False).run(None, feeds), want)
    assert lowering_findings(lowered, report, shapes) == []
