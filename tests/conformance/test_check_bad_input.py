"""Hostile paths, models and arguments for ``check`` and ``bench``: exit status 2 and one line on
stderr before any work, or a verdict that is never a pass; Ctrl-C keeps what ran."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import make_model

from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH


def one_line_exit_2(args, capsys, message):
    try:
        status = main(args)
    except SystemExit as exit_info:  # argparse's own errors
        status = exit_info.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert message in err and err.count("\n") == 1, err
    return err


def test_fifo_named_directly(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.onnx")
    one_line_exit_2(["check", str(tmp_path / "pipe.onnx")], capsys, "a FIFO, not a model file")
    for command in ("rewrite", "lower"):
        one_line_exit_2([command, str(tmp_path / "pipe.onnx"), "-o", str(tmp_path / "out.onnx")], capsys,
                        "pipe.onnx: a FIFO, not a model file")
    assert not (tmp_path / "out.onnx").exists()


def test_fifo_and_device_link_in_a_checked_folder(tmp_path, capsys):
    (tmp_path / "good.onnx").write_bytes(EXAMPLE_PATH.read_bytes())
    os.mkfifo(tmp_path / "pipe.onnx")
    one_line_exit_2(["check", str(tmp_path)], capsys, "pipe.onnx: a FIFO, not a model file")
    os.unlink(tmp_path / "pipe.onnx")
    os.symlink("/dev/zero", tmp_path / "zeros.onnx")
    one_line_exit_2(["check", str(tmp_path)], capsys, "zeros.onnx: a device, not a model file")
    one_line_exit_2(["check", str(tmp_path / "zeros.onnx")], capsys, "zeros.onnx: a device")


def test_empty_missing_and_modelless_paths(tmp_path, capsys):
    (tmp_path / "empty.onnx").write_bytes(b"")
    one_line_exit_2(["check", str(tmp_path / "empty.onnx")], capsys, "empty file, not an ONNX model")
    one_line_exit_2(["check", str(tmp_path / "missing.onnx")], capsys, "no such file or folder")
    (tmp_path / "nothing").mkdir()
    one_line_exit_2(["check", str(tmp_path / "nothing")], capsys, "no .onnx file in this folder")


def test_garbage_model_in_a_folder_is_not_runnable(tmp_path, capsys):
    (tmp_path / "garbage.onnx").write_bytes(b"\x08\x07 not a protobuf \xff")
    status = main(["check", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 3 and "not runnable" in out and "cannot read" in out


@pytest.mark.parametrize("args, message", [
    (["check", "--fuzz", "-5"], "must be at least 1"),
    (["check", "--fuzz", "three"], "expected a whole number"),
    (["check", "--fuzz", "3", str(EXAMPLE_PATH)], "--fuzz checks generated models and takes no PATH"),
    (["check", "--timeout", "0"], "must be more than 0"),
    (["check", "--input-shapes", "x=3"], "expected NAME:[d0,d1,...]"),
    (["check", "--load-inputs", "/nonexistent/in.npz"], "no such file or folder"),
    (["check", "--json", "/nonexistent/folder/report.json"], "does not exist"),
    (["check", "--save-dir", "/nonexistent/folder", "--fuzz", "2"], "no such folder"),
    (["check", "--allow", "failed"], "invalid choice"),
    (["bench", "--plot", "/nonexistent/b.png"], "does not exist"),
    (["bench", "--json", "/nonexistent/b.json"], "does not exist"),
    (["bench", "--repeats", "0"], "must be at least 1"),
    (["bogus"], "invalid choice: 'bogus'"),
    (["rewrite"], "the following arguments are required: model"),
])
def test_nonsense_arguments_fail_before_any_work(args, message, capsys):
    started = time.monotonic()
    one_line_exit_2(args, capsys, message)
    assert time.monotonic() - started < 10  # before any work (bench alone takes minutes)


def test_existing_report_is_not_overwritten_without_force(tmp_path, capsys):
    report = tmp_path / "report.json"
    report.write_text("keep me")
    one_line_exit_2(["check", "--fuzz", "1", "--json", str(report)], capsys, "already exists (pass --force")
    assert report.read_text() == "keep me"


def model_file(tmp_path, name, inputs, nodes=(), initializers=()):
    gather = helper.make_node("Gather", ["table", "zero"], ["out"], axis=0)
    model = make_model([*nodes, gather], inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                       [numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "table"),
                        numpy_helper.from_array(np.array(0, np.int64), "zero"), *initializers])
    path = tmp_path / name
    onnx.save_model(model, str(path))
    return path


def test_sequence_input_is_not_compared(tmp_path, capsys):
    sequence = helper.make_tensor_sequence_value_info("items", TensorProto.FLOAT, None)
    path = model_file(tmp_path, "sequence.onnx", [sequence])
    status = main(["check", str(path), "--json", str(tmp_path / "r.json")])
    result = json.loads((tmp_path / "r.json").read_text())["results"][0]
    assert status == 3 and result["verdict"] == "not compared"
    assert "input 'items' is a sequence" in result["detail"] and "--load-inputs" in result["detail"]


def test_huge_declared_input_is_not_compared(tmp_path, capsys):
    path = model_file(tmp_path, "huge.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [100000, 100000])])
    status = main(["check", str(path), "--json", str(tmp_path / "r.json")])
    result = json.loads((tmp_path / "r.json").read_text())["results"][0]
    assert status == 3 and result["verdict"] == "not compared"
    assert "37.3 GiB" in result["detail"] and "[100000, 100000]" in result["detail"]


def test_ctrl_c_prints_the_summary_and_writes_the_partial_report(tmp_path):
    report = tmp_path / "partial.json"
    # SIGINT back to its default in the child: a test run started in the background of a shell without job
    # control inherits it ignored, and Python then installs no KeyboardInterrupt handler
    child = subprocess.Popen([sys.executable, "-m", "gathermultiaxis", "check", "--fuzz", "100000", "-v",
                              "--json", str(report)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in child.stdout:  # wait for a few results (not their indented inputs lines), then interrupt
        lines += [line] if not line.startswith(" ") else []
        if len(lines) == 5:
            break
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "Traceback" not in err and "interrupted after" in err
    summary = out.strip().splitlines()[-1]
    assert summary.endswith("(interrupted)") and "0 failed" in summary
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and 5 <= data["counts"]["passed"] < 100000
    assert len(data["results"]) == sum(data["counts"].values())
