"""The conformance runner: every verdict, inputs, reports, and catching a broken rewrite."""

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import assert_bit_identical, make_model

from gathermultiaxis.conformance import check
from gathermultiaxis.conformance.check_results import VERDICTS
from gathermultiaxis.conformance.cases import CheckCase, DataSet, FileSource, InputOptions, default_suite
from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH
from gathermultiaxis.conformance.fuzz import fuzz_case, save_reproducer
from gathermultiaxis.graphs.rewrite import replacement as rules
from gathermultiaxis.ops.alignment import Alignment

T = TensorProto
# onnx 1.23's node tests: 84 hold a gather (older onnx ships fewer: 35 in 1.16)
ONNX_1_23 = tuple(int(part) for part in onnx.__version__.split(".")[:2]) >= (1, 23)


def run_check(args, tmp_path, capsys):
    report = tmp_path / "check.json"
    status = main(["check", *args, "--json", str(report), "--force"])
    return status, json.loads(report.read_text()), capsys.readouterr().out


def save(model, path):
    onnx.save_model(model, str(path))
    return path


def gather_after(nodes, inputs, outputs, initializers=()):
    """``nodes`` followed by a Gather of their output ``y`` (so that the model holds a gather)."""
    gather = helper.make_node("Gather", ["y", "zero"], ["out"], axis=0, name="pick")
    return make_model([*nodes, gather], inputs, [helper.make_tensor_value_info("out", T.FLOAT, None)],
                      [numpy_helper.from_array(np.array(0, np.int64), "zero"), *initializers])


def reshaped_to_rows(rows: int):
    """A model that accepts only inputs whose size is a multiple of ``rows`` (x has a symbolic dim)."""
    shape = numpy_helper.from_array(np.array([rows, -1], np.int64), "shape")
    return gather_after([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                        [helper.make_tensor_value_info("x", T.FLOAT, ["n"])], [], [shape])


# -- verdicts ------------------------------------------------------------------------------------

def test_default_suite_passes_everything_ort_can_run(tmp_path, capsys, report_line):
    status, report, out = run_check(["-q"], tmp_path, capsys)
    results = report["results"]
    report_line(f"gathermultiaxis check (default suite): {report['summary']}")
    assert status == 0
    assert report["counts"]["passed"] >= (79 if ONNX_1_23 else 30)
    assert report["counts"]["failed"] == report["counts"]["not compared"] == 0
    assert set(report["counts"]) == set(VERDICTS) and all(type(n) is int for n in report["counts"].values())
    gather_tests = [r for r in results if r["name"].startswith(("test_gather_", "test_gather_elements", "test_gathernd"))]
    assert len(gather_tests) >= 9
    for r in gather_tests:  # the three ops' own tests: rewritten, run, and equal to ONNX's expected outputs
        assert (r["verdict"], r["rewritten"], r["left"], r["expected"]) == ("passed", 1, 0, "exact"), r
    for r in results:  # everything else within the tolerance of ONNX's backend tests, every gather rewritten
        assert r["verdict"] == "not runnable" or (r["expected"] in ("exact", "close", "") and r["left"] == 0), r
        assert r["verdict"] == "not runnable" or r["compared"] >= 1, r
    assert all(r["detail"] for r in results if r["verdict"] == "not runnable")
    assert out.strip().splitlines()[-1] == report["summary"]
    assert set(report["versions"]) >= {"python", "numpy", "onnx", "onnxruntime", "onnxruntime-extensions",
                                       "gathermultiaxis"}
    assert report["command"][:2] == ["gathermultiaxis", "check"] and report["interrupted"] is False


def test_default_suite_under_ort_optimize_exits_0(tmp_path, capsys, report_line):
    """ORT's optimizer folds away the gathers of the function-expanded node tests (static shapes, constant
    indices): nothing of ours to compare, which the built-in suite does not count as a failure (exit 0,
    the README's line); every other case is compared as in the plain run."""
    status, report, out = run_check(["-q", "--ort-optimize"], tmp_path, capsys)
    report_line(f"gathermultiaxis check --ort-optimize (default suite): {report['summary']}")
    assert status == 0, out
    counts = report["counts"]
    assert counts["failed"] == counts["not compared"] == 0
    assert counts["passed"] + counts["no gather"] + counts["not runnable"] == len(report["results"])
    folded = [r for r in report["results"] if r["verdict"] == "no gather"]
    assert all(r["folded_by_ort"] and "optimizer folded every gather" in r["detail"] and not r["left"]
               for r in folded), folded
    if ONNX_1_23:
        assert len(folded) >= 30 and counts["passed"] >= 40
    assert not any(r["folded_by_ort"] for r in report["results"] if r["verdict"] != "no gather")


def test_folded_gathers_of_a_named_model_still_exit_4(tmp_path, capsys):
    """Outside the built-in suite, a model whose gathers ORT's optimizer folds away still has nothing
    compared: "no gather" (exit 4), its detail saying why."""
    data = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "data")
    ids = numpy_helper.from_array(np.array([2, 0], np.int64), "ids")
    gather = helper.make_node("Gather", ["data", "ids"], ["picked"], axis=0)
    add = helper.make_node("Add", ["x", "picked"], ["y"])
    model = make_model([gather, add], [helper.make_tensor_value_info("x", T.FLOAT, [2, 2])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [2, 2])], [data, ids])
    path = save(model, tmp_path / "constant_gather.onnx")
    status, report, _ = run_check([str(path), "--ort-optimize"], tmp_path, capsys)
    (result,) = report["results"]
    assert status == 4 and result["verdict"] == "no gather" and result["folded_by_ort"], result
    assert "optimizer folded every gather" in result["detail"]
    status, report, _ = run_check([str(path)], tmp_path, capsys)
    assert status == 0 and report["results"][0]["folded_by_ort"] is False


def test_fuzz_cases(tmp_path, capsys, report_line):
    status, report, out = run_check(["--fuzz", "300", "--seed", "1000", "-q"], tmp_path, capsys)
    report_line(f"gathermultiaxis check --fuzz 300 --seed 1000: {report['summary']}")
    assert status == 0, out
    counts = report["counts"]
    assert counts["failed"] == counts["not compared"] == counts["not runnable"] == 0
    assert counts["passed"] >= 280
    assert sum(r["both_raised"] for r in report["results"]) > 0  # out-of-range indices, compared as errors
    ops = {r["name"].split(": ")[1].split("-")[0] for r in report["results"]}
    assert ops == {"Gather", "GatherElements", "GatherND"}


def test_fuzz_case_is_replayable_from_its_seed():
    a, b = fuzz_case(77), fuzz_case(77)
    assert a.model == b.model and a.name == b.name
    for name, value in a.data_sets[0].feeds.items():
        assert_bit_identical(value, b.data_sets[0].feeds[name])


@pytest.fixture
def broken_gather_elements(monkeypatch):
    """A deliberately wrong rule: GatherElements reads the next axis instead of its own. (Monkeypatches
    do not reach the runner's child process, so these tests run the library in this process.)"""
    real = rules.RULES["GatherElements"]

    def wrong_axis(node, data, indices):
        replacement = real(node, data, indices)
        wrong = Alignment(axes=((replacement.alignment.axes[0] + 1) % data.rank,))
        return rules.Replacement(wrong, slice_data_except=replacement.slice_data_except)

    monkeypatch.setitem(rules.RULES, "GatherElements", wrong_axis)


def test_broken_rewrite_is_caught(broken_gather_elements):
    report = check.run([FileSource(str(EXAMPLE_PATH))], isolate=False)
    (result,) = report.results
    assert result.verdict == "failed" and report.exit_status() == 1
    assert "differs" in result.detail or "raised" in result.detail
    assert report.summary_line().startswith("0 passed, 1 failed")


def test_broken_rewrite_is_caught_by_fuzzing(broken_gather_elements, tmp_path):
    report = check.run(check.fuzz_sources(40, 5, tmp_path / "repro"), isolate=False)
    failed = [r for r in report.results if r.verdict == "failed"]
    assert failed and all("GatherElements" in r.name for r in failed)
    assert "replay: gathermultiaxis check --fuzz 1 --seed" in failed[0].detail
    reproducer = tmp_path / "repro" / f"seed-{failed[0].name.split(':')[0].split()[1]}"
    assert (reproducer / "model.onnx").is_file() and (reproducer / "test_data_set_0" / "input_0.pb").is_file()


def test_backend_folders_and_trees(tmp_path, capsys):
    tree = tmp_path / "suite"
    for seed in (4, 5):  # cases whose indices are in range (a folder's inputs raising compare nothing)
        save_reproducer(fuzz_case(seed), tree, seed)
    (tree / "loose").mkdir()
    (tree / "loose" / "example.onnx").write_bytes(EXAMPLE_PATH.read_bytes())
    status, report, _ = run_check([str(tree)], tmp_path, capsys)
    assert status == 0
    assert sorted(r["name"] for r in report["results"]) == sorted(["seed-4", "seed-5", str(tree / "loose" / "example.onnx")])
    status, report, _ = run_check([str(tree / "seed-4")], tmp_path, capsys)
    assert status == 0 and [r["name"] for r in report["results"]] == ["seed-4"]


def test_expected_outputs_from_backend_folder_are_compared(tmp_path, capsys):
    folder = tmp_path / "gather_case"
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.array([2, 0])
    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=0)
    model = make_model([node], [helper.make_tensor_value_info("data", T.FLOAT, [3, 4]),
                                helper.make_tensor_value_info("indices", T.INT64, [2])],
                       [helper.make_tensor_value_info("out", T.FLOAT, [2, 4])])
    (folder / "test_data_set_0").mkdir(parents=True)
    save(model, folder / "model.onnx")
    for name, value in [("input_0", data), ("input_1", indices), ("output_0", data[indices])]:
        (folder / "test_data_set_0" / f"{name}.pb").write_bytes(numpy_helper.from_array(value).SerializeToString())
    status, report, _ = run_check([str(folder)], tmp_path, capsys)
    assert status == 0 and report["results"][0]["expected"] == "exact"


def test_not_runnable_fails_the_run_unless_allowed(tmp_path, capsys):
    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=0)
    model = make_model([node, helper.make_node("NoSuchOp", ["out"], ["y"], domain="nowhere")],
                       [helper.make_tensor_value_info("data", T.FLOAT, [3]),
                        helper.make_tensor_value_info("indices", T.INT64, [2])],
                       [helper.make_tensor_value_info("y", T.FLOAT, None)],
                       extra_opsets=[helper.make_opsetid("nowhere", 1)])
    path = save(model, tmp_path / "unrunnable.onnx")
    status, report, out = run_check([str(path)], tmp_path, capsys)
    assert status == 3
    assert report["results"][0]["verdict"] == "not runnable" and "NoSuchOp" in report["results"][0]["detail"]
    assert report["counts"]["not runnable"] == 1
    status, _, _ = run_check([str(path), "--allow", "not runnable"], tmp_path, capsys)
    assert status == 0


def test_a_model_with_no_gather_is_its_own_verdict(tmp_path, capsys):
    """Nothing rewritten is nothing compared: "no gather", exit 4 (unless allowed), never "passed"."""
    relu = make_model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", T.FLOAT, [3])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [3])])
    rotary = make_model([helper.make_node("RotaryEmbedding", ["x", "positions", "cos", "sin"], ["y"],
                                          domain="com.microsoft", name="rope")],
                        [helper.make_tensor_value_info("x", T.FLOAT, [1, 2, 8]),
                         helper.make_tensor_value_info("positions", T.INT64, [1, 2]),
                         helper.make_tensor_value_info("cos", T.FLOAT, [4, 4]),
                         helper.make_tensor_value_info("sin", T.FLOAT, [4, 4])],
                        [helper.make_tensor_value_info("y", T.FLOAT, [1, 2, 8])],
                        extra_opsets=[helper.make_opsetid("com.microsoft", 1)])
    for model, detail in [(relu, "the model holds no gather"),
                          (rotary, "inside com.microsoft.RotaryEmbedding: not rewritten")]:
        path = save(model, tmp_path / "model.onnx")
        status, report, out = run_check([str(path)], tmp_path, capsys)
        (result,) = report["results"]
        assert (status, result["verdict"]) == (4, "no gather"), out
        assert detail in result["detail"] and report["counts"]["passed"] == 0 and "1 no gather" in out
        status, _, _ = run_check([str(path), "--allow", "no gather"], tmp_path, capsys)
        assert status == 0
    # with a case not compared too, the stronger status wins
    sevens = save(reshaped_to_rows(7), tmp_path / "sevens.onnx")
    status, report, _ = run_check([str(path), str(sevens)], tmp_path, capsys)
    assert status == 3 and report["counts"]["no gather"] == 1


def test_every_data_set_raising_is_not_compared(tmp_path, capsys):
    path = save(reshaped_to_rows(7), tmp_path / "sevens.onnx")  # no size tried (3, 1, 8, ... 4096) fits
    status, report, out = run_check([str(path)], tmp_path, capsys)
    (result,) = report["results"]
    assert (status, result["verdict"], result["compared"]) == (3, "not compared", 0), out
    assert "Reshape" in result["detail"] and "--input-shapes" in result["detail"]
    assert report["counts"]["not compared"] == 1 and "0 passed" in out
    status, _, _ = run_check([str(path), "--allow", "not compared"], tmp_path, capsys)
    assert status == 0


def test_other_symbolic_sizes_are_tried(tmp_path, capsys):
    path = save(reshaped_to_rows(4), tmp_path / "fours.onnx")  # 3 and 1 do not fit, 8 does
    status, report, _ = run_check([str(path)], tmp_path, capsys)
    assert (status, report["results"][0]["verdict"], report["results"][0]["compared"]) == (0, "passed", 1)


def test_input_shapes_and_loaded_inputs(tmp_path, capsys):
    path = save(reshaped_to_rows(7), tmp_path / "sevens.onnx")
    status, report, _ = run_check([str(path), "--input-shapes", "x:[14]"], tmp_path, capsys)
    assert (status, report["results"][0]["verdict"]) == (0, "passed")
    np.savez(tmp_path / "inputs.npz", x=np.arange(21, dtype=np.float32))
    status, report, _ = run_check([str(path), "--load-inputs", str(tmp_path / "inputs.npz")], tmp_path, capsys)
    assert (status, report["results"][0]["verdict"]) == (0, "passed")
    folder = tmp_path / "data"
    (folder / "test_data_set_0").mkdir(parents=True)
    (folder / "test_data_set_0" / "input_0.pb").write_bytes(
        numpy_helper.from_array(np.ones(7, np.float32), "x").SerializeToString())
    status, report, _ = run_check([str(path), "--load-inputs", str(folder)], tmp_path, capsys)
    assert (status, report["results"][0]["verdict"], report["results"][0]["compared"]) == (0, "passed", 1)


def test_models_in_a_folder_take_their_own_inputs_files(tmp_path, capsys):
    """In a folder, each model's own inputs file is its data: ``NAME.inputs.npz`` beside it, or ``inputs.npz`` in
    a folder per model; ``--load-inputs`` serves the models without one. The models' input has no declared
    shape, so that no inputs can be generated and only a loaded file compares."""
    def unshaped():
        graph = helper.make_graph([helper.make_node("Gather", ["x", "first"], ["y"], axis=0)], "unshaped",
                                  [helper.make_tensor_value_info("x", T.FLOAT, None)],
                                  [helper.make_tensor_value_info("y", T.FLOAT, None)],
                                  [numpy_helper.from_array(np.array([0], np.int64), "first")])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    models = tmp_path / "models"
    (models / "a").mkdir(parents=True)
    save(unshaped(), models / "a" / "model.onnx")
    np.savez(models / "a" / "inputs.npz", x=np.arange(6, dtype=np.float32).reshape(2, 3))
    save(unshaped(), models / "b.onnx")
    np.savez(models / "b.inputs.npz", x=np.arange(5, dtype=np.float32))
    save(unshaped(), models / "c.onnx")
    np.savez(tmp_path / "shared.npz", x=np.ones((4, 2), np.float32))
    status, report, out = run_check([str(models), "-v", "--load-inputs", str(tmp_path / "shared.npz")], tmp_path,
                                    capsys)
    assert status == 0 and [r["verdict"] for r in report["results"]] == ["passed"] * 3, out
    inputs = {Path(r["case"]).relative_to(models).as_posix(): r["inputs"] for r in report["results"]}
    assert inputs == {"a/model.onnx": f"x float32[2, 3] (loaded from {models / 'a' / 'inputs.npz'})",
                      "b.onnx": f"x float32[5] (loaded from {models / 'b.inputs.npz'})",
                      "c.onnx": "x float32[4, 2] (loaded by --load-inputs)"}
    assert f"inputs: x float32[2, 3] (loaded from {models / 'a' / 'inputs.npz'})" in out
    # a model named on the command line takes --load-inputs, or generated inputs: here none can be generated
    status, report, _ = run_check([str(models / "b.onnx")], tmp_path, capsys)
    assert (status, report["results"][0]["verdict"]) == (3, "not compared")


def test_builtin_wrong_is_its_own_verdict(tmp_path, capsys):
    """ORT 1.31's string Gather copies only the first string of each block (see the README)."""
    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=0)
    model = make_model([node], [helper.make_tensor_value_info("data", T.STRING, [2, 2]),
                                helper.make_tensor_value_info("indices", T.INT64, [1])],
                       [helper.make_tensor_value_info("out", T.STRING, None)])
    feeds = {"data": np.array([["a", "b"], ["c", "d"]], dtype=object), "indices": np.array([1])}
    report = check.run([CheckCase("strings", model, [DataSet(feeds)])])
    (result,) = report.results
    assert result.verdict == "builtin wrong" and "reference evaluator agrees" in result.detail
    assert report.exit_status() == 0


def test_a_hang_is_that_case_s_verdict_and_the_run_goes_on(tmp_path):
    import os

    from test_check_signals import hanging_model

    fifo = tmp_path / "fifo.onnx"
    os.mkfifo(fifo)  # never opened (reading it would wait forever for a writer)
    hanging_model(tmp_path / "hangs.onnx")  # its original runs for hours
    sources = [FileSource(str(fifo)), FileSource(str(tmp_path / "hangs.onnx")),
               CheckCase("after", onnx.load_model(str(EXAMPLE_PATH)))]
    report = check.run(sources, timeout=20)  # loading both sessions takes seconds on a loaded machine
    fifo_result, hung, after = report.results
    assert fifo_result.verdict == "not runnable" and "a FIFO" in fifo_result.detail, fifo_result.detail
    assert hung.verdict == "not runnable" and "hung while running the original model" in hung.detail, hung.detail
    assert after.verdict == "passed"


def test_progress_and_verbosity(tmp_path):
    import subprocess

    run = subprocess.run(["gathermultiaxis", "check", "--fuzz", "3", "-v"], capture_output=True, text=True)
    assert run.returncode == 0
    assert run.stdout.count("passed ") >= 3 and "[3/3]" in run.stderr  # not a terminal: a closing progress line
    quiet = subprocess.run(["gathermultiaxis", "check", "--fuzz", "3", "-q"], capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout.strip().splitlines() == [
        "3 passed, 0 failed, 0 not compared, 0 not runnable, 0 builtin wrong"]


def test_default_suite_contents():
    names = [case.name for case in default_suite()]
    assert "bundled example" in names and "test_gather_0" in names and "test_gathernd_example_int32_batch_dim1" in names
    assert len(names) == 85 if ONNX_1_23 else len(names) >= 30


def test_negative_declared_dims_are_unknown_sizes(tmp_path, capsys):
    """Some exporters write dim_value -1 for a dynamic dim (PaddleOCR's classifier does)."""
    model = gather_after([helper.make_node("Identity", ["x"], ["y"])],
                         [helper.make_tensor_value_info("x", T.FLOAT, [-1, 2])], [])
    status, report, _ = run_check([str(save(model, tmp_path / "minus_one.onnx"))], tmp_path, capsys)
    assert (status, report["results"][0]["verdict"]) == (0, "passed"), report["results"][0]["detail"]


def test_checking_a_rewritten_file_says_to_check_the_original(tmp_path, capsys):
    """The file `rewrite` wrote holds GatherMultiaxis nodes and no gather: the verdict stays "no gather"
    (exit 4), and the detail says what to pass instead (found by a newcomer, who checked the rewritten file)."""
    rewritten = tmp_path / "example.rewritten.onnx"
    assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(rewritten), "-q"]) == 0
    status, report, _ = run_check([str(rewritten)], tmp_path, capsys)
    (result,) = report["results"]
    assert status == 4 and result["verdict"] == "no gather", result
    assert "already rewritten; check the original model" in result["detail"], result
    status, report, _ = run_check([str(EXAMPLE_PATH)], tmp_path, capsys)
    assert status == 0 and "already rewritten" not in report["results"][0].get("detail", "")
