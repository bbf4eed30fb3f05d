"""Test helpers: a hypothesis strategy of random gatherMultiaxis calls and small ONNX model builders
(the per-element reference is gathermultiaxis.ops.reference)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.harness import IR_VERSION, difference

OPSET = 17


@dataclass
class GatherCase:
    data: np.ndarray  # int64 values; convert with as_dtype
    indices: np.ndarray
    axes: list
    mode: str

    def as_dtype(self, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        if dtype == object:
            return np.array([f"s{v}" for v in self.data.reshape(-1)], dtype=object).reshape(self.data.shape)
        if dtype == bool:
            return np.asarray(self.data % 3 == 0)
        if dtype.kind == "f":
            values = np.array(self.data, dtype=dtype)
            values[self.data % 7 == 3] = np.nan  # NaN positions must survive
            values[self.data % 7 == 5] = -0.0
            return values
        return np.array(self.data, dtype=dtype)


@st.composite
def gather_cases(draw, modes=("error", "error_nonempty", "zero", "clamp"), max_rank=5, out_of_range=True):
    """Random valid gatherMultiaxis calls: ranks 0-5, dims 0-4 with 1s and broadcasts, axes in any
    order (some negative), int32/int64 indices with negative values and, optionally, out-of-range ones."""
    rank = draw(st.integers(0, max_rank))
    dim_sizes = st.sampled_from([0] + [1] * 4 + [2, 3, 4] * 4)  # a zero dim now and then
    input_shape = draw(st.lists(dim_sizes, min_size=rank, max_size=rank))
    n_axes = draw(st.sampled_from([0] + [1] * 3 + list(range(1, rank + 1)) * 3)) if rank else 0
    axes = draw(st.permutations(range(rank)))[:n_axes] if rank else []
    axes = [a - rank if draw(st.booleans()) else a for a in axes]
    normalized = [a % rank for a in axes] if rank else []
    logical = []
    for d in range(rank):
        size_in = input_shape[d]
        if d in normalized:
            logical.append(draw(st.sampled_from([0] + [1, 2, 3] * 5)) if size_in else 0)
        elif size_in == 1:
            logical.append(draw(st.sampled_from([0] + [1, 2, 3] * 5)))
        else:
            logical.append(draw(st.sampled_from([size_in, 1])))
    mode = draw(st.sampled_from(modes))
    # indexing an empty axis needs an empty index set (or, in error_nonempty, an empty output)
    if any(input_shape[a] == 0 for a in normalized) and rank:
        if not (mode == "error_nonempty" and draw(st.booleans())):
            logical[normalized[0]] = 0
    actual = list(logical)
    if len(axes) > 1:
        actual[-1] *= len(axes)
    index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    size = int(np.prod(actual)) if rank else 1
    values = []
    for flat in range(size):
        axis = normalized[flat % len(axes)] if len(axes) > 1 else (normalized[0] if normalized else None)
        dim = input_shape[axis] if axis is not None else 1
        low, high = -dim, dim - 1
        if out_of_range and draw(st.integers(0, 9)) == 0:
            low, high = -dim - 3, dim + 3
        values.append(draw(st.integers(low, max(high, low))))
    indices = np.array(values, dtype=index_dtype).reshape(actual)
    data = np.asarray(np.arange(int(np.prod(input_shape)), dtype=np.int64).reshape(input_shape) * 3 + 1)
    return GatherCase(data, indices, axes, mode)


def make_model(nodes, inputs, outputs, initializers=(), opset=OPSET, extra_opsets=(), ir_version=IR_VERSION):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset), *extra_opsets]
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)


def gather_multiaxis_model(elem_type, index_type, mode="error") -> onnx.ModelProto:
    """One GatherMultiaxis node with unknown input shapes; axes come in as an input."""
    node = helper.make_node("GatherMultiaxis", ["input", "indices", "axes"], ["output"],
                            domain="ai.onnx.contrib", mode=mode)
    return make_model(
        [node],
        [helper.make_tensor_value_info("input", elem_type, None),
         helper.make_tensor_value_info("indices", index_type, None),
         helper.make_tensor_value_info("axes", TensorProto.INT64, None)],
        [helper.make_tensor_value_info("output", elem_type, None)],
        extra_opsets=[helper.make_opsetid("ai.onnx.contrib", 1)])


def assert_bit_identical(actual, expected):
    """Same dtype, shape, values and NaN positions (and the same bytes for non-object dtypes)."""
    problem = difference(actual, expected)
    assert problem is None, problem


def reversal_model() -> onnx.ModelProto:
    """Gather(x, Range(T-1, -1, -1)) along axis 0: x reversed. ORT 1.31's GatherToSliceFusion makes it
    a Slice that selects nothing."""
    def constant(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.int64), name))

    nodes = [helper.make_node("Shape", ["x"], ["shape"]), constant("zero", 0), constant("one", 1),
             constant("minus_one", -1), helper.make_node("Gather", ["shape", "zero"], ["length"], axis=0),
             helper.make_node("Sub", ["length", "one"], ["start"]),
             helper.make_node("Range", ["start", "minus_one", "minus_one"], ["reversed"]),
             helper.make_node("Gather", ["x", "reversed"], ["y"], axis=0, name="reverse")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 4])])
