"""Rewritten models as users and tools leave them: edited after the rewrite, records that do not hold, values
whose element type the graph does not prove, ORT's GatherToSliceFusion behind an Identity, float16 NaN
payloads. The default session, the kernel path and the lowered model must agree with the kernel (issue 38's
reproductions; the mutation fuzzer, tests/conformance/test_mutate.py, draws such edits at random)."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import assert_bit_identical, make_model

import gathermultiaxis
from gathermultiaxis.graphs import lower_model, rewrite_model

CONTRIB = helper.make_opsetid("ai.onnx.contrib", 1)
RECORD = "gathermultiaxis.replaces"


def three_ways(model, feeds):
    """The outputs of the default session, the kernel path and the lowered model (raising: the exception)."""
    results = {}
    for side, builtin in (("default", True), ("kernel", False)):
        try:
            session = gathermultiaxis.InferenceSession(model, providers=["CPUExecutionProvider"],
                                                       run_builtin_gathers=builtin)
            results[side] = session.run(None, feeds)
        except Exception as error:  # noqa: BLE001 - ORT's and the op's own error types
            results[side] = error
    lowered, _ = lower_model(model)
    # the lowered model on ORT with onnxruntime-extensions' ops (string ops among them): a model holding no
    # GatherMultiaxis runs as it is in the package's session
    results["lowered"] = gathermultiaxis.InferenceSession(lowered, providers=["CPUExecutionProvider"]).run(None, feeds)
    return results


def assert_all_equal(results, expected):
    for side, outputs in results.items():
        assert not isinstance(outputs, Exception), f"{side} raised {outputs!r}"
        for got, want in zip(outputs, expected):
            assert_bit_identical(np.asarray(got), np.asarray(want))


def constant(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype), name))


def gather_model(data_shape, indices_shape, axis=0, elem_type=TensorProto.FLOAT, op_type="Gather", **attributes):
    node = helper.make_node(op_type, ["x", "i"], ["y"], name="g", axis=axis, **attributes) if op_type != "GatherND" \
        else helper.make_node(op_type, ["x", "i"], ["y"], name="g", **attributes)
    return make_model([node], [helper.make_tensor_value_info("x", elem_type, data_shape),
                               helper.make_tensor_value_info("i", TensorProto.INT64, indices_shape)],
                      [helper.make_tensor_value_info("y", elem_type, None)])


def the_gather(model):
    return next(node for node in model.graph.node if node.op_type == "GatherMultiaxis")


# 1. A model edited after the rewrite keeps its record; the edit must not be dropped.

def test_an_op_inserted_before_the_data_input_is_kept():
    rewritten, _ = rewrite_model(gather_model([6], [3]))
    node = the_gather(rewritten)
    rewritten.graph.node.insert(0, constant("two", 2.0, np.float32))
    rewritten.graph.node.insert(1, helper.make_node("Mul", [node.input[0], "two"], ["doubled"]))
    node.input[0] = "doubled"
    feeds = {"x": np.arange(6, dtype=np.float32), "i": np.array([3, 4, 5])}
    assert_all_equal(three_ways(rewritten, feeds), [np.array([6, 8, 10], np.float32)])


def test_a_reshape_inserted_after_the_output_is_kept():
    rewritten, _ = rewrite_model(gather_model([4, 3], [2]))
    node = the_gather(rewritten)
    gathered = node.output[0]
    node.output[0] = "before_reshape"
    position = list(rewritten.graph.node).index(node) + 1
    rewritten.graph.node.insert(position, constant("flat", [-1]))
    rewritten.graph.node.insert(position + 1, helper.make_node("Reshape", ["before_reshape", "flat"], [gathered]))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    feeds = {"x": x, "i": np.array([2, 0])}
    assert_all_equal(three_ways(rewritten, feeds), [x[[2, 0]].reshape(-1)])


# 2. A record is compared with the node it sits on; the rewrite replaces an earlier record; a record that does
#    not hold is ignored, never an error.

def hand_written(axes, record):
    node = helper.make_node("GatherMultiaxis", ["x", "i", "axes"], ["y"], name="hand", domain="ai.onnx.contrib",
                            mode="error")
    entry = node.metadata_props.add()
    entry.key, entry.value = RECORD, json.dumps(record)
    return make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, [1, 2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [numpy_helper.from_array(np.array(axes, np.int64), "axes")], extra_opsets=[CONTRIB])


def test_a_record_that_differs_from_its_node_is_ignored():
    model = hand_written([1], {"op_type": "Gather", "inputs": ["x", "i"], "output": "y", "attributes": {"axis": 0},
                               "name": "hand"})
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    feeds = {"x": x, "i": np.array([[3, 1]])}
    assert_all_equal(three_ways(model, feeds), [x[:, [3, 1]]])


@pytest.mark.parametrize("edit", [{"domain": "com.microsoft"}, {"attributes": {"axis": 1, "mode": 2}}])
def test_a_record_naming_another_domain_or_an_unknown_attribute_is_ignored(edit):
    record = {"op_type": "Gather", "inputs": ["x", "i"], "output": "y", "attributes": {"axis": 1}, "name": "hand"}
    model = hand_written([1], {**record, **edit})
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    feeds = {"x": x, "i": np.array([[3, 1]])}
    assert_all_equal(three_ways(model, feeds), [x[:, [3, 1]]])


def test_the_rewrite_replaces_an_earlier_record():
    model = gather_model([4, 3], [2], axis=1)
    stale = model.graph.node[0].metadata_props.add()
    stale.key = RECORD
    stale.value = json.dumps({"op_type": "Gather", "inputs": ["x", "i"], "output": "y", "attributes": {"axis": 0},
                              "name": "g"})
    rewritten, _ = rewrite_model(model)
    records = [json.loads(entry.value) for entry in the_gather(rewritten).metadata_props if entry.key == RECORD]
    assert [record["attributes"] for record in records] == [{"axis": 1}]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    feeds = {"x": x, "i": np.array([2, 0])}
    assert_all_equal(three_ways(rewritten, feeds), [x[:, [2, 0]]])


# 3. String data whose element type the graph does not prove (an onnxruntime-extensions string op's output).

def test_string_data_of_unknown_element_type_does_not_reach_orts_string_gather():
    nodes = [helper.make_node("StringUpper", ["s"], ["upper"], domain="ai.onnx.contrib"),
             helper.make_node("GatherMultiaxis", ["upper", "i", "axes"], ["y"], name="g", domain="ai.onnx.contrib",
                              mode="error")]
    model = make_model(nodes, [helper.make_tensor_value_info("s", TensorProto.STRING, [2, 3]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, [2, 1])],
                       [helper.make_tensor_value_info("y", TensorProto.STRING, None)],
                       [numpy_helper.from_array(np.array([0], np.int64), "axes")], extra_opsets=[CONTRIB])
    feeds = {"s": np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object), "i": np.array([[1], [0]])}
    expected = np.array([["D", "E", "F"], ["A", "B", "C"]], dtype=object)
    assert_all_equal(three_ways(model, feeds), [expected])


# 4. ORT's GatherToSliceFusion, through what ORT removes before it fuses.

@pytest.mark.parametrize("between", ["Identity", "Cast"])
def test_a_reversal_through_an_identity_or_a_no_op_cast_stays_right(between):
    passed = (helper.make_node("Identity", ["reversed"], ["indices"]) if between == "Identity"
              else helper.make_node("Cast", ["reversed"], ["indices"], to=TensorProto.INT64))
    nodes = [helper.make_node("Shape", ["x"], ["shape"]), constant("zero", 0), constant("one", 1),
             constant("minus_one", -1), helper.make_node("Gather", ["shape", "zero"], ["length"], axis=0),
             helper.make_node("Sub", ["length", "one"], ["start"]),
             helper.make_node("Range", ["start", "minus_one", "minus_one"], ["reversed"]), passed,
             helper.make_node("Gather", ["x", "indices"], ["y"], axis=0, name="reverse")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 4])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 4])])
    rewritten, _ = rewrite_model(model)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_all_equal(three_ways(rewritten, {"x": x}), [x[::-1]])


# 5. float16 NaN payloads on the kernel path, with a Squeeze between the op and the Cast back.

HALF_NANS = np.array([0x7E01, 0xFE03, 0x7E55, 0x3C00], np.uint16).view(np.float16)


@pytest.mark.parametrize("op_type, indices, attributes", [
    ("GatherND", np.array([[1, 0], [0, 3], [1, 1]]), {}),
    ("Gather", np.array(1), {"axis": 0}),
])
def test_float16_nan_payloads_are_kept_on_the_kernel_path(op_type, indices, attributes):
    model = gather_model([2, 4], list(indices.shape), elem_type=TensorProto.FLOAT16, op_type=op_type, **attributes)
    rewritten, _ = rewrite_model(model)
    x = np.stack([HALF_NANS[::-1], HALF_NANS])
    feeds = {"x": x, "i": indices}
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    kernel = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    assert_bit_identical(kernel.run(None, feeds)[0], expected[0])
    assert_all_equal(three_ways(rewritten, feeds), expected)
