"""Real exports (issue 31): a small nn.TransformerEncoder sentence encoder exported by TorchScript, and the
same encoder quantized by ORT's tools (quantize_dynamic, quantize_static in QDQ, MatMulNBitsQuantizer with
the embeddings as GatherBlockQuantized). For each, rewritten as it is and after ORT's offline optimizer
(``--ort-optimize``):

- no gather is left (GatherBlockQuantized rewritten on request) and none is aligned at run time: the
  ranks behind com.microsoft ops, nn.MultiheadAttention's computed Reshape shapes and the element types
  behind MatMulNBits and ORT's QLinear ops are all stated by the model;
- ``gathermultiaxis.InferenceSession`` binds the tables where the gathered data is a constant;
- the rewritten model in that session, and the lowered one on plain ORT, are bit-identical to plain ORT
  (default options) on the original.

Slow (~1 min: four TorchScript exports, three quantizations, two ORT optimizations each).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("torch", reason="torch is not installed: no export to test")

import onnxruntime as ort  # noqa: E402

from gathermultiaxis import session_options  # noqa: E402
from gathermultiaxis.exports.models import ENCODER_EXPORTS, build_exports  # noqa: E402
from gathermultiaxis.graphs import lower_model, rewrite_model  # noqa: E402
from gathermultiaxis.graphs.rewrite.ort_optimizer import ort_optimize  # noqa: E402
from gathermultiaxis.harness import bit_identical  # noqa: E402
from gathermultiaxis.ops import InferenceSession  # noqa: E402

PROVIDERS = ["CPUExecutionProvider"]
ALL_GATHERS = ("Gather", "GatherElements", "GatherND", "GatherBlockQuantized")


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("encoders")
    written, skipped = build_exports(folder, list(ENCODER_EXPORTS))
    assert not skipped, skipped
    return folder


def _constant_tables(model: onnx.ModelProto) -> int:
    """Gathers (GatherBlockQuantized too) of the main graph whose data is an initializer or a Constant."""
    constants = {init.name for init in model.graph.initializer}
    constants |= {out for node in model.graph.node if node.op_type == "Constant" for out in node.output}
    return sum(node.op_type in ALL_GATHERS and node.input[0] in constants for node in model.graph.node)


@pytest.mark.parametrize("optimized", [False, True], ids=["plain", "ort_optimize"])
@pytest.mark.parametrize("name", list(ENCODER_EXPORTS))
def test_encoder_rewrite_bind_lower_bit_exact(exports, name, optimized):
    original = onnx.load(str(exports / f"{name}.onnx"))
    with np.load(exports / f"{name}.inputs.npz") as arrays:
        feeds = {key: arrays[key] for key in arrays.files}
    want = ort.InferenceSession(original.SerializeToString(), providers=PROVIDERS).run(None, feeds)
    model = ort_optimize(original, session_options=session_options) if optimized else original

    rewritten, report = rewrite_model(model, ops=ALL_GATHERS)
    assert report.rewritten > 0 and report.left == 0, report.table()
    assert report.runtime_aligned == 0, report.table()
    if name == "encoder_matmul_nbits":  # asked for by default ops: only the GatherBlockQuantized rows are left
        _, default = rewrite_model(model)
        assert {o.op_type for o in default.outcomes if not o.rewritten} == {"com.microsoft.GatherBlockQuantized"}

    session = InferenceSession(rewritten, providers=PROVIDERS, run_builtin_gathers=False)
    tables = _constant_tables(model)
    print(f"{name} {'ort-optimized' if optimized else 'plain'}: {report.rewritten} rewritten, 0 left, 0 aligned at "
          f"run time, {tables} constant tables, {session.bound_tables} bound")
    if tables:
        assert session.bound_tables > 0
    got = session.run(None, feeds)
    assert len(got) == len(want) and all(bit_identical(g, w) for g, w in zip(got, want))

    lowered, lowering = lower_model(rewritten)
    assert lowering.left == 0, lowering.table()
    low = ort.InferenceSession(lowered.SerializeToString(), providers=PROVIDERS).run(None, feeds)
    assert all(bit_identical(g, w) for g, w in zip(low, want))
