"""ops/runtime/run_ops.py: the in-memory op types' names and attribute forms, BoundTable, is_bridge_node."""

import numpy as np
from onnx import TensorProto, helper

from gathermultiaxis.ops.runtime.run_ops import (BoundTable, axes_attribute, bound_op_type, group_attributes,
                                                 group_op_type, is_bridge_node, parse_axes, parse_group)


def test_attribute_forms_round_trip():
    assert parse_axes(axes_attribute([0, -1, 2])) == (0, -1, 2)
    attributes = group_attributes(["session1/3", "session1/5"], [1, 0])
    assert parse_group(attributes["tables"], attributes["slots"]) == (("session1/3", 1), ("session1/5", 0))
    assert bound_op_type(TensorProto.FLOAT) != bound_op_type(TensorProto.INT64)
    assert group_op_type((TensorProto.FLOAT, TensorProto.INT64)).startswith("GatherMultiaxisBoundGroup")


def test_is_bridge_node_takes_every_op_type_of_the_family_in_the_domain():
    assert is_bridge_node(helper.make_node("GatherMultiaxisRunFixedAxes", [], [], domain="ai.onnx.contrib"))
    assert is_bridge_node(helper.make_node(bound_op_type(TensorProto.FLOAT), [], [], domain="ai.onnx.contrib"))
    assert not is_bridge_node(helper.make_node("GatherMultiaxisRun", [], []))  # the default domain
    assert not is_bridge_node(helper.make_node("Gather", [], [], domain="ai.onnx.contrib"))


def test_bound_table_takes_the_embedding_form_only_for_checking_modes():
    table = np.arange(12, dtype=np.float32).reshape(1, 4, 3)
    assert BoundTable(table, axes=(1,), indices_axes=(2,)).take_table is not None
    assert BoundTable(table, axes=(1,), mode="error_nonempty", indices_axes=(2,)).take_table is not None
    for mode in ("zero", "clamp"):
        assert BoundTable(table, axes=(1,), mode=mode, indices_axes=(2,)).take_table is None
    assert BoundTable(table, axes=(1,)).indices(np.zeros((2, 5), np.int64)).shape == (2, 5)
