"""Inputs outside the ONNX spec where ORT's builtin kernels and the rewrite part ways. Each test states
ORT's behaviour and is a strict xfail: it starts failing (and must be turned into a normal test) the
day the rewrite reproduces ORT there. The float16 NaN-payload test at the end was one of them; it has
passed since gathermultiaxis.InferenceSession returns float16 from the op itself."""

import numpy as np
import pytest
from onnx import TensorProto
from sessions import builtin_session, custom_session

from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.harness import make_session, single_gather_model

DATA = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def outcome(session, feeds):
    try:
        return session.run(None, feeds)[0].tolist()
    except Exception as error:  # noqa: BLE001
        return f"raises {type(error).__name__}"


def model(op_type, data_shape, indices_shape, **attributes):
    return single_gather_model(op_type, TensorProto.FLOAT, TensorProto.INT64, data_shape, indices_shape, **attributes)


DEVIATIONS = {
    # ORT flattens GatherND batch dims and accepts an indices batch that is a multiple of the data's
    "gathernd-indices-batch-multiple-of-data-batch": (
        model("GatherND", [None, None, None], [None, 1], batch_dims=1), DATA, np.zeros((4, 1), np.int64)),
    # ... and rejects an indices batch of 1 against a larger data batch, which the rewrite broadcasts
    "gathernd-indices-batch-1": (
        model("GatherND", [None, None, None], [None, 1], batch_dims=1), DATA, np.zeros((1, 1), np.int64)),
    # ORT rejects GatherElements indices larger than the data on another dimension, even a size-1 one
    "gatherelements-indices-larger-than-size-1-data-dim": (
        model("GatherElements", [None, None, None], [None, None, None], axis=2), DATA[:, :1], np.zeros((2, 3, 4), np.int64)),
}


@pytest.mark.xfail(strict=True, reason="out-of-spec shapes: ORT's GatherND/GatherElements batch and bounds "
                                       "rules differ from broadcasting (see the module docstring)")
@pytest.mark.parametrize("name", sorted(DEVIATIONS))
def test_rewrite_reproduces_ort_on_out_of_spec_shapes(name):
    original, data, indices = DEVIATIONS[name]
    feeds = {"data": data, "indices": indices}
    rewritten, _ = rewrite_model(original)
    builtin, ours = outcome(builtin_session(original), feeds), outcome(custom_session(rewritten), feeds)
    assert ours == builtin


@pytest.mark.parametrize("bound", [True, False], ids=["constant-table", "graph-input"])
def test_float16_nan_payloads_survive(bound):
    """Builtin Gather copies float16 bits as they are. The rewrite's Cast round trip (float16 -> float32 ->
    float16) would turn NaN payloads 0x7E01 and the signalling 0xFD00 into 0x7E00 and 0xFE00 at ORT's
    Cast to float16 (found in ORT 1.31); gathermultiaxis.InferenceSession returns float16 from the op
    itself instead (a bound table gathered as float16; a float16 input widened by ORT's exact Cast and
    narrowed back by NumPy, which keeps payloads), so the bits survive. (Was a strict xfail.)"""
    from onnx import numpy_helper

    table = np.array([0x7E01, 0xFD00, 0x3C00], np.uint16).view(np.float16)
    feeds = {"indices": np.array([0, 1, 2])}
    if bound:
        model = single_gather_model("Gather", TensorProto.FLOAT16, TensorProto.INT64, [3], [3], axis=0)
        model.graph.initializer.append(numpy_helper.from_array(table, "data"))
        del model.graph.input[0]
    else:
        model = single_gather_model("Gather", TensorProto.FLOAT16, TensorProto.INT64, [3], [3], axis=0)
        feeds["data"] = table
    rewritten, _ = rewrite_model(model)
    expected = builtin_session(model).run(None, feeds)[0]
    actual = custom_session(rewritten).run(None, feeds)[0]
    assert actual.view(np.uint16).tolist() == expected.view(np.uint16).tolist()
    # the session as users create it runs the gather it replaced, on the float16 data itself
    default = make_session(rewritten, custom=True, as_users_do=True)
    assert default.builtin_gathers == 1
    assert default.run(None, feeds)[0].view(np.uint16).tolist() == expected.view(np.uint16).tolist()


def test_orts_cast_from_float16_quiets_signalling_nans_in_blocks():
    """ORT 1.32's Cast from float16 to float32 sets the quiet bit of a signalling NaN in its vectorised blocks
    of 16 (0x7C01 becomes 0x7FC02000) and keeps it in the scalar tail (0x7F802000). float16 inputs reach the
    kernel only through that Cast (the PyOp bridge takes no float16), so on the kernel path a signalling NaN
    of a float16 graph input comes back quiet; quiet NaNs keep their payloads (docs/upstream.md). Fails the
    day ORT keeps them."""
    from onnx import helper

    from gathermultiaxis.harness import IR_VERSION

    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], "cast",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    x = np.full(17, 0x7C01, np.uint16).view(np.float16)
    y = builtin_session(model).run(None, {"x": x})[0].view(np.uint32)
    assert hex(y[0]) == "0x7fc02000" and hex(y[-1]) == "0x7f802000"
