"""``rewrite``: the table, the JSON report, --ops, external data beside the output."""

import argparse
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from sessions import builtin_session, custom_session
from support import assert_bit_identical, make_model

from gathermultiaxis import session_options
from gathermultiaxis.cli import main
from gathermultiaxis.cli.command_rewrite import op_list
from gathermultiaxis.examples import EXAMPLE_PATH, build_example_model, example_inputs
from gathermultiaxis.graphs import modelfile as model_io


def files_in(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_rewrite_prints_table_and_writes_json(tmp_path, capsys):
    output, report = tmp_path / "out.onnx", tmp_path / "report.json"
    assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(output), "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    assert "Gather                   6     0" in printed and "GatherND                 1     0" in printed
    data = json.loads(report.read_text())
    assert data["rewritten"] == 8 and data["by_op"]["GatherElements"] == {"rewritten": 1, "left": 0}
    original = onnx.load_model(str(EXAMPLE_PATH))
    rewritten = onnx.load_model(str(output))
    onnx.checker.check_model(rewritten)
    feeds = example_inputs(batch=3, sequence=4, seed=1)
    for a, e in zip(custom_session(rewritten).run(None, feeds), builtin_session(original).run(None, feeds)):
        assert_bit_identical(a, e)
    assert files_in(tmp_path) == {"out.onnx", "report.json"}  # no temporary files left behind


def test_ops_option_limits_the_rewrite(tmp_path, capsys):
    output = tmp_path / "out.onnx"
    assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(output), "--ops", "GatherND"]) == 0
    assert "GatherND                 1     0" in capsys.readouterr().out
    assert sum(n.op_type == "GatherElements" for n in onnx.load_model(str(output)).graph.node) == 1


def external_data_model(folder: Path) -> Path:
    table = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(512, 8), "table")
    node = helper.make_node("Gather", ["table", "ids"], ["rows"], name="lookup", axis=0)
    model = make_model([node], [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                       [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["n", 8])], [table])
    path = folder / "with_weights.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="weights.bin", size_threshold=0)
    return path


def test_external_data_is_kept_beside_the_output(tmp_path, capsys):
    source = external_data_model(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert main(["rewrite", str(source), "-o", str(out_dir / "rewritten.onnx")]) == 0
    assert files_in(out_dir) == {"rewritten.onnx", "rewritten.onnx.data"}
    rewritten = onnx.load_model(str(out_dir / "rewritten.onnx"))
    ids = {"ids": np.array([511, 0, -1])}
    np.testing.assert_array_equal(custom_session(rewritten).run(None, ids)[0],
                                  np.arange(4096, dtype=np.float32).reshape(512, 8)[[511, 0, -1]])


def test_models_over_the_protobuf_limit_go_external(tmp_path, monkeypatch):
    monkeypatch.setattr(model_io, "PROTOBUF_LIMIT", 1000)  # the >2 GB path, exercised on a small model
    model, _ = model_io.load_model(EXAMPLE_PATH, session_options=session_options)
    written = model_io.save_model(model, tmp_path / "big.onnx")
    assert {p.name for p in written} == {"big.onnx", "big.onnx.data"} == files_in(tmp_path)
    reloaded, original = onnx.load_model(str(tmp_path / "big.onnx")), build_example_model()
    assert list(reloaded.graph.node) == list(original.graph.node)
    for a, b in zip(reloaded.graph.initializer, original.graph.initializer):
        assert_bit_identical(numpy_helper.to_array(a), numpy_helper.to_array(b))


def test_op_list_parses_and_refuses():
    assert op_list(" GatherND, Gather ,") == ["GatherND", "Gather"]
    assert op_list("GatherBlockQuantized") == ["GatherBlockQuantized"]  # opt-in: only when listed
    for text in ("", ",", "Gather,Scatter"):
        with pytest.raises(argparse.ArgumentTypeError, match="choose from Gather,GatherElements,GatherND"):
            op_list(text)


def test_rewrite_static_ranks_only_reaches_the_rewriter(tmp_path, monkeypatch):
    from gathermultiaxis import graphs

    calls = []
    rewrite_model = graphs.rewrite_model
    monkeypatch.setattr(graphs, "rewrite_model", lambda model, ops, **options: calls.append((ops, options))
                        or rewrite_model(model, ops, **options))
    assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(tmp_path / "out.onnx"), "--static-ranks-only", "-q"]) == 0
    (ops, options), = calls
    assert ops == graphs.GATHER_OPS and options["runtime_alignment"] is False


def test_the_input_is_checked_by_the_session_that_reads_its_types(tmp_path, monkeypatch):
    # one ORT session of the input (its types, which proves it loads) and one of the changed part; the same
    # bytes as with the input loaded on its own first (--ort-optimize reads the types of another model)
    import onnxruntime as ort

    made = []
    real = ort.InferenceSession

    def counted(model, *args, **kwargs):
        made.append(model if isinstance(model, str) else "bytes")
        return real(model, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counted)
    assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(tmp_path / "one.onnx"), "-q"]) == 0
    assert made == ["bytes", "bytes"]
    monkeypatch.setattr("gathermultiaxis.cli.command_rewrite.InputTypes.__call__", lambda self, model: False)
    made.clear()
    assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(tmp_path / "two.onnx"), "-q"]) == 0
    assert made == [str(EXAMPLE_PATH), "bytes", "bytes"]  # the file, the types, the changed part
    assert (tmp_path / "one.onnx").read_bytes() == (tmp_path / "two.onnx").read_bytes()
