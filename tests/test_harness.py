"""harness: the one-node gather model, the bit-for-bit comparison and the ORT session factory."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from gathermultiaxis.harness import (IR_VERSION, bit_identical, difference, make_session, single_gather_model,
                                     tensor_type_of, versions)


def test_difference_compares_bits():
    assert difference(np.array([1.0, np.nan]), np.array([1.0, np.nan])) is None
    assert not bit_identical(np.array([0.0]), np.array([-0.0]))  # equal as numbers, not as bits
    assert difference(np.array([1, 2], np.int32), np.array([1, 2], np.int64)).startswith("dtype")
    assert difference(np.zeros((2, 1)), np.zeros((1, 2))).startswith("shape")
    assert "differs at [1, 0]" in difference(np.array([[1, 2], [3, 4]]), np.array([[1, 2], [5, 4]]))
    assert bit_identical(np.array(["a", "b"], object), np.array(["a", "b"], object))
    assert not bit_identical(np.array(["a", "b"], object), np.array(["a", "c"], object))


def test_tensor_type_of():
    assert tensor_type_of(np.zeros(2, np.float16)) == TensorProto.FLOAT16
    assert tensor_type_of(np.array(["x"], object)) == TensorProto.STRING


def test_single_gather_model_runs_as_numpy_take():
    pytest.importorskip("onnxruntime", reason="the model runs in onnxruntime")
    model = single_gather_model("Gather", TensorProto.FLOAT, TensorProto.INT64, [4, "n"], [2], axis=1,
                                output_shape=[4, 2])
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == IR_VERSION and model.graph.node[0].name == "gather"
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    indices = np.array([2, -3], np.int64)
    out = make_session(model, custom=False).run(None, {"data": data, "indices": indices})[0]
    assert bit_identical(out, np.take(data, indices, axis=1))


def test_versions_name_the_dependencies():
    found = versions()
    assert {"python", "platform", "numpy", "onnx", "gathermultiaxis"} <= set(found)
    assert found["numpy"] == np.__version__
