"""Shared by the source tests: a record's run-time alignment evaluated by onnx's reference runtime."""

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from gathermultiaxis.graphs.ir.builder import NameScope, NodeBuilder


def run_time_alignment(source, node, data: np.ndarray, indices: np.ndarray, opset: int = 13):
    """The aligned data, indices and axes the record's run-time alignment computes for these arrays."""
    builder = NodeBuilder(opset, NameScope({"x", "i", "y"}), "t")
    aligned = source.align_at_run_time(builder, "x", "i", node)
    graph = helper.make_graph(
        builder.nodes, "alignment",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)],
        [helper.make_tensor_value_info(name, 0, None) for name in (aligned.data, aligned.indices, aligned.axes)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, {"x": data, "i": indices})
