"""The conformance runner: default suite, backend-test folders, fuzzing, and catching a broken rewrite."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import assert_bit_identical, make_model

from gathermultiaxis.check import check_case, default_suite, CheckCase
from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH
from gathermultiaxis.fuzz import fuzz_case, save_reproducer
from gathermultiaxis.graphs import rules


def run_check(args, tmp_path, capsys):
    report = tmp_path / "check.json"
    status = main(["check", *args, "--json", str(report)])
    return status, json.loads(report.read_text()), capsys.readouterr().out


def test_default_suite_passes_everything_ort_can_run(tmp_path, capsys, report_line):
    status, report, out = run_check(["-q"], tmp_path, capsys)
    results = report["results"]
    verdicts = {r["name"]: r["verdict"] for r in results}
    report_line(f"gathermultiaxis check (default suite): {report['summary']}")
    assert status == 0
    assert set(verdicts.values()) <= {"passed", "not runnable"}
    assert sum(v == "passed" for v in verdicts.values()) >= 79
    gather_tests = [r for r in results if r["name"].startswith(("test_gather_", "test_gather_elements", "test_gathernd"))]
    assert len(gather_tests) >= 9
    for r in gather_tests:  # the three ops' own tests: rewritten, run, and equal to ONNX's expected outputs
        assert (r["verdict"], r["rewritten"], r["left"], r["expected"]) == ("passed", 1, 0, "exact"), r
    for r in results:  # everything else within the tolerance of ONNX's backend tests, every gather rewritten
        assert r["verdict"] == "not runnable" or (r["expected"] in ("exact", "close", "") and r["left"] == 0), r
    assert all(r["detail"] for r in results if r["verdict"] == "not runnable")
    assert out.strip().splitlines()[-1] == report["summary"]


def test_fuzz_cases(tmp_path, capsys, report_line):
    status, report, out = run_check(["--fuzz", "300", "--seed", "1000", "-q"], tmp_path, capsys)
    report_line(f"gathermultiaxis check --fuzz 300 --seed 1000: {' '.join(report['summary'].split())}")
    assert status == 0, out
    counts = {v: sum(r["verdict"] == v for r in report["results"]) for v in ("passed", "failed", "not runnable")}
    assert counts["failed"] == 0 and counts["passed"] >= 280
    ops = {r["name"].split(": ")[1].split("-")[0] for r in report["results"]}
    assert ops == {"Gather", "GatherElements", "GatherND"}


def test_fuzz_case_is_replayable_from_its_seed():
    a, b = fuzz_case(77), fuzz_case(77)
    assert a.model == b.model and a.name == b.name
    for name, value in a.data_sets[0][0].items():
        assert_bit_identical(value, b.data_sets[0][0][name])


@pytest.fixture
def broken_gather_elements(monkeypatch):
    """A deliberately wrong rule: GatherElements reads the next axis instead of its own."""
    real = rules.RULES["GatherElements"]

    def wrong_axis(node, data, indices):
        replacement = real(node, data, indices)
        wrong = rules.Alignment(axes=((replacement.alignment.axes[0] + 1) % data.rank,))
        return rules.Replacement(wrong, slice_data_except=replacement.slice_data_except)

    monkeypatch.setitem(rules.RULES, "GatherElements", wrong_axis)


def test_broken_rewrite_is_caught(broken_gather_elements, tmp_path, capsys):
    status, report, out = run_check([str(EXAMPLE_PATH)], tmp_path, capsys)
    assert status == 1, out
    (result,) = report["results"]
    assert result["verdict"] == "failed"
    assert "differs" in result["detail"] or "raised" in result["detail"]
    assert "0 passed, 1 failed, 0 not runnable" in out


def test_broken_rewrite_is_caught_by_fuzzing(broken_gather_elements, tmp_path, capsys):
    status, report, out = run_check(["--fuzz", "40", "--seed", "5", "--save-dir", str(tmp_path / "repro")],
                                    tmp_path, capsys)
    assert status == 1
    failed = [r for r in report["results"] if r["verdict"] == "failed"]
    assert failed and all("GatherElements" in r["name"] for r in failed)
    assert "replay: gathermultiaxis check --fuzz 1 --seed" in failed[0]["detail"]
    reproducer = tmp_path / "repro" / f"seed-{failed[0]['name'].split(':')[0].split()[1]}"
    assert (reproducer / "model.onnx").is_file() and (reproducer / "test_data_set_0" / "input_0.pb").is_file()


def test_backend_folders_and_trees(tmp_path, capsys):
    tree = tmp_path / "suite"
    for seed in (3, 4):
        save_reproducer(fuzz_case(seed), tree / f"case_{seed}")
    (tree / "loose").mkdir()
    (tree / "loose" / "example.onnx").write_bytes(EXAMPLE_PATH.read_bytes())
    status, report, _ = run_check([str(tree)], tmp_path, capsys)
    assert status == 0
    assert sorted(r["name"] for r in report["results"]) == sorted(["case_3", "case_4", str(tree / "loose" / "example.onnx")])
    status, report, _ = run_check([str(tree / "case_3")], tmp_path, capsys)
    assert status == 0 and [r["name"] for r in report["results"]] == ["case_3"]


def test_expected_outputs_from_backend_folder_are_compared(tmp_path, capsys):
    folder = tmp_path / "gather_case"
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.array([2, 0])
    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=0)
    model = make_model([node], [helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 4]),
                                helper.make_tensor_value_info("indices", TensorProto.INT64, [2])],
                       [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 4])])
    (folder / "test_data_set_0").mkdir(parents=True)
    onnx.save_model(model, str(folder / "model.onnx"))
    for name, value in [("input_0", data), ("input_1", indices), ("output_0", data[indices])]:
        (folder / "test_data_set_0" / f"{name}.pb").write_bytes(numpy_helper.from_array(value).SerializeToString())
    status, report, _ = run_check([str(folder)], tmp_path, capsys)
    assert status == 0 and report["results"][0]["expected"] == "exact"


def test_not_runnable_models_are_counted_apart(tmp_path, capsys):
    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=0)
    model = make_model([node, helper.make_node("NoSuchOp", ["out"], ["y"], domain="nowhere")],
                       [helper.make_tensor_value_info("data", TensorProto.FLOAT, [3]),
                        helper.make_tensor_value_info("indices", TensorProto.INT64, [2])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                       extra_opsets=[helper.make_opsetid("nowhere", 1)])
    path = tmp_path / "unrunnable.onnx"
    onnx.save_model(model, str(path))
    status, report, out = run_check([str(path)], tmp_path, capsys)
    assert status == 0
    assert report["results"][0]["verdict"] == "not runnable" and "NoSuchOp" in report["results"][0]["detail"]
    assert "0 passed, 0 failed, 1 not runnable" in out


def test_builtin_errors_must_be_errors_of_the_rewrite_too():
    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=0)
    model = make_model([node], [helper.make_tensor_value_info("data", TensorProto.FLOAT, [3]),
                                helper.make_tensor_value_info("indices", TensorProto.INT64, [2])],
                       [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    feeds = {"data": np.zeros(3, np.float32), "indices": np.array([0, 3])}
    result = check_case(CheckCase("oob", model, [(feeds, None)]))
    assert result.verdict == "passed" and result.both_raised == 1
    assert "out of data bounds" in result.detail and "index 3 at indices[1]" in result.detail


def test_missing_path_is_reported(tmp_path, capsys):
    status, report, _ = run_check([str(tmp_path / "nothing.onnx")], tmp_path, capsys)
    assert status == 1 and report["results"][0]["detail"] == "no such file or folder"


def test_default_suite_contents():
    names = [case.name for case in default_suite()]
    assert "bundled example" in names and "test_gather_0" in names and "test_gathernd_example_int32_batch_dim1" in names
    assert len(names) == 85
