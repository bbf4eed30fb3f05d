"""Small models for the graphs/webnn tests."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE


def gather_multiaxis_model(data_shape, indices_shape, axes, mode="error", nodes=(), initializers=()):
    """x (float) and i (int64) inputs, one GatherMultiaxis y = (x, i, axes) after ``nodes``."""
    node = helper.make_node(OP_TYPE, ["x", "i", "axes"], ["y"], domain=DOMAIN, mode=mode)
    graph = helper.make_graph([*nodes, node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(data_shape)),
                               helper.make_tensor_value_info("i", TensorProto.INT64, list(indices_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(axes, np.int64), "axes"), *initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=8)
