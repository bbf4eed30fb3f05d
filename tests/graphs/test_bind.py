"""The session's bind step (graphs.bind.prepare_model; issue 21 items 1-4): the node forms a rewritten
model runs as in gathermultiaxis.InferenceSession (a bound table, constant axes as an attribute, float16
in and out), each bit-identical to ORT's builtin Gather."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from session_cases import constant_axes_model, embedding_model
from support import assert_bit_identical, gather_multiaxis_model, make_model

import gathermultiaxis
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.ops.session import prepare_model  # the bind step for the installed bridge

MODEL = gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64)


def node_types(model):
    return [node.op_type for node in model.graph.node]


def test_bound_float16_node_form_and_bits():
    """A float16 table: one bound node (indices, token) returning float16; the alignment Unsqueeze and the
    Cast round trip are gone; the result is builtin Gather's, NaN payloads included."""
    bits = np.random.default_rng(3).integers(0, 2**16, (50, 4), dtype=np.uint16)
    bits[0, :3] = [0x7E01, 0xFD00, 0x8000]
    original = embedding_model(numpy_helper.from_array(bits.view(np.float16), "table"), [None, None])
    rewritten, _ = rewrite_model(original)
    prepared = prepare_model(onnx.ModelProto.FromString(rewritten.SerializeToString()))
    assert node_types(prepared.model) == ["GatherMultiaxisBoundFloat16"], node_types(prepared.model)
    assert list(prepared.model.graph.node[0].input) == ["ids", prepared.token]
    sess = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"])
    builtin = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    for ids in (np.array([[0, 1, 49, -50]]), np.arange(-50, 50).reshape(4, 25)):
        assert_bit_identical(sess.run(None, {"ids": ids})[0], builtin.run(None, {"ids": ids})[0])
    with pytest.raises(gathermultiaxis.GatherIndexError, match="index 50 at"):
        sess.run(None, {"ids": np.array([[50]])})


def test_constant_axes_travel_as_an_attribute():
    prepared = prepare_model(constant_axes_model())
    node = next(n for n in prepared.model.graph.node if n.domain == "ai.onnx.contrib")
    assert node.op_type == "GatherMultiaxisRunFixedAxes" and len(node.input) == 3
    assert {a.name: a.s for a in node.attribute} == {"axes": b"1", "mode": b"error"}
    sess = gathermultiaxis.InferenceSession(constant_axes_model(TensorProto.INT64))
    data = np.arange(6, dtype=np.int64).reshape(2, 3)
    np.testing.assert_array_equal(sess.run(None, {"input": data, "indices": np.array([[2, -3]])})[0], [[2, 0], [5, 3]])
    overridable = onnx.ModelProto()  # axes that a feed can override stay an input
    overridable.CopyFrom(MODEL)
    overridable.graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "axes"))
    node = next(n for n in prepare_model(overridable).model.graph.node if n.domain == "ai.onnx.contrib")
    assert node.op_type == "GatherMultiaxisRun" and node.input[2] == "axes"


def test_float16_input_comes_back_as_float16():
    """A float16 graph input crosses the bridge widened (exactly) and comes back as float16 from the op."""
    value = helper.make_tensor_value_info
    original = make_model([helper.make_node("Gather", ["data", "ids"], ["out"], axis=1)],
                          [value("data", TensorProto.FLOAT16, [None, None]), value("ids", TensorProto.INT64, [None])],
                          [value("out", TensorProto.FLOAT16, None)])
    rewritten, _ = rewrite_model(original)
    prepared = prepare_model(onnx.ModelProto.FromString(rewritten.SerializeToString()))
    assert "GatherMultiaxisRunFixedAxesToFloat16" in node_types(prepared.model)
    assert node_types(prepared.model).count("Cast") == 1, node_types(prepared.model)  # the widening only
    sess = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"])
    builtin = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    data = np.array([[0x7E01, 0xFD00, 0x3C00], [0xFC00, 0x0001, 0x8000]], np.uint16).view(np.float16)
    feeds = {"data": data, "ids": np.array([2, 1, 0, -1])}
    assert_bit_identical(sess.run(None, feeds)[0], builtin.run(None, feeds)[0])
    with pytest.raises(gathermultiaxis.GatherIndexError, match="index 3 at"):
        sess.run(None, {"data": data, "ids": np.array([3])})
