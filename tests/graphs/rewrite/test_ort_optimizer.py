"""Models saved by ORT's own tools (transformer optimizer, offline optimizer) are rewritten bit-exact,
and ``--ort-optimize`` makes the rewrite bit-exact under ORT's default session options too, without
baking in the answers of ORT's optimizer where they are wrong (GatherToSliceFusion)."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from sessions import builtin_session, custom_session, file_session
from support import assert_bit_identical, make_model, reversal_model
from tiny_bert import HEADS, HIDDEN, SHIPPED, VOCAB

from gathermultiaxis import session_options
from gathermultiaxis.cli import main
from gathermultiaxis.graphs import lower_model, rewrite_model
from gathermultiaxis.graphs.ranks import element_types
from gathermultiaxis.graphs.rewrite import ort_optimizer


def bert_feeds(batch: int, length: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), np.int64)
    mask[:, length - 1:] = rng.integers(0, 2, (batch, 1))  # some padding
    return {"input_ids": rng.integers(0, VOCAB, (batch, length)), "attention_mask": mask,
            "token_type_ids": rng.integers(0, 2, (batch, length))}


def transformer_optimized(folder):
    """Saved by onnxruntime.transformers.optimizer: SkipLayerNormalization and BiasGelu (com.microsoft)."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimizer = optimize_model(str(SHIPPED), model_type="bert", num_heads=HEADS, hidden_size=HIDDEN, opt_level=0)
    fused = optimizer.get_fused_operator_statistics()
    assert fused["SkipLayerNormalization"] > 0 and fused["BiasGelu"] > 0, fused
    path = folder / "transformer_optimized.onnx"
    optimizer.save_model_to_file(str(path))
    return path


def offline_optimized(folder):
    """Saved by ORT's offline optimizer: LayerNormalization at opset 14 exists only inside ORT."""
    path = folder / "offline_optimized.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(path)
    ort.InferenceSession(str(SHIPPED), options, providers=["CPUExecutionProvider"])
    with pytest.raises(onnx.checker.ValidationError, match="No Op registered for LayerNormalization"):
        onnx.checker.check_model(onnx.load_model(str(path)))
    return path


@pytest.mark.parametrize("saved_by", [transformer_optimized, offline_optimized])
def test_models_saved_by_ort_tools_rewrite_bit_exact_both_ways(tmp_path, saved_by):
    source = saved_by(tmp_path)
    plain, optimized = tmp_path / "rewritten.onnx", tmp_path / "rewritten_ort_optimized.onnx"
    assert main(["rewrite", str(source), "-o", str(plain), "--json", str(tmp_path / "plain.json")]) == 0
    assert main(["rewrite", str(source), "-o", str(optimized), "--ort-optimize"]) == 0
    assert json.loads((tmp_path / "plain.json").read_text())["rewritten"] > 0
    assert not list(tmp_path.glob("*.data"))  # no external data in, none out
    assert any(node.domain == "com.microsoft" for node in onnx.load_model(str(optimized)).graph.node)
    sessions = {(name, level): file_session(path, custom, level == "default")
                for name, path, custom in [("source", source, False), ("plain", plain, True),
                                           ("optimized", optimized, True)] for level in ("off", "default")}
    for batch, length, seed in [(2, 7, 0), (1, 1, 1), (3, 12, 2)]:
        feeds = bert_feeds(batch, length, seed)
        # optimizations off on both sides: the gathers themselves
        assert_bit_identical(sessions["plain", "off"].run(None, feeds)[0], sessions["source", "off"].run(None, feeds)[0])
        # ORT's default options on both sides, with the --ort-optimize rewrite
        assert_bit_identical(sessions["optimized", "default"].run(None, feeds)[0],
                             sessions["source", "default"].run(None, feeds)[0])


# -- GatherToSliceFusion ---------------------------------------------------------------------------

def default_options_session(model, custom: bool) -> ort.InferenceSession:
    options = session_options(ort.SessionOptions()) if custom else ort.SessionOptions()
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def test_the_pre_pass_does_not_bake_in_gather_to_slice_fusion(monkeypatch):
    model, x = reversal_model(), np.arange(12, dtype=np.float32).reshape(3, 4)
    right = x[::-1]
    assert_bit_identical(builtin_session(model).run(None, {"x": x})[0], right)  # optimizations off: right
    assert default_options_session(model, custom=False).run(None, {"x": x})[0].shape == (0, 4)  # ORT's bug
    rewritten, report = rewrite_model(model, ort_optimize=True, session_options=session_options)
    assert report.rewritten >= 1
    for custom_level in (default_options_session(rewritten, custom=True), custom_session(rewritten)):
        assert_bit_identical(custom_level.run(None, {"x": x})[0], right)
    # the guard is what keeps it right: without it the pre-pass writes the empty Slice into the model
    monkeypatch.setattr(ort_optimizer, "DISABLED_OPTIMIZERS", ())
    baked, _ = rewrite_model(model, ort_optimize=True, session_options=session_options)
    assert custom_session(baked).run(None, {"x": x})[0].shape == (0, 4)


def test_the_pre_pass_takes_the_package_session_options_by_default():
    """``rewrite_model(model, ort_optimize=True)`` needs no ``session_options=``: ORT's optimizer then loads
    the model on the package's own options, and the result is the one the explicit factory gives."""
    model = reversal_model()
    default, default_report = rewrite_model(model, ort_optimize=True)
    given, _ = rewrite_model(model, ort_optimize=True, session_options=session_options)
    assert default_report.rewritten >= 1 and default == given
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_bit_identical(custom_session(default).run(None, {"x": x})[0], custom_session(given).run(None, {"x": x})[0])
    with pytest.raises(TypeError, match="session_options"):
        ort_optimizer.ort_optimize(model)  # the pass's own function: the factory is a required keyword


def test_check_compares_both_ways(tmp_path, capsys):
    from gathermultiaxis.conformance.cases import CheckCase, DataSet
    from gathermultiaxis.conformance.check_case import check_case
    from gathermultiaxis.conformance.check_results import CheckMode

    case = CheckCase("reversal", reversal_model(), [DataSet({"x": np.arange(12, dtype=np.float32).reshape(3, 4)})])
    assert check_case(case).verdict == "passed"  # optimizations off on both sides
    both_default = check_case(case, mode=CheckMode.ORT_OPTIMIZED)
    # ORT's default optimizer empties the original's output; the rewrite keeps the right answer
    assert both_default.verdict == "builtin wrong" and "reference evaluator agrees" in both_default.detail
    source = transformer_optimized(tmp_path)
    assert main(["check", "--ort-optimize", str(source), str(SHIPPED)]) == 0
    assert "2 passed, 0 failed, 0 not compared, 0 not runnable" in capsys.readouterr().out


# -- what ORT's optimizer writes is typed (issue 17) ------------------------------------------------------

def detector_model(dynamo: bool) -> onnx.ModelProto:
    """A small detector-like torch model: a conv backbone (Conv + BatchNorm + ReLU: FusedConv after ORT's
    optimizer), per-location scores and boxes, TopK of the best scores whose indices gather box rows
    (GatherElements, Gather), a 2-D head (Gemm + ReLU: FusedGemm) and a box-pair similarity (MatMul of a
    transpose: FusedMatMul). torchvision is not used (it does not import here)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    if dynamo:
        pytest.importorskip("onnxscript", reason="onnxscript is not installed (torch's dynamo exporter needs it)")
    import io
    import warnings

    class Detector(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.backbone = torch.nn.Sequential(
                torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                torch.nn.Conv2d(8, 8, 3, stride=2, padding=1), torch.nn.ReLU())
            self.scores, self.boxes = torch.nn.Conv2d(8, 3, 1), torch.nn.Conv2d(8, 4, 1)
            self.head = torch.nn.Linear(8, 6)

        def forward(self, image):
            features = self.backbone(image)
            scores = self.scores(features).flatten(2).transpose(1, 2)          # [B, HW, 3]
            boxes = self.boxes(features).flatten(2).transpose(1, 2)            # [B, HW, 4]
            best, label = scores.max(-1)
            top, index = best.topk(5, dim=1)                                    # [B, 5]
            kept = torch.gather(boxes, 1, index.unsqueeze(-1).expand(-1, -1, 4))
            pairs = torch.matmul(kept, kept.transpose(1, 2))                    # [B, 5, 5]
            pooled = torch.relu(self.head(features.mean((2, 3))))               # [B, 6]
            return (top, kept, torch.gather(label, 1, index), pairs[:, 0], boxes[0][index[0]],
                    pooled[:, torch.tensor([5, 0, 2])], pooled[0])

    model, image = Detector().eval(), torch.randn(2, 3, 16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            return torch.onnx.export(model, (image,), dynamo=True, verbose=False,
                                     dynamic_shapes=({0: torch.export.Dim("B", min=1, max=8)},)).model_proto
        buffer = io.BytesIO()
        torch.onnx.export(model, (image,), buffer, dynamo=False, opset_version=17, input_names=["image"],
                          dynamic_axes={"image": {0: "B"}})
    return onnx.load_model_from_string(buffer.getvalue())


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_detector_under_ort_optimize_keeps_no_gather_and_needs_no_run_time_alignment(dynamo):
    """Main left 4 of 7 gathers of the TorchScript export ("data type unknown": their data came from
    FusedConv) and aligned one at run time; now ORT's fused ops are typed (stand-ins and ORT's schemas)."""
    model = detector_model(dynamo)
    optimized = ort_optimizer.ort_optimize(model, session_options=session_options)
    fused = {node.op_type for node in optimized.graph.node if node.domain == "com.microsoft"}
    assert {"FusedConv", "FusedGemm"} <= fused, fused
    rewritten, report = rewrite_model(model, ort_optimize=True, session_options=session_options)
    assert report.left == 0 and report.rewritten >= 7 and report.runtime_aligned == 0, report.table()
    assert not any(node.op_type.startswith("Gather") and node.domain in ("", "ai.onnx")
                   for node in rewritten.graph.node)
    rng = np.random.default_rng(5)
    original, custom = default_options_session(model, custom=False), default_options_session(rewritten, custom=True)
    name = original.get_inputs()[0].name
    lowered, lowering = lower_model(rewritten)  # ORT's fused ops stay; no GatherMultiaxis is left
    assert lowering.left == 0 and not any(node.domain == "ai.onnx.contrib" for node in lowered.graph.node)
    plain = default_options_session(lowered, custom=False)
    for batch in (2, 1, 3):
        feeds = {name: rng.standard_normal((batch, 3, 16, 16)).astype(np.float32)}
        expected_outputs = original.run(None, feeds)
        for actual, expected in zip(custom.run(None, feeds), expected_outputs, strict=True):
            assert_bit_identical(actual, expected)
        for actual, expected in zip(plain.run(None, feeds), expected_outputs, strict=True):
            assert_bit_identical(actual, expected)


def test_fused_op_stand_ins_type_exactly_what_ort_computes():
    """Each stand-in's output shape (by ONNX's inference) is what ORT's fused kernel returns."""
    ms = "com.microsoft"
    cases = [
        (helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=ms, transB=1, alpha=0.5),
         {"a": (2, 3, 4), "b": (2, 5, 4)}),
        # (ONNX's Einsum inference does not broadcast batch dims of different ranks: those get the rank rule's)
        (helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=ms, transA=1), {"a": (2, 4, 3), "b": (1, 4, 5)}),
        (helper.make_node("FusedGemm", ["a", "b", "c"], ["y"], domain=ms, transA=1, activation="Relu"),
         {"a": (4, 3), "b": (4, 6), "c": (6,)}),
        (helper.make_node("FusedConv", ["a", "b", "c"], ["y"], domain=ms, strides=[2, 1], pads=[1, 0, 1, 0],
                          activation="Relu"), {"a": (1, 2, 7, 5), "b": (3, 2, 3, 3), "c": (3,)}),
    ]
    rng = np.random.default_rng(0)
    for node, shapes in cases:
        model = make_model([node], [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in shapes.items()],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                           extra_opsets=[helper.make_opsetid(ms, 1)])
        feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
        expected = builtin_session(model).run(None, feeds)[0].shape
        stand_in = make_model([element_types.typing_stand_in(node)], model.graph.input, model.graph.output)
        inferred = onnx.shape_inference.infer_shapes(stand_in, strict_mode=True).graph.output[0].type.tensor_type
        assert tuple(d.dim_value for d in inferred.shape.dim) == expected, node.op_type
        assert element_types.schema_output_types(node, [TensorProto.FLOAT] * len(node.input)) == [TensorProto.FLOAT]


# -- external data (issue 30, item 8) ---------------------------------------------------------------------

def test_check_ort_optimize_finds_external_data_over_64_kib(tmp_path, monkeypatch, capsys):
    """A table of 128 KiB in an external file (load_model reads in only those up to 64 KiB): ORT's
    optimizer kept its reference to ``table.bin`` as it was, and the optimized copy's data was looked
    for in ORT's scratch folder, so ``check --ort-optimize`` failed the model that the plain check passes,
    from the model's folder as from any other."""
    table = numpy_helper.from_array(np.arange(128 * 256, dtype=np.float32).reshape(128, 256), "table")
    node = helper.make_node("Gather", ["table", "ids"], ["rows"], name="lookup", axis=0)
    model = make_model([node], [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                       [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["n", 256])], [table])
    (tmp_path / "model").mkdir()
    path = tmp_path / "model" / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="table.bin", size_threshold=0)
    for folder, name in ((path.parent, "model.onnx"), (tmp_path, str(path))):
        monkeypatch.chdir(folder)
        assert main(["check", name]) == 0
        capsys.readouterr()
        code = main(["check", "--ort-optimize", name])
        out = capsys.readouterr().out
        assert code == 0 and "1 passed, 0 failed" in out, out
    optimized = ort_optimizer.ort_optimize(onnx.load_model(str(path), load_external_data=False), path.parent,
                                           session_options=session_options)
    ids = np.array([127, 0, -1, 5])
    assert_bit_identical(builtin_session(optimized).run(None, {"ids": ids})[0], table_rows(path, ids))


def table_rows(path, ids):
    return numpy_helper.to_array(onnx.load_model(str(path)).graph.initializer[0])[ids]
