"""`lower` (both targets) and the default session on GatherMultiaxis nodes with attributes no rewrite
writes: a provenance record whose integer lies outside int64's range, a mode that is not UTF-8 or is
unknown. The node is lowered from what the graph proves, or left with its reason; never a traceback."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from sessions import builtin_session
from support import make_model

import gathermultiaxis
from gathermultiaxis.cli import main
from gathermultiaxis.graphs import provenance, rewrite_model

FEEDS = {"data": np.arange(12, dtype=np.float32).reshape(3, 4), "idx": np.array([3, 0, -1], np.int64)}


def gather_model():
    node = helper.make_node("Gather", ["data", "idx"], ["y"], name="g", axis=1)
    return make_model([node], [helper.make_tensor_value_info("data", T.FLOAT, [3, 4]),
                               helper.make_tensor_value_info("idx", T.INT64, [3])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [3, 3])])


def rewritten_with(edit) -> onnx.ModelProto:
    """The rewrite of ``gather_model()``, its GatherMultiaxis node changed by ``edit``."""
    model, _ = rewrite_model(gather_model())
    edit(next(node for node in model.graph.node if node.op_type == "GatherMultiaxis"))
    return model


def record_axis(value):
    def edit(node):
        entry = next(p for p in node.metadata_props if p.key == provenance.KEY)
        record = json.loads(entry.value)
        record["attributes"]["axis"] = value
        entry.value = json.dumps(record)
    return edit


def mode(value: bytes):
    def edit(node):
        next(a for a in node.attribute if a.name == "mode").s = value
    return edit


def lower(model, tmp_path, capsys, *options):
    """Exit status, stdout and stderr of `lower` on ``model``, and the written model."""
    onnx.save(model, tmp_path / "in.onnx")
    status = main(["lower", str(tmp_path / "in.onnx"), "-o", str(tmp_path / "out.onnx"), "--force", *options])
    out, err = capsys.readouterr()
    return status, out, err, onnx.load(tmp_path / "out.onnx")


@pytest.mark.parametrize("value", [2**70, -2**63 - 1, 2**64])
@pytest.mark.parametrize("target", ["onnx", "webnn"])
def test_a_record_integer_outside_int64_is_no_record(tmp_path, capsys, value, target):
    assert provenance.ReplacedGather.from_text(json.dumps({"op_type": "Gather", "inputs": ["d", "i"], "output": "o",
                                                           "attributes": {"axis": value}})) is None
    status, out, err, lowered = lower(rewritten_with(record_axis(value)), tmp_path, capsys, "--target", target)
    assert status == 0 and err == "" and "lowered: 1, left: 0" in out, out + err
    assert not any(node.op_type == "GatherMultiaxis" for node in lowered.graph.node)
    expected = builtin_session(gather_model()).run(None, FEEDS)[0]
    actual = builtin_session(lowered).run(None, FEEDS)[0]  # plain ORT: no custom op left
    assert actual.dtype == expected.dtype and np.array_equal(actual, expected)


@pytest.mark.parametrize("value, shown", [(b"\xff\xfe", r"'\\xff\\xfe'"), (b"wrap", "'wrap'")])
@pytest.mark.parametrize("target", ["onnx", "webnn"])
def test_a_mode_not_utf8_or_unknown_leaves_the_node_with_its_reason(tmp_path, capsys, value, shown, target):
    status, out, err, lowered = lower(rewritten_with(mode(value)), tmp_path, capsys, "--target", target)
    assert status == 1 and err == "", err  # exit 1: a node left, the model written, the report says why
    assert "left 'g' in main graph: " in out and f"unknown mode {shown} (modes: error, error_nonempty" in out, out
    assert [node.op_type for node in lowered.graph.node].count("GatherMultiaxis") == 1


def test_the_default_session_takes_a_mode_that_is_not_utf8(tmp_path):
    onnx.save(rewritten_with(mode(b"\xff\xfe")), tmp_path / "m.onnx")
    session = gathermultiaxis.InferenceSession(str(tmp_path / "m.onnx"))  # the node stays on the kernel
    with pytest.raises(ValueError, match=r"mode must be one of .*got '\\\\xff\\\\xfe'"):
        session.run(None, FEEDS)
