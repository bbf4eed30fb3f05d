"""exports.models: build_exports writes each asked-for export and its inputs, and says why it skipped the others."""

import numpy as np
import pytest

from gathermultiaxis.exports import models
from gathermultiaxis.exports.models import BATCH, SEQUENCE, VOCAB, build_exports


def test_unknown_name_is_reported_not_built(tmp_path):
    # The docstring says KeyError; the lookup sits inside the per-export try, so the name is skipped instead
    written, skipped = build_exports(tmp_path, ["no_such_export"])
    assert written == [] and list(skipped) == ["no_such_export"]
    assert skipped["no_such_export"].startswith("export failed: KeyError")
    assert list(tmp_path.iterdir()) == []


def test_missing_packages_and_failing_exporters_are_skipped(tmp_path, monkeypatch):
    def missing(path):
        raise ImportError("No module named 'hummingbird'", name="hummingbird")

    def failing(path):
        path.write_bytes(b"half written")
        raise RuntimeError("exporter\nbroke")

    monkeypatch.setitem(models.EXPORTS, "missing", missing)
    monkeypatch.setitem(models.EXPORTS, "failing", failing)
    seen = []
    written, skipped = build_exports(tmp_path, ["missing", "failing"], progress=seen.append)
    assert written == [] and seen == ["missing", "failing"]
    assert skipped == {"missing": "not installed: hummingbird", "failing": "export failed: RuntimeError: exporter broke"}
    assert list(tmp_path.iterdir()) == []  # the half-written model is removed


@pytest.mark.slow
def test_bert_export_runs_in_ort_on_its_inputs(tmp_path):
    pytest.importorskip("torch", reason="the exports need torch")
    pytest.importorskip("transformers", reason="the exports need transformers")
    ort = pytest.importorskip("onnxruntime", reason="the export is run in onnxruntime")
    written, skipped = build_exports(tmp_path, ["bert_torchscript"])
    assert skipped == {} and written == [tmp_path / "bert_torchscript.onnx"]
    feeds = dict(np.load(tmp_path / "bert_torchscript.inputs.npz"))
    assert set(feeds) == {"input_ids", "attention_mask", "token_type_ids"}
    logits = ort.InferenceSession(str(written[0]), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert logits.shape == (BATCH, SEQUENCE, VOCAB)  # BertForMaskedLM: a score per token and vocabulary entry
    assert np.isfinite(logits).all()
