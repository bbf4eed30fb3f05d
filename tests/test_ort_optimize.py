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
from support import assert_bit_identical, make_model
from tiny_bert import HEADS, HIDDEN, SHIPPED, VOCAB

from gathermultiaxis import session_options
from gathermultiaxis.cli import main
from gathermultiaxis.graphs import ortopt, rewrite_model


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

def reversal_model() -> onnx.ModelProto:
    """Gather(x, Range(T-1, -1, -1)) along axis 0: x reversed. ORT 1.31's GatherToSliceFusion makes it
    a Slice that selects nothing."""
    def constant(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.int64), name))

    nodes = [helper.make_node("Shape", ["x"], ["shape"]), constant("zero", 0), constant("one", 1),
             constant("minus_one", -1), helper.make_node("Gather", ["shape", "zero"], ["length"], axis=0),
             helper.make_node("Sub", ["length", "one"], ["start"]),
             helper.make_node("Range", ["start", "minus_one", "minus_one"], ["reversed"]),
             helper.make_node("Gather", ["x", "reversed"], ["y"], axis=0, name="reverse")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 4])])


def default_options_session(model, custom: bool) -> ort.InferenceSession:
    options = session_options(ort.SessionOptions()) if custom else ort.SessionOptions()
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def test_the_pre_pass_does_not_bake_in_gather_to_slice_fusion(monkeypatch):
    model, x = reversal_model(), np.arange(12, dtype=np.float32).reshape(3, 4)
    right = x[::-1]
    assert_bit_identical(builtin_session(model).run(None, {"x": x})[0], right)  # optimizations off: right
    assert default_options_session(model, custom=False).run(None, {"x": x})[0].shape == (0, 4)  # ORT's bug
    rewritten, report = rewrite_model(model, ort_optimize=True)
    assert report.rewritten >= 1
    for custom_level in (default_options_session(rewritten, custom=True), custom_session(rewritten)):
        assert_bit_identical(custom_level.run(None, {"x": x})[0], right)
    # the guard is what keeps it right: without it the pre-pass writes the empty Slice into the model
    monkeypatch.setattr(ortopt, "DISABLED_OPTIMIZERS", ())
    baked, _ = rewrite_model(model, ort_optimize=True)
    assert custom_session(baked).run(None, {"x": x})[0].shape == (0, 4)


def test_check_compares_both_ways(tmp_path, capsys):
    from gathermultiaxis.cases import CheckCase, DataSet
    from gathermultiaxis.check import CheckMode, check_case

    case = CheckCase("reversal", reversal_model(), [DataSet({"x": np.arange(12, dtype=np.float32).reshape(3, 4)})])
    assert check_case(case).verdict == "passed"  # optimizations off on both sides
    both_default = check_case(case, mode=CheckMode.ORT_OPTIMIZED)
    # ORT's default optimizer empties the original's output; the rewrite keeps the right answer
    assert both_default.verdict == "builtin wrong" and "reference evaluator agrees" in both_default.detail
    source = transformer_optimized(tmp_path)
    assert main(["check", "--ort-optimize", str(source), str(SHIPPED)]) == 0
    assert "2 passed, 0 failed, 0 not compared, 0 not runnable" in capsys.readouterr().out
