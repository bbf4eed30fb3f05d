"""``webnn-check``: the nodes outside WebNN's subset, exit 1 when there is one; the JSON findings."""

import json

import onnx
from onnx import TensorProto, helper
from support import make_model

from gathermultiaxis.cli import main


def test_findings_printed_and_written(tmp_path, capsys):
    node = helper.make_node("Gather", ["x", "i"], ["y"], name="lookup", axis=0)
    model = make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3]),
                                helper.make_tensor_value_info("i", TensorProto.INT32, [2])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    path, report = tmp_path / "m.onnx", tmp_path / "findings.json"
    onnx.save_model(model, str(path))
    assert main(["webnn-check", str(path), "--json", str(report)]) == 0
    assert capsys.readouterr().out == "every node is within WebNN's subset\n"
    assert json.loads(report.read_text()) == []
    assert main(["webnn-check", str(path), "--json", str(report)]) == 2  # exists: needs --force
    assert "already exists" in capsys.readouterr().err
    model.graph.input[1].type.tensor_type.elem_type = TensorProto.INT64
    onnx.save_model(model, str(path))
    assert main(["webnn-check", str(path), "--json", str(report), "--force"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("Gather 'lookup': indices not int32") and out.endswith("1 finding(s) outside WebNN's subset\n")
    assert [finding["op_type"] for finding in json.loads(report.read_text())] == ["Gather"]
