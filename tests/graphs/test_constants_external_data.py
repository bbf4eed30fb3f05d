"""Constants kept in external files (issue 30, items 1 and 3): the passes read a constant's values only
where they need them, only from the model's folder (never the working folder), and never a table that
is only gathered from; ``lower --target webnn`` costs about what ``lower`` does."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.cli import main
from gathermultiaxis.graphs import lower_model, rewrite_model
from gathermultiaxis.graphs.modelfile import ExternalDataError
from gathermultiaxis.graphs.passes import ConstantView
from gathermultiaxis.graphs.webnn import lower_for_webnn, webnn_check


def save_external(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path), save_as_external_data=True, location=path.name + ".data", size_threshold=0)
    return path


def lookup_model(table: np.ndarray) -> onnx.ModelProto:
    """rows = table[ids], then each row's maximum: a table of 100 KiB (over the 64 KiB load_model reads in)."""
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"], name="lookup", axis=0),
             helper.make_node("ReduceMax", ["rows"], ["y"], name="row_max", axes=[1], keepdims=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              [numpy_helper.from_array(table, "table")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def folded_lookup_model(table: np.ndarray) -> onnx.ModelProto:
    """y = table[[5, 7]] + x, an int64 table of 160 KiB: the WebNN target folds the lookup at constant
    indices (it is all constants) into the output's constant."""
    indices = numpy_helper.from_array(np.array([5, 7], np.int64), "")
    nodes = [helper.make_node("Constant", [], ["idx"], value=indices),
             helper.make_node("Gather", ["table", "idx"], ["rows"], name="lookup", axis=0),
             helper.make_node("Add", ["rows", "x"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [2])],
                              [numpy_helper.from_array(table, "table")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_lower_for_webnn_reads_the_models_folder_not_the_working_folder(tmp_path, monkeypatch):
    """Run from a folder that holds another model's data file of the same name: the lowering folded that
    file's bytes into its output, which returned [1000 1000] for [5 7], with exit 0."""
    rewritten, _ = rewrite_model(folded_lookup_model(np.arange(20000, dtype=np.int64)))
    path = save_external(rewritten, tmp_path / "model" / "rewritten.onnx")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "rewritten.onnx.data").write_bytes(np.full(20000, 1000, np.int64).tobytes())
    monkeypatch.chdir(tmp_path / "other")
    output = tmp_path / "lowered.onnx"
    assert main(["lower", "--target", "webnn", str(path), "-o", str(output)]) == 0
    session = ort.InferenceSession(str(output), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.zeros(2, np.int64)})[0].tolist() == [5, 7]


COMMANDS = {
    "lower": ["lower", "{rewritten}", "-o", "{out}"],
    "lower --target webnn": ["lower", "--target", "webnn", "{rewritten}", "-o", "{out}"],
    "webnn-check": ["webnn-check", "{model}"],
    "check --lowered": ["check", "--lowered", "{model}"],
    "check --webnn": ["check", "--webnn", "{model}"],
    "policies": ["policies", "--out-of-range", "{model}"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_gives_the_same_from_any_folder(command, tmp_path, monkeypatch, capsys):
    """From the model's folder and from an empty one: the same exit status and output (they raised, or
    gave a "failed" verdict, from another folder)."""
    source = save_external(lookup_model(np.arange(100 * 256, dtype=np.float32).reshape(100, 256)),
                           tmp_path / "model" / "model.onnx")
    rewritten, _ = rewrite_model(onnx.load_model(str(source), load_external_data=False))
    save_external(rewritten, source.with_name("rewritten.onnx"))
    (tmp_path / "elsewhere").mkdir()
    results = []
    for folder in (source.parent, tmp_path / "elsewhere"):
        monkeypatch.chdir(folder)
        argv = [part.format(model=source, rewritten=source.with_name("rewritten.onnx"), out=folder / "out.onnx")
                for part in COMMANDS[command]]
        code = main(argv)
        out = capsys.readouterr().out.replace(str(folder / "out.onnx"), "OUT")
        # check's timings, and the column padding their widths set (9.87 and 10.12 pad differently)
        results.append((code, re.sub(r" +", " ", re.sub(r"\d+\.\d\d\b", "(time)", out))))
    assert results[0] == results[1], results
    assert results[0][0] == (1 if command == "webnn-check" else 0), results[0]


def test_a_table_only_gathered_from_is_never_read(tmp_path, monkeypatch):
    """Its values decide nothing in the lowering: without the model's folder (so that any read raises),
    from an empty working folder, both targets lower the lookup; webnn_check reads nothing either."""
    source = save_external(lookup_model(np.ones((100, 256), np.float32)), tmp_path / "model" / "model.onnx")
    rewritten, _ = rewrite_model(onnx.load_model(str(source), load_external_data=False))
    monkeypatch.chdir(tmp_path)
    for lower in (lower_model, lower_for_webnn):
        lowered, report = lower(rewritten)
        assert report.left == 0 and report.lowered == 1, report.table()
    assert webnn_check(rewritten) and webnn_check(onnx.load_model(str(source), load_external_data=False))
    with pytest.raises(ExternalDataError, match="folder is not known"):
        ConstantView(rewritten.graph)["table"]


def test_the_constant_view_reads_with_the_checks_onnx_runtime_makes(tmp_path):
    """Read from the model's folder, the values are the table's; a location outside it is refused, as
    ORT refuses it (modelfile.check_external_data), not read."""
    table = np.arange(100 * 256, dtype=np.float32).reshape(100, 256)
    source = save_external(lookup_model(table), tmp_path / "model" / "model.onnx")
    model = onnx.load_model(str(source), load_external_data=False)
    view = ConstantView(model.graph, external_data_folder=source.parent)
    assert view.dtype("table") == np.float32 and view.size("table") == table.size
    np.testing.assert_array_equal(view["table"], table)
    (entry,) = [e for e in model.graph.initializer[0].external_data if e.key == "location"]
    entry.value = "../model/model.onnx.data"  # the same file, through the parent: outside the folder
    with pytest.raises(ExternalDataError, match="outside the model's folder"):
        ConstantView(model.graph, external_data_folder=tmp_path / "model" / "sub")["table"]


def test_webnn_lowering_memory_is_near_the_default_targets():
    """A gather that only the flat form computes, over a 38.6M-element float32 table kept in a (sparse)
    external file: ONNX's data propagation over the flat form's Reshape to 1-D and Gather took 2.7 GiB
    (about 70 bytes an element) and the table was read whole (147 MiB). In a child: each target may
    add at most 96 MiB to the peak RSS (the table is 147 MiB)."""
    script = textwrap.dedent("""
        import os, resource, sys, tempfile, numpy as np
        from onnx import helper, numpy_helper, TensorProto as T
        from gathermultiaxis.graphs import lower_model
        from gathermultiaxis.graphs.webnn import lower_for_webnn
        from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE
        def flat_form_model(table):
            node = helper.make_node(OP_TYPE, ["table", "i", "axes"], ["y"], domain=DOMAIN, mode="error")
            graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("i", T.INT64, [6, 1, 2])],
                                      [helper.make_tensor_value_info("y", T.FLOAT, None)],
                                      [table, numpy_helper.from_array(np.array([2, 0], np.int64), "axes")])
            return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                                     ir_version=8)
        small = flat_form_model(numpy_helper.from_array(np.zeros((4, 1, 5), np.float32), "table"))
        lower_model(small), lower_for_webnn(small)  # imports and first-use costs
        folder = tempfile.mkdtemp()
        dims = [768, 1, 50257]
        with open(os.path.join(folder, "table.bin"), "wb") as data:
            data.truncate(768 * 50257 * 4)  # zeros, in no disk block
        table = T(name="table", data_type=T.FLOAT, dims=dims, data_location=T.EXTERNAL)
        for key, value in (("location", "table.bin"), ("offset", "0"), ("length", str(768 * 50257 * 4))):
            table.external_data.add(key=key, value=value)
        model = flat_form_model(table)
        os.chdir(folder)  # (where the code before this fix read the table from; now nothing reads it)
        peaks = [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024]
        lowered, report = lower_model(model)
        assert report.lowered == 1, report.table()
        peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
        lowered, report = lower_for_webnn(model)
        assert report.as_dict()["forms"] == {"general": 1}, report.table()
        peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
        again, report = lower_model(lowered)  # its inference of the flat form's Reshape to 1-D and Gather
        assert report.outcomes == [] and len(again.graph.node) == len(lowered.graph.node)
        peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
        print(*peaks)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    before, after_default, after_webnn, after_again = map(int, result.stdout.split()[-4:])
    print(f"peak RSS {before} MiB before, {after_default} MiB after lower, {after_webnn} MiB after the WebNN target, "
          f"{after_again} MiB after lower of its result")
    assert after_default - before < 96 and after_webnn - before < 96 and after_again - before < 96


def test_an_impossible_input_shape_is_bad_input(tmp_path, capsys):
    """More elements than int64 counts: exit 2 with one line (an OverflowError's traceback before)."""
    model = lookup_model(np.ones((100, 256), np.float32))
    model.graph.input[0].CopyFrom(helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", "m"]))
    model.graph.node[1].attribute[0].ints[:] = [2]
    rewritten, _ = rewrite_model(model)
    onnx.save_model(rewritten, str(tmp_path / "rewritten.onnx"))
    assert main(["lower", "--target", "webnn", str(tmp_path / "rewritten.onnx"), "-o", str(tmp_path / "out.onnx"),
                 "--input-shapes", "ids:[10000000000,10000000000]"]) == 2
    assert "impossible: 100000000000000000000 elements, more than int64 counts" in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


def test_shape_inference_never_swallows_a_memory_error(monkeypatch):
    """A MemoryError in ONNX's inference is not "no inference" (the pass would go on with fewer types and
    give another result, silently): it propagates."""
    import onnx.shape_inference

    from gathermultiaxis.graphs.ranks.shape_inference import inferred
    from gathermultiaxis.graphs.ranks.typing_copy import typing_copy

    def out_of_memory(*args, **kwargs):
        raise MemoryError("std::bad_alloc")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", out_of_memory)
    with pytest.raises(MemoryError):
        inferred(typing_copy(lookup_model(np.ones((4, 3), np.float32))))
