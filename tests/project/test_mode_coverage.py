"""Every backend covers every ``Mode``: the kernel, the reference, the lowering, the WebNN lowering and the
session (kernel path and builtin-gather path) give the same result, or all raise, for each mode, on indices in
range, out of range, and out of range into an empty output. A mode added to ``Mode`` without a backend taking
it fails here."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import gathermultiaxis
from gathermultiaxis import Mode, gather_multiaxis
from gathermultiaxis.graphs import lower_model
from gathermultiaxis.graphs.webnn import lower_for_webnn
from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE
from gathermultiaxis.ops.reference import reference_gather_multiaxis

CASES = {  # name: (data, indices); the gather is along axis 0
    "in range": (np.arange(6, dtype=np.float32).reshape(3, 2), np.array([[2], [0]], np.int64)),
    "out of range": (np.arange(6, dtype=np.float32).reshape(3, 2), np.array([[2], [7]], np.int64)),
    "out of range, empty output": (np.zeros((3, 0), np.float32), np.array([[0], [5]], np.int64)),
}


def one_gather(mode: Mode, data: np.ndarray, indices: np.ndarray) -> onnx.ModelProto:
    axes = numpy_helper.from_array(np.array([0], np.int64))
    nodes = [helper.make_node("Constant", [], ["axes"], value=axes),
             helper.make_node(OP_TYPE, ["input", "indices", "axes"], ["output"], domain=DOMAIN, mode=mode.value)]
    graph = helper.make_graph(nodes, "one_gather",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(data.shape)),
                               helper.make_tensor_value_info("indices", TensorProto.INT64, list(indices.shape))],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])


def outcome(run):
    try:
        return np.asarray(run())
    except Exception as error:  # noqa: BLE001 - each backend raises its own type; that it raises is compared
        return type(error)


def plain_ort(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", list(Mode))
def test_every_backend_gives_the_kernels_result_for_every_mode(mode, case, tmp_path):
    data, indices = CASES[case]
    feeds = {"input": data, "indices": indices}
    model = one_gather(mode, data, indices)
    onnx.save(model, tmp_path / "model.onnx")
    kernel = outcome(lambda: gather_multiaxis(data, indices, [0], mode))
    results = {
        "reference": outcome(lambda: reference_gather_multiaxis(data, indices, [0], mode.value)),
        "lowered": outcome(lambda: plain_ort(lower_model(model)[0], feeds)),
        "session, kernel": outcome(lambda: gathermultiaxis.InferenceSession(
            str(tmp_path / "model.onnx"), run_builtin_gathers=False).run(None, feeds)[0]),
        "session, builtin gathers": outcome(lambda: gathermultiaxis.InferenceSession(
            str(tmp_path / "model.onnx")).run(None, feeds)[0]),
    }
    # WebNN has no error for an out-of-range index (the spec calls it invalid): a raising mode is lowered as
    # clamp, so the WebNN form is compared where the kernel gives a result
    if not isinstance(kernel, type):
        results["webnn"] = outcome(lambda: plain_ort(lower_for_webnn(model)[0], feeds))
    raises = mode.checks_indices and (case == "out of range" or (case.endswith("empty output")
                                                                  and mode.checks_when_empty))
    assert isinstance(kernel, type) == raises, (mode, case, kernel)
    for backend, result in results.items():
        if raises:
            assert isinstance(result, type), (backend, result)
        else:
            assert not isinstance(result, type), (backend, result)
            assert result.dtype == kernel.dtype and result.shape == kernel.shape, backend
            np.testing.assert_array_equal(result, kernel, err_msg=backend)
