"""graphs.modelfile: which models are accepted (what ORT loads), and external data carried from anywhere in a
model to the output without being read into memory, whatever the working folder."""

import os
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data
from sessions import file_session
from support import IR_VERSION, OPSET, assert_bit_identical, make_model

from gathermultiaxis import session_options
from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH
from gathermultiaxis.graphs import modelfile as model_io


def test_a_model_ort_refuses_gets_ort_reason(tmp_path, capsys):
    node = helper.make_node("Gather", ["data", "ids"], ["out"], axis=3, name="bad_axis")
    model = make_model([node], [helper.make_tensor_value_info("data", TensorProto.FLOAT, [2, 3]),
                                helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
                       [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    onnx.save_model(model, str(tmp_path / "bad.onnx"))
    assert main(["rewrite", str(tmp_path / "bad.onnx"), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err
    assert "ONNX Runtime cannot load it" in err and "axis must be in [-r, r-1]" in err, err
    assert err.count("\n") == 1 and not (tmp_path / "out.onnx").exists()



def bad_gather_model(declared: bool):
    """A Gather ORT refuses (axis 3 of a rank-2 table), its output a graph output or read by a Relu."""
    nodes = [helper.make_node("Gather", ["data", "ids"], ["out"], axis=3, name="bad_axis")]
    if not declared:
        nodes.append(helper.make_node("Relu", ["out"], ["relu"]))
    return make_model(nodes, [helper.make_tensor_value_info("data", TensorProto.FLOAT, [2, 3]),
                              helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
                      [helper.make_tensor_value_info("out" if declared else "relu", TensorProto.FLOAT, None)])


def test_a_refused_gather_the_rewrite_types_gets_ort_reason(tmp_path, capsys):
    # the input check is then the rewrite's own types session; it fails, and ORT's load of the file says why
    onnx.save_model(bad_gather_model(declared=False), str(tmp_path / "bad.onnx"))
    assert main(["rewrite", str(tmp_path / "bad.onnx"), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err
    assert "ONNX Runtime cannot load it" in err and "axis must be in [-r, r-1]" in err, err
    assert not (tmp_path / "out.onnx").exists()


def test_load_model_trusts_the_callers_session_only_where_it_loaded(tmp_path):
    path = tmp_path / "bad.onnx"
    onnx.save_model(bad_gather_model(declared=True), str(path))
    asked = []

    def loaded_by(answer):
        def session(model):
            asked.append(model.graph.node[0].name)
            return answer
        return session

    model, folder = model_io.load_model(path, session_options=session_options, loaded_by=loaded_by(True))
    assert folder is None and model.graph.node[0].name == "bad_axis"  # ORT was not asked again
    with pytest.raises(model_io.ModelFileError, match="ONNX Runtime cannot load it"):
        model_io.load_model(path, session_options=session_options, loaded_by=loaded_by(False))
    assert asked == ["bad_axis", "bad_axis"]
    data_path = tmp_path / "external.onnx"  # with external data the caller's session proves nothing: not asked
    external = bad_gather_model(declared=True)
    external.graph.initializer.add().CopyFrom(numpy_helper.from_array(np.zeros(300, np.float32), "unused"))
    onnx.save_model(external, str(data_path), save_as_external_data=True, location="external.onnx.data",
                    size_threshold=0)
    with pytest.raises(model_io.ModelFileError, match="ONNX Runtime cannot load it"):
        model_io.load_model(data_path, session_options=session_options, loaded_by=loaded_by(True))
    assert len(asked) == 2

def test_ort_internal_and_contrib_ops_and_outputs_without_shapes_are_accepted(tmp_path):
    """LayerNormalization in the ONNX domain at opset 13 and SimplifiedLayerNormalization exist only in
    ORT (onnx.checker refuses them: "No Op registered"); FastGelu is com.microsoft."""
    scale = numpy_helper.from_array(np.linspace(0.5, 1.5, 8).astype(np.float32), "scale")
    bias = numpy_helper.from_array(np.linspace(-1, 1, 8).astype(np.float32), "bias")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0, name="embed"),
             helper.make_node("LayerNormalization", ["rows", "scale", "bias"], ["normed"], axis=-1, epsilon=1e-5),
             helper.make_node("SimplifiedLayerNormalization", ["normed", "scale"], ["simple"], axis=-1, epsilon=1e-5),
             helper.make_node("FastGelu", ["simple", "bias"], ["out"], domain="com.microsoft")]
    table = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32), "table")
    model = make_model(nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                       [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], [table, scale, bias],
                       opset=13, extra_opsets=[helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(onnx.checker.ValidationError, match="'shape' of 'type' is required"):
        onnx.checker.check_model(model)
    shaped = onnx.ModelProto()
    shaped.CopyFrom(model)
    shaped.graph.output[0].type.tensor_type.shape.dim.add().dim_param = "n"
    shaped.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 8
    with pytest.raises(onnx.checker.ValidationError, match="No Op registered for LayerNormalization"):
        onnx.checker.check_model(shaped)
    source, target = tmp_path / "ort_internal.onnx", tmp_path / "out.onnx"
    onnx.save_model(model, str(source))
    assert main(["rewrite", str(source), "-o", str(target)]) == 0
    feeds = {"ids": np.array([15, 0, -3])}
    assert_bit_identical(file_session(target, True).run(None, feeds)[0],
                         file_session(source, False).run(None, feeds)[0])


# -- external data anywhere ----------------------------------------------------------------------

def _table(name: str, offset: float) -> TensorProto:
    return numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(512, 8) + offset, name)


def external_everywhere_model(folder: Path) -> Path:
    """Gathers over tables held (1) in an If branch's initializers, (2) in a Constant node of the other
    branch, (3) in a Constant node of a model-local function; every table in one external file."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])
    rows = helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["n", 8])
    then_branch = helper.make_graph([helper.make_node("Gather", ["branch_table", "ids"], ["then_rows"], axis=0)],
                                    "then", [], [helper.make_tensor_value_info("then_rows", TensorProto.FLOAT, ["n", 8])],
                                    [_table("branch_table", 0.25)])
    else_branch = helper.make_graph([helper.make_node("Constant", [], ["const_table"], value=_table("c", 0.5)),
                                     helper.make_node("Gather", ["const_table", "ids"], ["else_rows"], axis=0)],
                                    "else", [], [helper.make_tensor_value_info("else_rows", TensorProto.FLOAT, ["n", 8])])
    function = helper.make_function(
        "local", "Lookup", ["i"], ["o"],
        [helper.make_node("Constant", [], ["f_table"], value=_table("f", 0.75)),
         helper.make_node("Gather", ["f_table", "i"], ["o"], axis=0)],
        opset_imports=[helper.make_opsetid("", OPSET)])
    nodes = [helper.make_node("If", ["flag"], ["rows"], then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Lookup", ["ids"], ["function_rows"], domain="local")]
    graph = helper.make_graph(nodes, "external_everywhere",
                              [helper.make_tensor_value_info("flag", TensorProto.BOOL, []), ids],
                              [rows, helper.make_tensor_value_info("function_rows", TensorProto.FLOAT, ["n", 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)],
                              functions=[function], ir_version=IR_VERSION)
    convert_model_to_external_data(model, location="weights.bin", size_threshold=0, convert_attribute=True)
    path = folder / "everywhere.onnx"
    onnx.save_model(model, str(path))
    assert len(model_io.external_tensors(onnx.load_model(str(path), load_external_data=False))) == 3
    return path


def _outputs(path: Path, custom: bool, flag: bool) -> list[np.ndarray]:
    return file_session(path, custom).run(None, {"flag": np.array(flag), "ids": np.array([511, 0, -2])})


@pytest.mark.parametrize("run_from, options", [("model folder", []), ("another folder", []),
                                               ("another folder", ["--ort-optimize"])])
def test_external_data_anywhere_is_carried_to_the_output(tmp_path, monkeypatch, run_from, options):
    model_folder, out_folder, elsewhere = tmp_path / "model", tmp_path / "out", tmp_path / "elsewhere"
    for folder in (model_folder, out_folder, elsewhere):
        folder.mkdir()
    source = external_everywhere_model(model_folder)
    monkeypatch.chdir(model_folder if run_from == "model folder" else elsewhere)
    # relative paths on the command line, as a user would type them
    assert main(["rewrite", os.path.relpath(source), "-o", os.path.relpath(out_folder / "r.onnx"), *options]) == 0
    target = out_folder / "r.onnx"
    assert {p.name for p in out_folder.iterdir()} == {"r.onnx", "r.onnx.data"}
    written = onnx.load_model(str(target), load_external_data=False)
    locations = {model_io.external_entry(t)[0] for t in model_io.external_tensors(written)}
    assert locations == {"r.onnx.data"}  # nothing points back at the source's files
    monkeypatch.chdir(tmp_path)
    (model_folder / "weights.bin").rename(tmp_path / "moved.bin")  # the output must not need it
    for flag in (True, False):
        got = _outputs(target, True, flag)
        (tmp_path / "moved.bin").rename(model_folder / "weights.bin")
        want = _outputs(source, False, flag)
        (model_folder / "weights.bin").rename(tmp_path / "moved.bin")
        for g, w in zip(got, want):
            assert_bit_identical(g, w)


def test_data_file_offsets_are_aligned_and_holes_stay_holes(tmp_path):
    zeros = numpy_helper.from_array(np.zeros((1 << 20,), np.float32), "zeros")  # 4 MiB of zeros
    node = helper.make_node("Gather", ["zeros", "ids"], ["out"], axis=0)
    model = make_model([node], [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                       [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n"])],
                       [zeros, _table("odd", 1.0)])
    model_io.save_model(model, tmp_path / "m.onnx", external_data=True)
    written = onnx.load_model(str(tmp_path / "m.onnx"), load_external_data=False)
    offsets = [model_io.external_entry(t)[1] for t in model_io.external_tensors(written)]
    assert len(offsets) == 2 and all(offset % model_io.DATA_ALIGNMENT == 0 for offset in offsets)
    data = tmp_path / "m.onnx.data"
    assert data.stat().st_blocks * 512 < (1 << 20)  # the 4 MiB of zeros were not written out
    reloaded = onnx.load_model(str(tmp_path / "m.onnx"))
    assert_bit_identical(numpy_helper.to_array(reloaded.graph.initializer[1]), numpy_helper.to_array(_table("", 1.0)))
    assert not numpy_helper.to_array(reloaded.graph.initializer[0]).any()


def test_big_model_script_on_a_small_table(tmp_path):
    """The 2.2 GB memory measurement (gathermultiaxis bench --big-model), run on 10 MB so it stays
    working; its number is a benchmark, not asserted here."""
    from gathermultiaxis.bench.bigmodel import measure

    run = measure(0.01, tmp_path)
    assert run.exit_status == 0 and run.rows_match, run.stderr
    assert run.output_disk_bytes < run.output_bytes  # the sparse table stayed sparse


# -- issue 18 item 21: existing files are refused when the file is moved into place -----------------

def test_a_target_that_appears_during_the_write_is_not_overwritten(tmp_path):
    model, folder = model_io.load_model(EXAMPLE_PATH, session_options=session_options)
    for external in (False, True):
        target = tmp_path / f"out_{external}.onnx"

        def another_writer_finishes_first(staged):  # runs after the start check, before the move
            target.write_text("the other writer's model")
            Path(f"{target}.data").write_text("the other writer's data")

        with pytest.raises(model_io.ModelFileError, match="already exists .written by something else"):
            model_io.save_model(model, target, external_data=external, validate=another_writer_finishes_first)
        assert target.read_text() == "the other writer's model"
        assert Path(f"{target}.data").read_text() == "the other writer's data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out_False.onnx", "out_False.onnx.data",
                                                          "out_True.onnx", "out_True.onnx.data"]


def test_the_data_file_is_taken_back_when_the_model_cannot_be_placed(tmp_path):
    model, _ = model_io.load_model(EXAMPLE_PATH, session_options=session_options)
    target = tmp_path / "out.onnx"
    with pytest.raises(model_io.ModelFileError, match="already exists"):
        model_io.save_model(model, target, external_data=True, validate=lambda staged: target.write_text("other"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.onnx"] and target.read_text() == "other"


# -- issue 18 item 20: file names that are not UTF-8 ---------------------------------------------------

needs_bytes_names = pytest.mark.skipif(os.name != "posix" or sys.platform == "darwin",
                                       reason="file names that are not UTF-8 exist on Linux-like systems only")


@needs_bytes_names
def test_rewrite_and_lower_take_a_file_name_that_is_not_utf8(tmp_path, capsys):
    source = Path(os.fsdecode(bytes(tmp_path) + b"/model\xff\xfe.onnx"))
    source.write_bytes(EXAMPLE_PATH.read_bytes())
    rewritten = Path(os.fsdecode(bytes(tmp_path) + b"/rewritten\xff.onnx"))
    assert main(["rewrite", str(source), "-o", str(rewritten), "-q"]) == 0
    assert main(["lower", str(rewritten), "-o", str(tmp_path / "lowered.onnx"), "-q"]) == 0
    assert main(["check", str(source), "-v"]) == 0
    assert "model\\xff\\xfe.onnx" in capsys.readouterr().out  # the name shown, its bytes escaped


@needs_bytes_names
def test_external_data_beside_a_model_whose_name_is_not_utf8(tmp_path, capsys):
    source = external_everywhere_model(tmp_path)
    renamed = Path(os.fsdecode(bytes(source) + b"\xff"))
    source.rename(renamed)
    assert main(["rewrite", str(renamed), "-o", str(tmp_path / "out.onnx"), "-q"]) == 0
    # the output's data file would be named after it, and ONNX stores that location as UTF-8
    assert main(["rewrite", str(renamed), "-o", os.fsdecode(bytes(tmp_path) + b"/out\xff.onnx")]) == 2
    assert "not valid UTF-8" in capsys.readouterr().err
