"""graphs.ranks.typing_copy: the copy shape inference runs on holds what ORT enforces, no large payload, and
ORT's readings where ONNX's inference differs from ORT's kernels."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.ranks.shape_inference import inferred
from gathermultiaxis.graphs.ranks.tensor_info import graph_infos
from gathermultiaxis.graphs.ranks.typing_copy import STRIP_ABOVE_BYTES, is_large, typing_copy


def test_a_large_initializer_becomes_a_bare_input_with_its_dims():
    big = numpy_helper.from_array(np.zeros(STRIP_ABOVE_BYTES // 4 + 1, np.float32), "big")
    small = numpy_helper.from_array(np.zeros(3, np.float32), "small")
    assert is_large(big) and not is_large(small)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Add", ["big", "x"], ["y"])], "g", [x], [y], [big, small])
    light = typing_copy(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert [t.name for t in light.graph.initializer] == ["small"]
    bare = {value.name: value for value in light.graph.input}["big"]
    assert [d.dim_value for d in bare.type.tensor_type.shape.dim] == [STRIP_ABOVE_BYTES // 4 + 1]


def test_split_to_sequence_with_a_scalar_split_is_typed_as_ort_runs_it():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    split = numpy_helper.from_array(np.array(1, np.int64), "split")
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["seq"], axis=0, keepdims=0),
             helper.make_node("SequenceAt", ["seq", "zero"], ["y"])]
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [split, zero]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx_rank = graph_infos(onnx.shape_inference.infer_shapes(model).graph, main=True)["y"].rank
    ours = graph_infos(inferred(typing_copy(model)).graph, main=True)["y"].rank
    assert (onnx_rank, ours) == (2, 1)  # ORT's kernel drops the split axis for a scalar split
