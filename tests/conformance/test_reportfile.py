"""conformance.reportfile: the check --json report, streamed as lines, finished as one document, read back
in either form, and checked before --resume."""

import json

import pytest

from gathermultiaxis.conformance.cases import BadInput
from gathermultiaxis.conformance.check import CheckResult, Report
from gathermultiaxis.conformance.reportfile import ReportFile, read_report, resumed_results
from gathermultiaxis.graphs.modelfile import ModelFileError


def results():
    return [CheckResult("one", "passed", rewritten=2, case="a"), CheckResult("two", "failed", detail="x", case="b")]


def test_streamed_lines_then_final_document(tmp_path):
    path = tmp_path / "report.json"
    report = Report(mode="default", command=["check"], versions={"onnx": "1"})
    first, second = results()
    stream = ReportFile(path, overwrite=False)
    stream.start(report, cases=3, finished=[first])
    stream.add(second)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"run": {"mode": "default", "command": ["check"], "versions": {"onnx": "1"}, "cases": 3}}
    assert [line["result"]["name"] for line in lines[1:]] == ["one", "two"]
    killed = read_report(path)  # what a run killed outright leaves
    assert killed["interrupted"] is True and killed["stopped_by"] == ""
    assert [r["name"] for r in killed["results"]] == ["one", "two"]
    report.results[:] = [first, second]
    stream.finish(report)
    assert json.loads(path.read_text()) == report.as_dict()
    assert read_report(path)["results"] == report.as_dict()["results"]


def test_start_refuses_an_existing_file(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("mine")
    with pytest.raises(ModelFileError):
        ReportFile(path, overwrite=False).start(Report(), 1, [])
    assert path.read_text() == "mine"


def test_resume_checks_mode_and_cases(tmp_path):
    path = tmp_path / "report.json"
    report = Report(mode="default", results=results())
    path.write_text(json.dumps(report.as_dict()))
    back = resumed_results(path, "default", ["a", "b", "c"])
    assert [(r.name, r.verdict, r.case) for r in back] == [("one", "passed", "a"), ("two", "failed", "b")]
    with pytest.raises(BadInput, match="mode"):
        resumed_results(path, "lowered", ["a", "b"])
    with pytest.raises(BadInput, match="not in this run"):
        resumed_results(path, "default", ["a"])
    with pytest.raises(BadInput, match="no such file"):
        resumed_results(tmp_path / "missing.json", "default", ["a"])
    (tmp_path / "bad.json").write_text('{"results": 3}')
    with pytest.raises(BadInput):
        read_report(tmp_path / "bad.json")
