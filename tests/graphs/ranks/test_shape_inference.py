"""graphs.ranks.shape_inference: layer 1, ONNX's inference with data propagation, and Loop-carried ranks by
induction."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.ranks.shape_inference import induced_names, inferred
from gathermultiaxis.graphs.ranks.tensor_info import graph_infos
from gathermultiaxis.graphs.ranks.typing_copy import typing_copy


def test_data_propagation_gives_a_reshape_s_sizes():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shape = numpy_helper.from_array(np.array([3, 4], np.int64), "shape")
    model = helper.make_model(helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "g", [x], [y],
                                                [shape]), opset_imports=[helper.make_opsetid("", 17)])
    result = inferred(typing_copy(model))
    assert graph_infos(result.graph, main=True)["y"].shape == (3, 4)
    assert induced_names(result.graph) == set()


def test_a_loop_carried_value_gets_its_rank_by_induction():
    """A value whose shape changes each iteration (Concat on a carried tensor): ONNX leaves the body's output
    unranked; the induction proves rank 2 and marks the names it ranked."""
    body_inputs = [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                   helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                   helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)]
    body_outputs = [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None)]
    body = helper.make_graph([helper.make_node("Identity", ["cond"], ["cond_out"]),
                              helper.make_node("Concat", ["acc", "acc"], ["acc_out"], axis=0)],
                             "body", body_inputs, body_outputs)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    trip = numpy_helper.from_array(np.array(2, np.int64), "trip")
    true = numpy_helper.from_array(np.array(True), "true")
    model = helper.make_model(helper.make_graph([helper.make_node("Loop", ["trip", "true", "x"], ["y"], body=body)],
                                                "g", [x], [y], [trip, true]),
                              opset_imports=[helper.make_opsetid("", 17)])
    result = inferred(typing_copy(model))
    assert graph_infos(result.graph, main=True)["y"].rank == 2
