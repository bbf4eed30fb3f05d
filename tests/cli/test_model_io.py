"""Reading, transforming and writing model files (model_io); hostile files and paths on the command line: one clear line, exit status 2, no traceback, and
nothing written, changed or left behind."""

import os
import subprocess
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from support import make_model
from test_command_rewrite import external_data_model, files_in

from gathermultiaxis.cli import main
from gathermultiaxis.cli.command_base import CommandError
from gathermultiaxis.cli.model_io import load_check, loads_in_ort, read_model_file
from gathermultiaxis.examples import EXAMPLE_PATH
from gathermultiaxis.graphs import modelfile as model_io


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


def test_cycle_is_rejected(tmp_path, capsys):
    first = helper.make_node("Gather", ["data", "b"], ["a"], axis=0, name="first")
    second = helper.make_node("Cast", ["a"], ["b"], to=TensorProto.INT64, name="second")
    model = make_model([first, second], [helper.make_tensor_value_info("data", TensorProto.FLOAT, [3])],
                       [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3])])
    source = tmp_path / "cycle.onnx"
    onnx.save_model(model, str(source))
    assert main(["rewrite", str(source), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err
    assert "ONNX Runtime cannot load it" in err and "the graph is not acyclic" in err and err.count("\n") == 1
    assert files_in(tmp_path) == {"cycle.onnx"}


def test_folder_given_as_model(tmp_path, capsys):
    assert main(["rewrite", str(tmp_path), "-o", str(tmp_path / "out.onnx")]) == 2
    assert "is a folder, not a model file" in capsys.readouterr().err


def test_missing_external_data_file(tmp_path, capsys):
    source = external_data_model(tmp_path)
    (tmp_path / "weights.bin").unlink()
    assert main(["rewrite", str(source), "-o", str(tmp_path / "out.onnx")]) == 2
    assert "external data file 'weights.bin' of 'table' is missing" in capsys.readouterr().err


def test_external_data_is_written_only_into_the_output_folder(tmp_path):
    (tmp_path / "in").mkdir()
    source = external_data_model(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    before = {p for p in tmp_path.rglob("*")}
    assert main(["rewrite", str(source), "-o", str(out / "model.onnx")]) == 0
    assert {p for p in tmp_path.rglob("*")} - before == {out / "model.onnx", out / "model.onnx.data"}


@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage", None])
def test_no_traceback_from_the_console_command(tmp_path, content):
    source = tmp_path / "in.onnx"
    source.write_bytes(EXAMPLE_PATH.read_bytes()[:1500] if content is None else content)
    run = subprocess.run(["gathermultiaxis", "rewrite", str(source), "-o", str(tmp_path / "out.onnx")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr and run.stderr.count("\n") == 1, run.stderr
    assert run.stdout == "" and files_in(tmp_path) == {"in.onnx"}


def test_read_model_file_refuses_with_one_line(tmp_path):
    source = tmp_path / "in.onnx"
    source.write_bytes(b"this is not a protobuf at all \xff\xfe")
    with pytest.raises(CommandError, match="not a readable ONNX model"):
        read_model_file(source)
    model, data_folder = read_model_file(EXAMPLE_PATH)
    assert data_folder is None and len(model.graph.node) > 0


def test_load_check_loads_what_changed():
    model = onnx.load_model(str(EXAMPLE_PATH))
    assert load_check(model, model, model, None) is None  # unchanged: nothing to prove
    rewritten = onnx.load_model(str(EXAMPLE_PATH))
    rewritten.graph.node[0].name = "renamed"
    assert load_check(model, onnx.ModelProto(), rewritten, None) is loads_in_ort  # optimized by ORT: all of it
    check = load_check(model, model, rewritten, None)
    assert check is loads_in_ort or check.func is loads_in_ort


def test_the_cycle_collector_is_off_during_a_transform_and_back_after():
    import gc

    from gathermultiaxis.cli.model_io import without_cycle_collection

    assert gc.isenabled()
    with without_cycle_collection():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that had it off keeps it off
        with without_cycle_collection():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
