"""`check` on hostile files (issue 18): --load-inputs bombs and wrong file kinds (items 5, 18), models
named on the command line that are truncated or whose external data is missing or outside their folder
(item 17), models with external data, over 2 GiB included (item 16), and a --json report another run
wrote meanwhile (item 21)."""

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gathermultiaxis.conformance import cases
from gathermultiaxis.conformance.cases import FileSource, load_case
from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH


def one_line_exit_2(args, capsys, *messages):
    status = main(args)
    err = capsys.readouterr().err
    assert status == 2, err
    assert all(message in err for message in messages) and err.count("\n") == 1, err
    return err


# -- items 5 and 18: --load-inputs -----------------------------------------------------------------

def zeros_npz(path: Path, count: int) -> None:
    """An .npz holding ``count`` float64 zeros, written in chunks (compressed: a few KiB per 8 MiB)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("x.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False, "shape": (count,)})
            for start in range(0, count, 1 << 20):
                member.write(bytes(8 * min(1 << 20, count - start)))


def test_a_compressed_npz_over_the_limit_is_refused_before_decompressing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cases, "LOADED_BYTES_LIMIT", 1 << 20)  # the limit's logic at a small scale
    zeros_npz(tmp_path / "bomb.npz", 1 << 18)  # 2 MiB unpacked
    assert (tmp_path / "bomb.npz").stat().st_size < 64 << 10
    one_line_exit_2(["check", "--load-inputs", str(tmp_path / "bomb.npz"), str(EXAMPLE_PATH)], capsys,
                    "bomb.npz: x.npy", "over the 0.000976562 GiB limit on loaded inputs")


def test_the_limit_counts_every_file_of_a_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cases, "LOADED_BYTES_LIMIT", 3 << 20)
    for name in ("a.npz", "b.npz"):
        zeros_npz(tmp_path / name, 1 << 18)  # 2 MiB each: one fits, two do not
    one_line_exit_2(["check", "--load-inputs", str(tmp_path), str(EXAMPLE_PATH)], capsys, "b.npz: x.npy",
                    "(all files together)")


def test_an_npy_header_larger_than_its_member_is_refused(tmp_path, capsys):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**9,)})
    with zipfile.ZipFile(tmp_path / "liar.npz", "w") as archive:
        archive.writestr("x.npy", header.getvalue() + bytes(80))
    one_line_exit_2(["check", "--load-inputs", str(tmp_path / "liar.npz"), str(EXAMPLE_PATH)], capsys,
                    "declares shape [1000000000] float64 (7.45 GiB) but holds only")


@pytest.mark.slow
def test_a_real_npz_bomb_is_refused_with_little_memory(tmp_path):
    """At the real limit (1 GiB), in a child process: the refusal reads the declared sizes only."""
    zeros_npz(tmp_path / "bomb.npz", 9 << 24)  # 1.1 GiB unpacked, 5 MiB packed
    script = ("import resource, sys\nfrom gathermultiaxis.conformance.cases import BadInput, load_inputs\n"
              "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
              "try:\n    load_inputs(sys.argv[1])\nexcept BadInput as error:\n    print(error)\n"
              "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "bomb.npz")], capture_output=True,
                          text=True, timeout=300)
    refusal, growth_kib = done.stdout.strip().splitlines()
    assert "1.13 GiB, over the 1 GiB limit" in refusal
    assert int(growth_kib) < 64 << 10, f"peak grew by {int(growth_kib) >> 10} MiB"  # 1.1 GiB when unpacked


@pytest.mark.parametrize("name,content,message", [
    ("x.npy", None, "is a .npy file, one array without a name; inputs are matched by name"),
    ("garbage.npz", b"not a zip at all, not pickled either" * 4, "is not an .npz file (not a zip archive"),
    ("objects.npz", "objects", "holds Python objects (dtype object), which are never unpickled"),
    ("other.npz", "other", "holds 'notes.txt', not an .npy array"),
])
def test_wrong_kinds_of_input_files_are_named(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    if name.endswith(".npy"):
        np.save(path, np.zeros(3))
    elif content == "objects":
        np.savez(path, x=np.array([{"a": 1}], dtype=object))
    elif content == "other":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("notes.txt", "hello")
    else:
        path.write_bytes(content)
    err = one_line_exit_2(["check", "--load-inputs", str(path), str(EXAMPLE_PATH)], capsys, message)
    assert "allow_pickle" not in err and "context manager" not in err


def test_a_good_npz_still_loads(tmp_path):
    np.savez(tmp_path / "in.npz", ids=np.array([1, 2]), words=np.array(["a", "bc"]))
    (data_set,) = cases.load_inputs(str(tmp_path / "in.npz"))
    assert sorted(data_set.feeds) == ["ids", "words"] and data_set.feeds["words"].tolist() == ["a", "bc"]


# -- item 17: models named on the command line that cannot be read ---------------------------------

def external_model(folder: Path, location: str = "weights.bin", rows: int = 64) -> Path:
    """A Gather over a [rows, 1024] float table in external data (zeros: a sparse file), and a Gather
    over the table's shape (which reads none of it)."""
    table = TensorProto(name="table", data_type=TensorProto.FLOAT, dims=[rows, 1024],
                        data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", "0"), ("length", str(rows * 4096))):
        table.external_data.add(key=key, value=value)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0, name="embed"),
             helper.make_node("Shape", ["table"], ["shape"]),
             helper.make_node("Gather", ["shape", "which"], ["dim"], axis=0, name="dim")]
    graph = helper.make_graph(nodes, "external", [helper.make_tensor_value_info("ids", TensorProto.INT64, [3]),
                                                  helper.make_tensor_value_info("which", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("rows", TensorProto.FLOAT, [3, 1024]),
                               helper.make_tensor_value_info("dim", TensorProto.INT64, [1])], [table])
    path = folder / "model.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    data = (folder / location).resolve()
    if data.parent.is_dir():
        with open(data, "wb") as file:
            file.truncate(rows * 4096)
    return path


def test_truncated_model_named_directly_is_exit_2(tmp_path, capsys):
    (tmp_path / "cut.onnx").write_bytes(EXAMPLE_PATH.read_bytes()[:3000])
    one_line_exit_2(["check", str(tmp_path / "cut.onnx")], capsys, "cut.onnx: not a readable ONNX model")


def test_missing_external_data_named_directly_is_exit_2(tmp_path, capsys):
    path = external_model(tmp_path)
    (tmp_path / "weights.bin").unlink()
    one_line_exit_2(["check", str(path)], capsys, "model.onnx: external data file 'weights.bin' of 'table' is missing")


def test_external_data_outside_the_folder_named_directly_is_exit_2(tmp_path, capsys):
    (tmp_path / "model").mkdir()
    path = external_model(tmp_path / "model", location="../outside.bin")
    assert (tmp_path / "outside.bin").exists()
    one_line_exit_2(["check", str(path)], capsys, "points outside the model's folder ('../outside.bin'")


def test_a_bad_model_found_in_a_folder_is_a_verdict_not_exit_2(tmp_path, capsys):
    (tmp_path / "cut.onnx").write_bytes(EXAMPLE_PATH.read_bytes()[:3000])
    assert main(["check", str(tmp_path)]) == 3
    assert "not runnable" in capsys.readouterr().out


# -- item 16: external data stays in its files ------------------------------------------------------

def test_check_leaves_external_data_to_ort(tmp_path, capsys):
    path = external_model(tmp_path)
    case = load_case(FileSource(str(path)))
    assert case.model.graph.initializer[0].data_location == TensorProto.EXTERNAL  # not read in
    assert case.external_data_folder == str(tmp_path.resolve())
    assert main(["check", str(path), "--json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["counts"]["passed"] == 1


@pytest.mark.slow
def test_a_model_over_2_gib_is_checked(tmp_path):
    """A 2.2 GiB table (a sparse file: no disk, no memory) read only through its shape: `check` passes
    it instead of calling it "not runnable" (the model used to be serialized, over protobuf's limit)."""
    path = external_model(tmp_path, rows=576_716)
    graph = onnx.load_model(str(path), load_external_data=False)
    del graph.graph.node[0]  # no Gather over the table itself: its rows would cross the PyOp bridge
    del graph.graph.output[0]
    onnx.save_model(graph, str(path))
    done = subprocess.run([sys.executable, "-m", "gathermultiaxis", "check", str(path), "--json",
                           str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["counts"]["passed"] == 1
    assert os.stat(tmp_path / "weights.bin").st_blocks == 0  # still sparse: nothing was written


# -- item 21: a report written meanwhile is not overwritten -------------------------------------------

def test_a_report_written_during_the_run_is_not_overwritten(tmp_path, capsys, monkeypatch):
    report = tmp_path / "r.json"
    from gathermultiaxis.conformance import check

    real_run = check.run

    def run_while_another_writes(*args, **kwargs):
        result = real_run(*args, **kwargs)
        report.write_text("the other run's report")  # a second check with the same --json finished first
        return result

    monkeypatch.setattr(check, "run", run_while_another_writes)
    status = main(["check", str(EXAMPLE_PATH), "--json", str(report)])
    captured = capsys.readouterr()
    assert status == 2, captured.err
    assert "r.json: already exists" in captured.err
    assert captured.err.count("\n") == 1 and "passed" in captured.out  # the results are still printed
    assert report.read_text() == "the other run's report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no staging leftovers
