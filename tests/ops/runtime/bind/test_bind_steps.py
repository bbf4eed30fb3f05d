"""ops/runtime/bind/bind_steps.py: the model-wide steps of the bind step, each a ModelPass after the visit."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from support import gather_multiaxis_model, make_model

from gathermultiaxis.ops.runtime.bind.bind_pass import BindOptions, BindPass
from gathermultiaxis.ops.runtime.bind.bind_steps import (CopyScanBodyOutputs, GroupSharedIndices, bridge_crossings,
                                                         holds_gather)
from gathermultiaxis.ops.runtime.bind.preparation import bind_sequence


def test_a_gather_multiaxis_model_holds_one_bridge_node():
    model = gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64)
    assert holds_gather(model) and bridge_crossings(model) == 1
    model.graph.node[0].domain = ""
    assert not holds_gather(model) and bridge_crossings(model) == 0


def two_tables_one_index():
    """Two constant tables (float, int64) gathered by the same indices with constant axes."""
    tables = [numpy_helper.from_array(np.arange(6, dtype=np.float32), "a"),
              numpy_helper.from_array(np.arange(6, dtype=np.int64), "b"),
              numpy_helper.from_array(np.array([0], np.int64), "axes")]
    nodes = [helper.make_node("GatherMultiaxis", [table, "ids", "axes"], [f"out_{table}"], domain="ai.onnx.contrib",
                              mode="error", name=table) for table in "ab"]
    value = helper.make_tensor_value_info
    return make_model(nodes, [value("ids", TensorProto.INT64, [3])],
                      [value("out_a", TensorProto.FLOAT, [3]), value("out_b", TensorProto.INT64, [3])], tables,
                      extra_opsets=[helper.make_opsetid("ai.onnx.contrib", 1)])


def test_bound_tables_sharing_indices_cross_the_bridge_once():
    binding = BindPass(None, True, False)
    result = bind_sequence(binding)(two_tables_one_index())
    prepared = binding.prepared
    assert result.modified and prepared is not None and prepared.model is result.model
    nodes = result.model.graph.node
    assert [node.op_type for node in nodes] == ["GatherMultiaxisBoundGroupFloatInt64"]
    assert list(nodes[0].output) == ["out_a", "out_b"] and len(prepared.tables) == 2
    assert prepared.crossings == 1 and not result.model.graph.initializer  # the tables and axes went
    ungrouped = BindPass(None, True, False, BindOptions(group_shared_indices=False))
    bind_sequence(ungrouped)(two_tables_one_index())
    assert ungrouped.prepared is not None and ungrouped.prepared.crossings == 2


def test_a_step_leaves_a_model_whose_nodes_took_no_run_token():
    model = two_tables_one_index()
    before = model.SerializeToString()
    binding = BindPass(None, True, False)  # not run: nothing prepared
    for step in (GroupSharedIndices(binding), CopyScanBodyOutputs(binding)):
        assert not step(model).modified
    assert model.SerializeToString() == before
