"""Bad calls of the GatherMultiaxis op inside ORT: session.run raises the kernel's message, the process
and the session survive, and nothing is returned for the failed run."""

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from support import gather_multiaxis_model

from gathermultiaxis import GatherIndexError, GatherShapeError, InferenceSession, session_options


def make_session(entry, model):
    """Through both entry points: the package's InferenceSession and ORT's with session_options()."""
    if entry == "session":
        return InferenceSession(model, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    return ort.InferenceSession(model.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module", params=["session", "options"])
def sess(request):
    return make_session(request.param, gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64, "error"))


GOOD = {"input": np.arange(6, dtype=np.float32).reshape(2, 3), "indices": np.array([[2, 0]]), "axes": np.array([1])}


def assert_still_works(sess):
    np.testing.assert_array_equal(sess.run(None, GOOD)[0], [[2, 0], [5, 3]])


def test_error_reaches_caller_and_session_survives(sess):
    feeds = {"input": np.zeros((2, 3), np.float32), "indices": np.array([[0, 5]]), "axes": np.array([1])}
    with pytest.raises(GatherIndexError, match=r"GatherMultiaxis: index 5 at indices\[0, 1\] is out of range "
                                               r"for axis 1 of size 3 \(valid range \[-3, 2\]"):
        sess.run(None, feeds)
    feeds["indices"] = np.array([[2, -3]])
    np.testing.assert_array_equal(sess.run(None, feeds)[0], np.zeros((2, 2)))
    feeds["indices"] = np.array([[0, 1, 2]])
    with pytest.raises(GatherShapeError, match="last indices dimension"):
        sess.run(None, {**feeds, "axes": np.array([0, 1])})
    with pytest.raises(ValueError, match=r"axes must be a 1-D int64 tensor, got shape \[1, 1\]"):
        sess.run(None, {**feeds, "axes": np.array([[1]])})


@pytest.mark.parametrize("change, error, message", [
    ({"indices": np.zeros(3, dtype=np.int64)}, GatherShapeError, "input rank 2 and indices rank 1 differ"),
    ({"indices": np.zeros((3, 1), dtype=np.int64)}, GatherShapeError, "dimension 0 is not broadcastable"),
    ({"axes": np.array([1, -1])}, GatherShapeError, "name dimension 1 more than once"),
    ({"axes": np.array([2])}, GatherShapeError, "axis 2 is out of range for rank 2"),
    ({"indices": np.zeros((2, 3), dtype=np.int64), "axes": np.array([0, 1])}, GatherShapeError,
     "last indices dimension (3) must be a multiple of len(axes)=2"),
    ({"axes": np.array([[1]])}, ValueError, "axes must be a 1-D int64 tensor, got shape [1, 1]"),
    ({"indices": np.array([[-4, 0]])}, GatherIndexError,
     "index -4 at indices[0, 0] is out of range for axis 1 of size 3 (valid range [-3, 2]"),
    ({"input": np.zeros((0, 3), np.float32), "indices": np.zeros((1, 3), np.int64), "axes": np.array([0])},
     GatherShapeError, "axis 0 of the input has size 0, so no index can address it, but the indices hold 3"),
])
def test_malformed_calls_raise_from_session_run(sess, change, error, message):
    with pytest.raises(error, match="GatherMultiaxis: .*" + re.escape(message)):
        sess.run(None, {**GOOD, **change})
    assert_still_works(sess)


@pytest.mark.parametrize("name, value", [("indices", np.zeros((1, 2), np.float32)), ("axes", np.array([1], np.int32))])
def test_wrong_input_types_are_refused_by_ort(sess, name, value):
    with pytest.raises(Exception, match="(?i)type"):
        sess.run(None, {**GOOD, name: value})
    assert_still_works(sess)


ENTRIES = pytest.mark.parametrize("entry", ["session", "options"])


@ENTRIES
def test_float_indices_have_no_kernel(entry):
    model = gather_multiaxis_model(TensorProto.FLOAT, TensorProto.FLOAT, "error")
    with pytest.raises(Exception, match="GatherMultiaxis"):
        make_session(entry, model)


@ENTRIES
def test_unknown_mode_raises(sess, entry):
    bad = make_session(entry, gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64, "wrap"))
    with pytest.raises(ValueError, match="mode must be one of"):
        bad.run(None, GOOD)
    assert_still_works(sess)


@ENTRIES
def test_missing_mode_attribute_is_refused(entry):
    node = helper.make_node("GatherMultiaxis", ["input", "indices", "axes"], ["output"], domain="ai.onnx.contrib")
    model = gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64)
    model.graph.node[0].CopyFrom(node)
    with pytest.raises(Exception, match="mode"):
        make_session(entry, model)
