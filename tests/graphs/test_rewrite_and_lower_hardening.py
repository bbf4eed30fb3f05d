"""Rewrite and lower on hostile-but-valid models (issue 18): fresh names that must not collide with
sparse initializers, initializers that are overridable graph inputs, opsets 7 and 8 (Constant-1 holds
float types only), GatherMultiaxis nodes the op's schema refuses."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from sessions import builtin_session, custom_session
from support import make_model

from gathermultiaxis.graphs import lower_model, rewrite_model

CONTRIB = helper.make_opsetid("ai.onnx.contrib", 1)


def _gather_model(opset, ir_version=None, op_type="Gather", **attributes):
    node = helper.make_node(op_type, ["data", "idx"], ["y"], name="g", **attributes)
    indices_shape = [3, 4] if op_type == "GatherElements" else [2, 1] if op_type == "GatherND" else [2]
    output_shape = {"Gather": [3, 2], "GatherElements": [3, 4], "GatherND": [2, 4]}[op_type]
    return make_model([node], [helper.make_tensor_value_info("data", T.FLOAT, [3, 4]),
                               helper.make_tensor_value_info("idx", T.INT64, indices_shape)],
                      [helper.make_tensor_value_info("y", T.FLOAT, output_shape)], opset=opset,
                      ir_version=ir_version or (3 if opset < 9 else 7))


def _gather_feeds(op_type):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = {"Gather": np.array([3, 0]), "GatherElements": np.array([[0, 1, 2, 0]] * 3),
               "GatherND": np.array([[2], [0]])}[op_type]
    return {"data": data, "idx": indices}


# -- item 8: fresh names avoid every name in the model, sparse initializers included ------------------

def test_sparse_initializer_named_like_a_generated_name_is_not_taken_for_one():
    # "g/axes" is the name the rewrite would give the axes of node "g"; an unused sparse initializer of
    # that name (ORT makes it an initializer) must not replace the axes.
    model = _gather_model(13, axis=1)
    values = numpy_helper.from_array(np.array([1, 1], np.int64), "g/axes")
    positions = numpy_helper.from_array(np.array([0, 1], np.int64), "")
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, positions, [2]))
    feeds = _gather_feeds("Gather")
    want = builtin_session(model).run(None, feeds)
    rewritten, report = rewrite_model(model)
    assert report.rewritten == 1
    got = custom_session(rewritten).run(None, feeds)
    np.testing.assert_array_equal(got[0], want[0])
    lowered, lowering = lower_model(rewritten)
    assert lowering.left == 0
    np.testing.assert_array_equal(builtin_session(lowered).run(None, feeds)[0], want[0])


def test_lowering_names_avoid_sparse_initializers():
    # "gma/one" is a name the lowering of node "gma" generates.
    node = helper.make_node("GatherMultiaxis", ["x", "i", "a"], ["y"], domain="ai.onnx.contrib", name="gma",
                            mode="error")
    model = make_model([node], [helper.make_tensor_value_info("x", T.FLOAT, [3, 2]),
                                helper.make_tensor_value_info("i", T.INT64, [2, 2])],
                       [helper.make_tensor_value_info("y", T.FLOAT, None)],
                       [numpy_helper.from_array(np.array([0], np.int64), "a")], opset=13, extra_opsets=[CONTRIB])
    for name in ("gma/one", "gma/d0", "gma/input_shape"):
        values = numpy_helper.from_array(np.array([7], np.int64), name)
        model.graph.sparse_initializer.append(
            helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([0], np.int64), ""), [3]))
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(3, 2), "i": np.array([[2, 0], [1, 2]])}
    want = custom_session(model).run(None, feeds)[0]
    lowered, report = lower_model(model)
    assert report.lowered == 1
    np.testing.assert_array_equal(builtin_session(lowered).run(None, feeds)[0], want)


# -- item 9: an initializer that is also a graph input is a default, not a constant -----------------

def test_lower_does_not_bake_in_overridable_axes():
    node = helper.make_node("GatherMultiaxis", ["x", "i", "a"], ["y"], domain="ai.onnx.contrib", name="gma",
                            mode="error")
    model = make_model([node], [helper.make_tensor_value_info("x", T.FLOAT, [3, 3]),
                                helper.make_tensor_value_info("i", T.INT64, [3, 3]),
                                helper.make_tensor_value_info("a", T.INT64, [1])],
                       [helper.make_tensor_value_info("y", T.FLOAT, None)],
                       [numpy_helper.from_array(np.array([0], np.int64), "a")], opset=13, extra_opsets=[CONTRIB])
    feeds = {"x": np.arange(9, dtype=np.float32).reshape(3, 3), "i": np.array([[2, 0, 1], [1, 1, 0], [0, 2, 2]])}
    fed = dict(feeds, a=np.array([1], np.int64))
    reference = custom_session(model)
    default, overridden = reference.run(None, feeds)[0], reference.run(None, fed)[0]
    assert not np.array_equal(default, overridden)  # the fed axes matter
    lowered, report = lower_model(model)
    if report.left:  # left as it is, saying why
        assert "graph input" in report.outcomes[0].reason
        session = custom_session(lowered)
    else:  # lowered with run-time axes: must honour them
        session = builtin_session(lowered)
    np.testing.assert_array_equal(session.run(None, feeds)[0], default)
    np.testing.assert_array_equal(session.run(None, fed)[0], overridden)


# -- item 13: outputs as valid as their inputs at every opset ---------------------------------------

OPSET_CASES = [(opset, op_type, attributes) for opset in range(7, 22) for op_type, attributes in
               (("Gather", {"axis": 1}), ("GatherElements", {"axis": 1}), ("GatherND", {}))
               if op_type == "Gather" or opset >= 11]  # GatherElements and GatherND exist from opset 11


@pytest.mark.parametrize("opset,op_type,attributes", OPSET_CASES)
def test_rewrite_and_lower_pass_the_full_checker_at_every_opset(opset, op_type, attributes):
    model = _gather_model(opset, op_type=op_type, **attributes)
    onnx.checker.check_model(model, full_check=True)
    feeds = _gather_feeds(op_type)
    want = builtin_session(model).run(None, feeds)[0]
    rewritten, report = rewrite_model(model, runtime_alignment=False)
    assert report.rewritten == 1
    onnx.checker.check_model(rewritten, full_check=True)
    np.testing.assert_array_equal(custom_session(rewritten).run(None, feeds)[0], want)
    lowered, lowering = lower_model(rewritten)
    assert lowering.left == 0, lowering.table()
    onnx.checker.check_model(lowered, full_check=True)
    np.testing.assert_array_equal(builtin_session(lowered).run(None, feeds)[0], want)


# -- item 14: lower refuses what the op's schema and the custom op refuse ----------------------------

def _single_gather_multiaxis(axes, **attributes):
    node = helper.make_node("GatherMultiaxis", ["x", "i", "a"], ["y"], domain="ai.onnx.contrib", name="gma",
                            **attributes)
    return make_model([node], [helper.make_tensor_value_info("x", T.FLOAT, [3, 2]),
                               helper.make_tensor_value_info("i", T.INT64, [2, 2])],
                      [helper.make_tensor_value_info("y", T.FLOAT, None)],
                      [numpy_helper.from_array(axes, "a")], opset=13, extra_opsets=[CONTRIB])


@pytest.mark.parametrize("axes,attributes,reason", [
    (np.array([0], np.int64), {}, "no 'mode' attribute"),
    (np.array([0], np.int32), {"mode": "error"}, "1-D int64"),
])
def test_lower_refuses_nodes_the_schema_refuses(axes, attributes, reason):
    model = _single_gather_multiaxis(axes, **attributes)
    with pytest.raises(Exception):  # noqa: B017 - ORT's own exception types
        custom_session(model).run(None, {"x": np.ones((3, 2), np.float32), "i": np.zeros((2, 2), np.int64)})
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model, full_check=True)
    lowered, report = lower_model(model)
    assert report.left == 1 and reason in report.outcomes[0].reason
    assert any(node.op_type == "GatherMultiaxis" for node in lowered.graph.node)
