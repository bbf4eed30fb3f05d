"""``bench --end-to-end`` and ``bench --big-graph`` as smoke tests: they run and report every column.
No timing assertions (the machine is shared); the numbers come from full runs of the commands."""

import json

import numpy as np
import pytest

from gathermultiaxis.bench import end_to_end
from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH


def test_end_to_end_bundled_example(tmp_path, capsys):
    report = tmp_path / "e2e.json"
    assert main(["bench", "--end-to-end", str(EXAMPLE_PATH), "--repeats", "3", "--processes", "1",
                 "--json", str(report)]) == 0
    [row] = json.loads(report.read_text())
    assert (row["model"], row["shape"], row["rewritten_gathers"], row["bit_identical"], row["processes"]) == (
        "gathers.onnx", "[1, 16]", 6, True, 1)
    assert set(row["median_ms"]) == set(end_to_end.COLUMNS) and min(row["median_ms"].values()) > 0
    low, high = row["spread"]["rewritten / builtin"]
    assert low == row["ratios"]["rewritten / builtin"] == high  # one round
    assert row["ratios"]["rewritten / builtin"] == max(row["ratios"]["rewrite --ort-optimize / builtin"],
                                                       row["ratios"]["rewrite / builtin"])
    # the example's gathers each have one standard gather: the sessions as users create them run them builtin,
    # the kernel-only session makes one bridge call per node left after ORT's folding (fewer once grouped)
    default, kernel = row["sessions"]["rewrite --ort-optimize"], row["sessions"]["kernel only"]
    assert default["crossings"] == 0 and default["builtin_gathers"] >= 1
    assert kernel["builtin_gathers"] == 0 and 1 <= kernel["crossings"] <= default["builtin_gathers"]
    assert 0 <= kernel["bound_tables"] <= kernel["crossings"]
    assert default["reasons"] == {} and set(kernel["reasons"]) <= {"kernel only asked", "bound table",
                                                                    "group of bound tables"}
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if line.startswith("| gathers.onnx |")]
    assert line.startswith(f"| gathers.onnx | [1, 16] | 6 | {default['builtin_gathers']} / 0 / 0 | ")
    per_crossing = (row["median_ms"]["kernel only"] - row["median_ms"]["builtin"]) * 1e3 / kernel["crossings"]
    assert row["us_per_crossing"] == pytest.approx(per_crossing)
    assert f"| 0 / {kernel['crossings']} / {kernel['bound_tables']} | {per_crossing:.1f} | yes / " in line
    assert f"crossings left: gathers.onnx, kernel only: {kernel['crossings']} a run; bridge nodes: " in out
    assert "| geometric mean |" in out and "goal: geometric mean of rewritten / builtin <= 1.4x" in out
    assert "goal: no model over 2.5x: worst gathers.onnx" in out and "fewer than 2 rounds" in out


def test_end_to_end_under_load_counts_the_worse_round(tmp_path, capsys, monkeypatch):
    """--load N runs N busy loops beside the measurement (and ends them); the ratio is the worse round's."""
    started = []
    monkeypatch.setattr(end_to_end, "busy_loops", lambda count, make=end_to_end.busy_loops: started.extend(make(count)) or started)
    report = tmp_path / "e2e.json"
    assert main(["bench", "end-to-end", str(EXAMPLE_PATH), "--repeats", "3", "--processes", "2", "--load", "2",
                 "--json", str(report)]) == 0
    [row] = json.loads(report.read_text())
    low, high = row["spread"]["rewritten / builtin"]
    assert row["processes"] == 2 and low <= high == row["ratios"]["rewritten / builtin"]
    out = capsys.readouterr().out
    assert "under load: 2 busy-loop processes" in out and "worse of its 2+ fresh-process rounds)" in out
    assert len(started) == 2 and all(loop.poll() == -9 for loop in started)  # running until killed at the end


def test_end_to_end_on_a_folder_of_model_folders(tmp_path, capsys):
    """A folder of model folders: each model found, its row named by its path in the folder, the
    ``inputs.npz`` beside it used; every row of the table, delimiter and geometric mean included, has the
    header's number of cells."""
    from gathermultiaxis.examples import example_inputs

    (tmp_path / "models" / "example").mkdir(parents=True)
    assert main(["example", str(tmp_path / "models" / "example" / "model.onnx")]) == 0
    np.savez(tmp_path / "models" / "example" / "inputs.npz", **example_inputs(seed=3))
    (tmp_path / "models" / "other").mkdir()
    assert main(["example", str(tmp_path / "models" / "other" / "model.onnx")]) == 0
    assert [name for _, name in end_to_end.named_model_paths([str(tmp_path / "models")])] == [
        "example/model.onnx", "other/model.onnx"]
    (tmp_path / "models" / "other" / "model.onnx").unlink()  # one model is timed: the test stays short
    capsys.readouterr()
    report = tmp_path / "e2e.json"
    assert main(["bench", "end-to-end", str(tmp_path / "models"), "--repeats", "2", "--processes", "1",
                 "--json", str(report)]) == 0
    [row] = json.loads(report.read_text())
    assert (row["model"], row["shape"], row["bit_identical"]) == ("example/model.onnx", "inputs.npz", True)
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert [line.split("|")[1].strip() for line in table] == ["model", "---", "example/model.onnx", "geometric mean"]
    assert len({line.count("|") for line in table}) == 1, table
    header, mean = table[0].strip("|").split("|"), table[-1].strip("|").split("|")
    assert header[-5].strip() == "rewritten / builtin" and mean[-5].strip() == f"{row['ratios']['rewritten / builtin']:.2f}"


def test_end_to_end_refuses_a_folder_without_models(tmp_path, capsys):
    assert main(["bench", "--end-to-end", str(tmp_path)]) == 2
    assert "no .onnx file" in capsys.readouterr().err


@pytest.mark.slow
def test_end_to_end_on_a_real_export(tmp_path, capsys):
    pytest.importorskip("torch", reason="torch is not installed: no export to time")
    pytest.importorskip("transformers", reason="transformers is not installed: no export to time")
    from gathermultiaxis.exports.models import build_exports

    written, skipped = build_exports(tmp_path, ["gpt2_torchscript"])
    assert [p.name for p in written] == ["gpt2_torchscript.onnx"], skipped
    assert (tmp_path / "gpt2_torchscript.inputs.npz").is_file()
    report = tmp_path / "e2e.json"
    assert main(["bench", "--end-to-end", str(tmp_path), "--repeats", "3", "--processes", "1",
                 "--json", str(report)]) == 0
    [row] = json.loads(report.read_text())
    assert row["shape"] == "gpt2_torchscript.inputs.npz" and row["rewritten_gathers"] > 0 and row["bit_identical"]
    assert "gpt2_torchscript.onnx" in capsys.readouterr().out


def test_big_graph_row_on_a_small_chain(tmp_path, capsys):
    report = tmp_path / "graph.json"
    assert main(["bench", "--big-graph", "20", "--repeats", "1", "--json", str(report)]) == 0
    [run] = json.loads(report.read_text())
    assert (run["gathers"], run["nodes"], run["output_loads"], run["against"]) == (20, 40, True, None)
    assert run["rewrite"]["cpu_seconds"][0] > 0
    for key in ("rewrite", "load_infer_save", "ort_load", "python_startup"):
        assert len(run[key]["seconds"]) == 1 and run[key]["seconds"][0] > 0 and run[key]["peak_rss_mib"][0] > 0
    assert "| gathermultiaxis rewrite |" in capsys.readouterr().out


@pytest.mark.parametrize("argv, note", [
    (["bench", "end-to-end", str(EXAMPLE_PATH), "--repeats", "2", "--processes", "1"], False),
    (["bench", "--repeats", "2", "end-to-end", str(EXAMPLE_PATH), "--processes", "1"], False),
    (["bench", "--end-to-end", str(EXAMPLE_PATH), "--repeats", "2", "--processes", "1"], True),
], ids=["job", "option-before-job", "old-flag"])
def test_bench_jobs_and_their_old_flags(tmp_path, capsys, argv, note):
    """``bench JOB``; an option given before the job is kept; the old flag works and names the new spelling."""
    report = tmp_path / "e2e.json"
    assert main(argv + ["--json", str(report)]) == 0
    [row] = json.loads(report.read_text())
    assert row["processes"] == 1 and row["bit_identical"] and len(row["spread"]) == len(end_to_end.TIMED) + 1
    err = capsys.readouterr().err
    assert ("note: `bench --end-to-end` is now `bench end-to-end MODEL|FOLDER...`" in err) == note


def test_crossing_reasons_say_why_each_bridge_node_is_left():
    """Axes known only at run time: the default session keeps the node for that reason; kernel only was asked;
    a constant table is bound; the reason lines show them with the crossings a run."""
    from onnx import TensorProto, helper, numpy_helper
    from support import gather_multiaxis_model, make_model

    run_time_axes = gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64)
    assert end_to_end.crossing_reasons(run_time_axes, "rewrite --ort-optimize") == {
        "no builtin form: axes or ranks known only at run time": 1}
    assert end_to_end.crossing_reasons(run_time_axes, "kernel only") == {"kernel only asked": 1}
    node = helper.make_node("GatherMultiaxis", ["table", "ids", "axes"], ["rows"], domain="ai.onnx.contrib",
                            mode="error")
    bound = make_model([node], [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 2])],
                       [helper.make_tensor_value_info("rows", TensorProto.FLOAT, None)],
                       [numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "table"),
                        numpy_helper.from_array(np.array([0, 1], np.int64), "axes")],
                       extra_opsets=[helper.make_opsetid("ai.onnx.contrib", 1)])
    assert end_to_end.crossing_reasons(bound, "kernel only") == {"bound table": 1}
    row = end_to_end.ModelRow("m.onnx", "-", 1, True, None, sessions={
        "rewrite --ort-optimize": {"crossings": 0, "reasons": {}},
        "kernel only": {"crossings": 3, "reasons": {"kernel only asked": 2, "bound table": 1}}})
    assert end_to_end.reason_lines([row]) == [
        "crossings left: m.onnx, kernel only: 3 a run; bridge nodes: 2 kernel only asked, 1 bound table"]
