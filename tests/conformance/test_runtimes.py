"""check --lowered/--webnn --runtime: the original and the form on OpenVINO, tract and onnx's reference evaluator.

OpenVINO and tract are extras: their tests skip, saying why, where the package is missing. The browser
runtime has its own tests (tests/web/test_web.py).
"""

import importlib.util

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from support import make_model

from gathermultiaxis.cli import main
from gathermultiaxis.conformance import check, runtimes
from gathermultiaxis.conformance.cases import CheckCase, DataSet
from gathermultiaxis.conformance.reportfile import ReportFile
from gathermultiaxis.examples import EXAMPLE_PATH, example_inputs

T = TensorProto
ONNX_1_23 = tuple(int(part) for part in onnx.__version__.split(".")[:2]) >= (1, 23)


def installed(name: str):
    """A pytest param for runtime ``name`` that skips, saying why, when its package is missing."""
    module = {"openvino": "openvino", "tract": "tract"}.get(name)
    missing = module is not None and importlib.util.find_spec(module) is None
    return pytest.param(name, marks=pytest.mark.skipif(missing, reason=f"the {name} runtime needs the Python "
                                                                          f"package {module!r} (an extra)"))


PYTHON_RUNTIMES = [installed(name) for name in ("openvino", "tract", "reference")]


def example_case() -> CheckCase:
    return CheckCase("bundled example", onnx.load_model(str(EXAMPLE_PATH)),
                     [DataSet(example_inputs(seed=s)) for s in range(2)])


@pytest.mark.parametrize("name", PYTHON_RUNTIMES)
@pytest.mark.parametrize("mode", [check.CheckMode.LOWERED, check.CheckMode.WEBNN])
def test_bundled_example_original_and_form_agree_on_each_runtime(name, mode):
    """Every kind of gather in one model: original = lowered = WebNN form, bit for bit, on that runtime."""
    result = check.check_case(example_case(), mode=mode, runtime=name)
    assert (result.verdict, result.compared) == ("passed", 2), result.detail


def test_a_runtimes_own_nondeterminism_is_its_own_not_the_lowerings():
    """RandomUniform without a seed: two compilations of the original differ on the reference evaluator,
    so the case is the runtime's "nondeterministic", not a failure of the lowered form."""
    model = make_model([helper.make_node("RandomUniform", [], ["noise"], shape=[4, 3], dtype=T.FLOAT),
                        helper.make_node("Gather", ["noise", "indices"], ["out"], axis=0)],
                       [helper.make_tensor_value_info("indices", T.INT64, [2])],
                       [helper.make_tensor_value_info("out", T.FLOAT, None)])
    case = CheckCase("random", model, [DataSet({"indices": np.array([3, 0], np.int64)})])
    result = check.check_case(case, mode=check.CheckMode.LOWERED, runtime="reference")
    assert result.verdict == "nondeterministic", result.detail
    assert "two compilations of the original on reference differ" in result.detail


@pytest.mark.parametrize("name", [installed("tract")])
def test_a_model_the_runtime_refuses_is_not_runnable_with_its_message(name):
    """tract's Python API has no string tensors: the original is not runnable there, and the detail says so."""
    model = make_model([helper.make_node("Gather", ["data", "indices"], ["out"], axis=0)],
                       [helper.make_tensor_value_info("data", T.STRING, [3]),
                        helper.make_tensor_value_info("indices", T.INT64, [2])],
                       [helper.make_tensor_value_info("out", T.STRING, None)])
    case = CheckCase("strings", model, [DataSet({"data": np.array(["a", "b", "c"], dtype=object),
                                                 "indices": np.array([2, 0], np.int64)})])
    result = check.check_case(case, mode=check.CheckMode.LOWERED, runtime=name)
    assert result.verdict == "not runnable"
    assert result.detail.startswith("tract refuses the original: ") and "string" in result.detail


def test_inputs_ort_refuses_are_out_of_spec_and_not_run_elsewhere():
    """An index out of range: ORT raises, so the data set is not run on the other runtime (not compared)."""
    model = make_model([helper.make_node("Gather", ["data", "indices"], ["out"], axis=0)],
                       [helper.make_tensor_value_info("data", T.FLOAT, [3]),
                        helper.make_tensor_value_info("indices", T.INT64, [1])],
                       [helper.make_tensor_value_info("out", T.FLOAT, None)])
    case = CheckCase("out of range", model, [DataSet({"data": np.ones(3, np.float32),
                                                      "indices": np.array([7], np.int64)})])
    result = check.check_case(case, mode=check.CheckMode.LOWERED, runtime="reference")
    assert result.verdict == "not compared"
    assert "1 data set(s) out of spec" in result.detail


def test_cli_check_runtime_reports_the_runtime_and_its_version(tmp_path, capsys):
    report = tmp_path / "check.json"
    status = main(["check", str(EXAMPLE_PATH), "--lowered", "--runtime", "reference", "-j", "1",
                   "--json", str(report)])
    import json

    written = json.loads(report.read_text())
    assert status == 0, capsys.readouterr().out
    assert written["runtime"] == "reference" and written["versions"]["reference"] == runtimes.runtime_version("reference")
    assert written["counts"]["passed"] == 1


def test_cli_resume_refuses_a_report_of_another_runtime(tmp_path, capsys):
    """--resume takes a report of the same mode and runtime only: another runtime's (in either form of the
    file, the final document or the lines of a killed run) is one line, exit 2, and the file is kept."""
    import json

    report = tmp_path / "check.json"
    assert main(["check", str(EXAMPLE_PATH), "--lowered", "--runtime", "reference", "-j", "1", "--json", str(report)]) == 0
    lines = tmp_path / "killed.json"  # what a run killed outright leaves: the head line carries the runtime
    written = json.loads(report.read_text())
    killed = ReportFile(lines, overwrite=False)
    killed.start(check.Report(command=written["command"], mode=written["mode"], runtime="reference"), 1, [])
    del killed  # killed outright: the head line stays, written whole by start
    assert json.loads(lines.read_text().splitlines()[0])["run"]["runtime"] == "reference"
    for path in (report, lines):
        before = path.read_bytes()
        for other, said in ((["--runtime", "ort"], "this one --runtime ort"), ([], "this one no --runtime")):
            capsys.readouterr()
            assert main(["check", str(EXAMPLE_PATH), "--lowered", *other, "-j", "1", "--resume", str(path)]) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1, err
            assert f"--resume {path}: that run had --runtime reference, {said}" in err, err
        assert path.read_bytes() == before
    # the same runtime resumes: the finished case is kept, nothing is run again
    assert main(["check", str(EXAMPLE_PATH), "--lowered", "--runtime", "reference", "-j", "1", "--resume", str(report)]) == 0
    assert json.loads(report.read_text())["results"] == written["results"]


@pytest.mark.parametrize("args, message", [
    (["--runtime", "reference"], "--runtime reference goes with --lowered or --webnn"),
    (["--lowered", "--runtime", "reference", "--cluster", "local"], "not with --cluster"),
])
def test_cli_check_runtime_misuse_is_one_line_and_exit_2(args, message, capsys):
    assert main(["check", str(EXAMPLE_PATH), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_check_runtime_missing_says_what_to_install(monkeypatch, tmp_path, capsys):
    """The web runtime without its npm packages: exit 2 and one line naming npm ci."""
    monkeypatch.setenv("GATHERMULTIAXIS_WEB_NODE_MODULES", str(tmp_path / "nowhere"))
    assert main(["check", str(EXAMPLE_PATH), "--webnn", "--runtime", "web"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "npm ci in" in err and "onnxruntime-web" in err


def test_webnn_form_is_judged_against_the_original_with_static_shapes_too():
    """ONNX's AffineGrid expansion feeds Range a 1-element 1-D tensor; once the input shapes are fixed ORT's
    default session folds the If and refuses it. The original with its shapes fixed is refused alike, so the
    case is not runnable there, not a failure of the gathers' form."""
    from gathermultiaxis.conformance.cases import default_suite_case

    if not ONNX_1_23:
        pytest.skip("onnx < 1.23 has no AffineGrid node test")
    result = check.check_case(default_suite_case("test_affine_grid_2d_expanded"), mode=check.CheckMode.WEBNN,
                              runtime="ort")
    assert result.verdict == "not runnable", result.detail
    assert "the original with its input shapes fixed and shape arithmetic folded alike" in result.detail
