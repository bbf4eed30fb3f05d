"""graphs.lower.general_run_time: the general form where axes and ranks are known only at run time."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from support import assert_bit_identical, make_model

from gathermultiaxis import gather_multiaxis
from gathermultiaxis.graphs.ir.builder import NameScope
from gathermultiaxis.graphs.lower.general_form import NotLowered
from gathermultiaxis.graphs.lower.general_run_time import (RUN_TIME_MIN_OPSET, RUN_TIME_MODES,
                                                            lower_gather_multiaxis_at_run_time)
from gathermultiaxis.graphs.lower.lowering_builder import LoweringBuilder
from gathermultiaxis.ops.contract import Mode


def lowered(mode, opset=17):
    node = helper.make_node("GatherMultiaxis", ["x", "i", "axes"], ["y"], domain="ai.onnx.contrib", mode=mode)
    b = LoweringBuilder(opset, NameScope({"x", "i", "axes", "y"}), "g")
    lower_gather_multiaxis_at_run_time(node, TensorProto.FLOAT, b)
    inputs = [helper.make_tensor_value_info(name, elem_type, None)
              for name, elem_type in (("x", TensorProto.FLOAT), ("i", TensorProto.INT64), ("axes", TensorProto.INT64))]
    model = make_model(b.nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=opset)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_the_modes_lowered_at_run_time_are_the_checking_ones():
    assert RUN_TIME_MODES == (Mode.ERROR, Mode.ERROR_NONEMPTY)
    for mode in ("clamp", "zero"):
        with pytest.raises(NotLowered, match=f"mode '{mode}' with axes or ranks known only at run time"):
            lowered(mode)
    with pytest.raises(NotLowered, match=f"need opset >= {RUN_TIME_MIN_OPSET}"):
        lowered("error", RUN_TIME_MIN_OPSET - 1)


@pytest.mark.parametrize("opset", [13, 17])  # below 14: an If makes the empty output
@pytest.mark.parametrize("mode", RUN_TIME_MODES)
def test_one_model_serves_every_rank_and_axes(mode, opset):
    session = lowered(mode.value, opset)
    x3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for data, indices, axes in [(x3, np.array([[[1, -1]], [[0, 2]]], np.int64), [1, 2]),
                                (x3[0], np.array([[2, 0, -1]], np.int64), [1]),
                                (x3, np.zeros((2, 0, 4), np.int64), [1])]:
        (got,) = session.run(None, {"x": data, "i": indices, "axes": np.array(axes, np.int64)})
        assert_bit_identical(got, gather_multiaxis(data, indices, axes, mode))
    with pytest.raises(Exception, match="out of data bounds"):  # as the kernel raises
        session.run(None, {"x": x3[0], "i": np.array([[7]], np.int64), "axes": np.array([1], np.int64)})
