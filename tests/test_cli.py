"""The command line: rewrite, example, and their behaviour on bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from sessions import builtin_session, custom_session
from support import assert_bit_identical, make_model

from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH, build_example_model, example_inputs
from gathermultiaxis.graphs import io as model_io


def files_in(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_shipped_example_is_what_the_builder_makes():
    assert onnx.load_model(str(EXAMPLE_PATH)) == build_example_model()


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


def test_ops_option_rejects_unknown_ops(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["rewrite", str(EXAMPLE_PATH), "-o", "x.onnx", "--ops", "Gather,Scatter"])
    assert exit_info.value.code == 2
    assert "choose from Gather,GatherElements,GatherND" in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    (b"", "not an ONNX model (it has no graph)"),
    (b"this is not a protobuf at all \xff\xfe", "not a readable ONNX model"),
    (None, "not a readable ONNX model"),  # a truncated model
])
def test_unreadable_input_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    source = tmp_path / "in.onnx"
    source.write_bytes(EXAMPLE_PATH.read_bytes()[:1000] if content is None else content)
    assert main(["rewrite", str(source), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(source) in err and message in err, err
    assert files_in(tmp_path) == {"in.onnx"}


def test_invalid_model_is_rejected(tmp_path, capsys):
    node = helper.make_node("Gather", ["data", "missing"], ["out"])  # dangling input
    model = make_model([node], [helper.make_tensor_value_info("data", TensorProto.FLOAT, [2])],
                       [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    source = tmp_path / "bad.onnx"
    onnx.save_model(model, str(source))
    assert main(["rewrite", str(source), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err
    assert "invalid ONNX model" in err and "missing" in err and err.count("\n") == 1
    assert files_in(tmp_path) == {"bad.onnx"}


def test_output_safety(tmp_path, capsys):
    source = tmp_path / "in.onnx"
    source.write_bytes(EXAMPLE_PATH.read_bytes())
    before = source.read_bytes()
    assert main(["rewrite", str(source), "-o", str(source)]) == 2
    assert "the output is the input file; pass --in-place" in capsys.readouterr().err
    assert main(["rewrite", str(source)]) == 2
    assert "no output" in capsys.readouterr().err
    assert main(["rewrite", str(source), "-o", str(tmp_path / "missing" / "out.onnx")]) == 2
    assert "does not exist" in capsys.readouterr().err
    existing = tmp_path / "existing.onnx"
    existing.write_bytes(b"keep me")
    assert main(["rewrite", str(source), "-o", str(existing)]) == 2
    assert "already exists (pass --force" in capsys.readouterr().err
    assert existing.read_bytes() == b"keep me" and source.read_bytes() == before
    assert main(["rewrite", str(source), "-o", str(existing), "--force"]) == 0
    assert main(["rewrite", str(source), "--in-place"]) == 0
    assert any(n.op_type == "GatherMultiaxis" for n in onnx.load_model(str(source)).graph.node)
    assert files_in(tmp_path) == {"in.onnx", "existing.onnx"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders; the permission check cannot fail")
def test_read_only_output_folder(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(folder / "out.onnx")]) == 2
        assert "cannot write" in capsys.readouterr().err
    finally:
        folder.chmod(0o700)


def test_unwritable_output_folder(tmp_path, monkeypatch, capsys):
    """The same path as a read-only folder, reached even when running as root."""
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(model_io.tempfile, "mkdtemp", refuse)
    assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err
    assert "cannot write to" in err and "Permission denied" in err, err
    assert files_in(tmp_path) == set()


def test_failed_write_leaves_nothing(tmp_path, monkeypatch, capsys):
    def broken_save(*args, **kwargs):
        Path(args[1]).write_bytes(b"half a model")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(onnx, "save_model", broken_save)
    assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(tmp_path / "out.onnx")]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert files_in(tmp_path) == set()


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
    monkeypatch.setattr(model_io, "_PROTOBUF_LIMIT", 1000)  # the >2 GB path, exercised on a small model
    model, _ = model_io.load_model(EXAMPLE_PATH)
    written = model_io.save_model(model, tmp_path / "big.onnx")
    assert {p.name for p in written} == {"big.onnx", "big.onnx.data"} == files_in(tmp_path)
    reloaded, original = onnx.load_model(str(tmp_path / "big.onnx")), build_example_model()
    assert list(reloaded.graph.node) == list(original.graph.node)
    for a, b in zip(reloaded.graph.initializer, original.graph.initializer):
        assert_bit_identical(numpy_helper.to_array(a), numpy_helper.to_array(b))


def test_external_data_outside_the_model_folder_is_refused(tmp_path, capsys):
    source = external_data_model(tmp_path)
    model = onnx.load_model(str(source), load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../../etc/passwd"
    onnx.save_model(model, str(source))
    assert main(["rewrite", str(source), "-o", str(tmp_path / "out.onnx")]) == 2
    assert "points outside the model's folder" in capsys.readouterr().err
    assert "out.onnx" not in files_in(tmp_path)


def test_example_command(tmp_path, capsys):
    target = tmp_path / "example.onnx"
    assert main(["example", str(target)]) == 0
    assert target.read_bytes() == EXAMPLE_PATH.read_bytes()
    assert main(["example", str(target)]) == 2


@pytest.mark.parametrize("command", [["gathermultiaxis"], [sys.executable, "-m", "gathermultiaxis"]])
def test_console_entry_points(command):
    version = subprocess.run(command + ["--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("gathermultiaxis ")
    usage = subprocess.run(command + ["--help"], capture_output=True, text=True, check=True)
    assert all(word in usage.stdout for word in ("rewrite", "check", "example"))
