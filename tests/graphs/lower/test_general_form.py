"""graphs.lower.general_form: the flat-offset decomposition, every mode, against the kernel on plain ORT."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from support import assert_bit_identical, make_model

from gathermultiaxis import gather_multiaxis
from gathermultiaxis.graphs import TensorInfo
from gathermultiaxis.graphs.ir.builder import NameScope
from gathermultiaxis.graphs.lower.general_form import (MIN_OPSET, MODES_MIN_OPSET, NotLowered, checks_only_when_read,
                                                        feeds_raw_indices, lower_gather_multiaxis, lowerable,
                                                        zeroes_out_of_range)
from gathermultiaxis.graphs.lower.lowering_builder import LoweringBuilder
from gathermultiaxis.ops.contract import Mode

DATA = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
INDICES = np.array([[[5, -1], [0, 2], [-3, 9]]] * 2, np.int64).reshape(2, 3, 2)  # [2, 3, 1 * 2]: (axis 1, axis 2)


def node(mode):
    return helper.make_node("GatherMultiaxis", ["x", "i", "axes"], ["y"], domain="ai.onnx.contrib", mode=mode)


def test_every_mode_has_one_meaning_here():
    assert [feeds_raw_indices(m) for m in Mode] == [True, False, False, False]
    assert [checks_only_when_read(m) for m in Mode] == [False, True, False, False]
    assert [zeroes_out_of_range(m) for m in Mode] == [False, False, True, False]


@pytest.mark.parametrize("mode", list(Mode))
def test_the_general_form_computes_what_the_kernel_computes_on_plain_ort(mode):
    indices = INDICES if not mode.checks_indices else np.clip(INDICES, -3, 2)
    data, idx = TensorInfo(TensorProto.FLOAT, DATA.shape), TensorInfo(TensorProto.INT64, indices.shape)
    b = LoweringBuilder(17, NameScope({"x", "i", "y"}), "g")
    lower_gather_multiaxis(node(mode.value), data, idx, [1, 2], b)
    model = make_model(b.nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                 helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=17)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": DATA, "i": indices})
    assert_bit_identical(got, gather_multiaxis(DATA, indices, [1, 2], mode))


def test_lowerable_says_why_not():
    data, idx = TensorInfo(TensorProto.FLOAT, (2, 3)), TensorInfo(TensorProto.INT64, (2, 3))
    assert lowerable(node("error"), data, idx, [-1], MIN_OPSET) == (Mode.ERROR, 2, [1])
    with pytest.raises(NotLowered, match=f"mode 'clamp' needs opset >= {MODES_MIN_OPSET}"):
        lowerable(node("clamp"), data, idx, [0], MODES_MIN_OPSET - 1)
    with pytest.raises(NotLowered, match="not unique axes"):
        lowerable(node("error"), data, idx, [0, -2], 17)
    with pytest.raises(NotLowered, match="mode 'zero' needs the input's element type"):
        lowerable(node("zero"), TensorInfo(0, (2, 3)), idx, [0], 17)
    with pytest.raises(NotLowered, match="unknown mode 'wrap'"):
        lowerable(node("wrap"), data, idx, [0], 17)
