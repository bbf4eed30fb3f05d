"""``gathermultiaxis policies``: the out-of-range policies side by side (issue 22, item 2). Each policy is
checked against the real system where one is installed: ORT for error, OpenVINO for zeros, and
Chromium's WebNN "clamp, then wrap" rule (the rule itself; no browser here) for clamp."""

import json
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.cli import main
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.harness import make_session
from gathermultiaxis.ops import Mode, gather_multiaxis
from gathermultiaxis.conformance.policies import policy_inputs, policy_report, with_mode

TABLE = np.arange(18, dtype=np.float32).reshape(6, 3) + 0.5
IDS = np.array([0, 7, -1, -9, 5], np.int64)  # one above, one below, one negative in range


def embedding_model():
    graph = helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["rows"], name="embed", axis=0)], "g",
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                              [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["n", 3])],
                              [numpy_helper.from_array(TABLE, "table")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def chromium_clamp_then_wrap(index: int, n: int) -> int:
    """Chromium's WebNN TFLite/ORT backends: clamp to [-N, N-1], then count negatives from the end."""
    clamped = min(max(index, -n), n - 1)
    return clamped + n if clamped < 0 else clamped


@pytest.mark.parametrize("n", range(1, 8))
def test_clamp_mode_is_chromiums_clamp_then_wrap(n):
    indices = np.arange(-3 * n, 3 * n + 1)
    got = gather_multiaxis(np.arange(n), indices, [0], Mode.CLAMP)
    assert got.tolist() == [chromium_clamp_then_wrap(int(i), n) for i in indices]


def test_report_counts_and_the_error_policy_is_orts():
    report = policy_report(embedding_model(), {"ids": IDS})
    [found] = report.gathers
    assert (found.node, found.op_type, found.indices, found.above, found.below, found.negative_in_range) == (
        "embed", "Gather", 5, 1, 1, 1)
    outcomes = {o.mode: o for o in report.outcomes}
    assert "GatherIndexError" in outcomes["error"].error and "index 7" in outcomes["error"].error
    with pytest.raises(Exception, match="out of data bounds, idx=7"):  # ORT's builtin Gather raises too
        ort.InferenceSession(embedding_model().SerializeToString()).run(None, {"ids": IDS})
    assert outcomes["clamp"].differences == {"rows": (0, None)}
    # zero rows where clamp read the edge rows: 2 rows of 3 elements
    assert outcomes["zero"].differences["rows"][0] == 6


def test_clamp_policy_output_is_chromiums():
    rewritten, _ = rewrite_model(embedding_model())
    got = make_session(with_mode(rewritten, Mode.CLAMP), custom=True).run(None, {"ids": IDS})[0]
    np.testing.assert_array_equal(got, TABLE[[chromium_clamp_then_wrap(int(i), 6) for i in IDS]])


OPENVINO_GATHER_8 = """
import sys, json, numpy as np
import openvino as ov, openvino.opset8 as opset8
table, ids = np.array(json.loads(sys.argv[1]), np.float32), np.array(json.loads(sys.argv[2]), np.int64)
data = opset8.parameter(list(table.shape), ov.Type.f32)
index = opset8.parameter(list(ids.shape), ov.Type.i64)
model = ov.Model([opset8.gather(data, index, opset8.constant(np.int64(0)))], [data, index])
print(json.dumps(ov.Core().compile_model(model, "CPU")([table, ids])[0].tolist()))
"""


def test_zero_policy_output_is_openvino_gather_8s():
    pytest.importorskip("openvino", reason="openvino is not installed (pip install openvino): no Gather-8 to compare")
    run = subprocess.run([sys.executable, "-c", OPENVINO_GATHER_8, json.dumps(TABLE.tolist()), json.dumps(IDS.tolist())],
                         capture_output=True, text=True, timeout=300)  # a child: OpenVINO may crash
    assert run.returncode == 0, run.stderr
    expected = np.array(json.loads(run.stdout.strip().splitlines()[-1]), np.float32)
    rewritten, _ = rewrite_model(embedding_model())
    got = make_session(with_mode(rewritten, Mode.ZERO), custom=True).run(None, {"ids": IDS})[0]
    np.testing.assert_array_equal(got, expected)


def test_generated_out_of_range_inputs_and_the_command(tmp_path, capsys):
    import onnx

    path = tmp_path / "embedding.onnx"
    onnx.save(embedding_model(), str(path))
    feeds = policy_inputs(embedding_model(), out_of_range=True)
    assert feeds["ids"][0] == 6 + 2 and feeds["ids"][-1] == -6 - 3
    assert main(["policies", str(path), "--out-of-range", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "| embed | Gather | 3 | 1 | 1 |" in out and "| OpenVINO Gather-8 | zeros | rows: " in out
    assert json.loads((tmp_path / "r.json").read_text())["gathers"][0]["above"] == 1
    assert main(["policies", str(path)]) in (0, 1)  # in-range generated inputs: exit 1 unless a negative one
    np.savez(tmp_path / "wrong.npz", ids=np.zeros((2, 2), np.int64))  # rank 2 where the model takes rank 1
    capsys.readouterr()
    assert main(["policies", str(path), "--load-inputs", str(tmp_path / "wrong.npz")]) == 2
    err = capsys.readouterr().err
    assert "the model does not run on these inputs" in err and "Traceback" not in err


def test_out_of_range_reaches_the_gather_through_shape_only_ops(tmp_path, capsys):
    """Issue 31: a dynamo export's token ids reach the embedding through a Reshape (here Reshape, Cast,
    Unsqueeze, Squeeze); --out-of-range pushed only inputs that feed a gather directly, so it found
    nothing to compare (exit 1). It pushes them now, and says which."""
    import onnx

    nodes = [helper.make_node("Reshape", ["ids", "flat"], ["view"]),
             helper.make_node("Cast", ["view"], ["ids32"], to=TensorProto.INT32),
             helper.make_node("Unsqueeze", ["ids32", "axis"], ["column"]),
             helper.make_node("Squeeze", ["column", "axis"], ["row"]),
             helper.make_node("Gather", ["table", "row"], ["rows"], name="embed", axis=0),
             helper.make_node("Gather", ["table", "positions"], ["unrelated"], name="positions", axis=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "n"]),
                                           helper.make_tensor_value_info("positions", TensorProto.INT64, ["n"])],
                              [helper.make_tensor_value_info("rows", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("unrelated", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(TABLE, "table"),
                               numpy_helper.from_array(np.array([-1], np.int64), "flat"),
                               numpy_helper.from_array(np.array([0], np.int64), "axis")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = policy_inputs(model, out_of_range=True)
    assert feeds["ids"].reshape(-1)[0] == 6 + 2 and feeds["ids"].reshape(-1)[-1] == -6 - 3
    assert feeds["positions"][0] == 6 + 2
    path = tmp_path / "reshaped_ids.onnx"
    onnx.save(model, str(path))
    assert main(["policies", str(path), "--out-of-range"]) == 0
    out = capsys.readouterr().out
    assert "--out-of-range pushed: ids (axis of 6: 8 and -9); positions (axis of 6: 8 and -9)" in out
    assert "| embed | Gather | 3 | 1 | 1 |" in out


def test_every_mode_has_its_place_in_the_report():
    from gathermultiaxis.conformance.policies import BASELINE, COMPARED

    # error_nonempty reads no index where error does not: on an empty output; elsewhere it is error
    assert set(Mode) - {BASELINE, *COMPARED} == {Mode.ERROR_NONEMPTY} and BASELINE not in COMPARED
