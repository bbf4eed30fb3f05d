"""ops.contract: the operator's contract stated once (issue 19). The modes as an enum, and one shape rule
over known and unknown dims, used by the kernel's geometry and by the ONNX schema alike."""

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from gathermultiaxis.graphs import register_schema
from gathermultiaxis.ops import GatherGeometry, gather_multiaxis
from gathermultiaxis.ops.contract import DOMAIN, MODES, OP_TYPE, GatherShapeError, Mode, output_dims

register_schema()  # onnx's inference then knows GatherMultiaxis


def test_mode_from_any():
    assert [Mode.from_any(m) for m in MODES] == list(Mode)
    assert Mode.from_any(Mode.CLAMP) is Mode.CLAMP and Mode.CLAMP == "clamp" and str(Mode.ZERO) == "zero"
    with pytest.raises(ValueError, match=r"mode must be one of \('error', 'error_nonempty', 'zero', 'clamp'\), got 'wrap'"):
        Mode.from_any("wrap")
    data, indices = np.arange(6).reshape(2, 3), np.array([[5, -4]])
    for mode in Mode:  # the kernel takes a Mode or its string alike
        if mode in (Mode.ZERO, Mode.CLAMP):
            assert np.array_equal(gather_multiaxis(data, indices, [1], mode), gather_multiaxis(data, indices, [1], mode.value))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_one_rule_for_known_and_unknown_dims(data):
    """Where every size is known the rule is GatherGeometry's (result or error); hiding sizes (None) never
    contradicts it: a size it still gives is the known one."""
    rank = data.draw(st.integers(1, 4))
    input_shape = data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    axes = data.draw(st.lists(st.integers(-rank - 1, rank), min_size=1, max_size=rank, unique=True))
    k = len(axes)
    indices_shape = data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    indices_shape[-1] *= data.draw(st.sampled_from([1, k]))
    try:
        expected = list(GatherGeometry.infer(input_shape, indices_shape, axes).output_shape)
    except GatherShapeError:
        with pytest.raises(GatherShapeError):
            output_dims(input_shape, indices_shape, axes)
        return
    assert output_dims(input_shape, indices_shape, axes) == expected
    hidden_in = [None if data.draw(st.booleans()) else d for d in input_shape]
    hidden_idx = [None if data.draw(st.booleans()) else d for d in indices_shape]
    partial = output_dims(hidden_in, hidden_idx, axes)
    assert all(p is None or p == e for p, e in zip(partial, expected))


def test_schema_refuses_an_out_of_range_axis_as_the_kernel_does():
    """The schema's copy of the rule wrapped axis 5 of a rank-2 input to 1 (5 % 2); the kernel refuses it."""
    node = helper.make_node(OP_TYPE, ["x", "i", "axes"], ["y"], domain=DOMAIN, mode="error")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, [2, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("axes", TensorProto.INT64, [1], [5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    with pytest.raises(GatherShapeError, match="axis 5 is out of range for rank 2"):
        gather_multiaxis(np.zeros((2, 3)), np.zeros((2, 1), np.int64), [5])
    with pytest.raises(onnx.shape_inference.InferenceError, match="axis 5 is out of range for rank 2"):
        onnx.shape_inference.infer_shapes(model, strict_mode=True)


def test_the_element_types_are_onnx_s():
    """contract writes onnx's TensorProto.DataType values out (it imports no onnx): they are onnx's."""
    from onnx import TensorProto

    from gathermultiaxis.ops.contract import DATA_TYPES, INDEX_TYPES

    T = TensorProto
    assert DATA_TYPES == (T.FLOAT, T.DOUBLE, T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT16, T.UINT32,
                          T.UINT64, T.BOOL, T.STRING)
    assert INDEX_TYPES == (T.INT32, T.INT64)
