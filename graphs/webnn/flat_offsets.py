"""The general WebNN form: one gather of the data as 1-D at flat offsets computed from the indices."""

from __future__ import annotations

from math import prod

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from ..ir.builder import NodeBuilder
from .webnn_facts import NodeFacts, WebNNLowering, zero_fills
from .webnn_ops import INT32_LIMIT

def flat_offsets(lowering: WebNNLowering, facts: NodeFacts) -> list[NodeProto]:
    """One gather of the data as 1-D at flat offsets ``sum_j c_j * stride(axes[j]) + sum_d iota_d * stride(d)``."""
    node, mode, elem_type = facts.node, facts.mode, facts.elem_type
    indices = node.input[1]
    data_shape, indices_shape, axes, out = facts.data_shape, facts.indices_shape, facts.axes, facts.out
    rank = facts.rank
    b = NodeBuilder(lowering.opset, lowering.names, node.name or "gather_multiaxis")
    strides = [prod(data_shape[d + 1:]) for d in range(rank)]
    terms: list[tuple[str, tuple[int, ...]]] = []  # offsets, and the shape they broadcast from
    valid: str | None = None
    k = len(axes)
    for j, axis in enumerate(axes):
        if k > 1:
            positions = numpy_helper.from_array(np.arange(j, indices_shape[-1], k, dtype=np.int32), name="")
            component = b.op("Gather", [indices, b.op("Constant", [], f"component{j}_positions", value=positions)],
                             f"component{j}", axis=rank - 1)
        else:
            component = indices
        if lowering.infos[indices].elem_type != TensorProto.INT64:
            component = b.cast(component, TensorProto.INT64, f"component{j}_int64")
        dim = data_shape[axis]
        zero, dim_value = b.constant(0, f"zero{j}"), b.constant(dim, f"dim{j}")
        if zero_fills(mode):
            above = b.op("Less", [component, dim_value], f"below_end{j}")
            below = b.op("Less", [component, b.constant(-dim, f"minus_dim{j}")], f"before_start{j}")
            in_range = b.op("And", [above, b.op("Not", [below], f"not_before_start{j}")], f"in_range{j}")
            valid = in_range if valid is None else b.op("And", [valid, in_range], f"in_range_all{j}")
        negative = b.op("Less", [component, zero], f"negative{j}")
        wrapped = b.op("Where", [negative, b.op("Add", [component, dim_value], f"from_end{j}"), component],
                       f"wrapped{j}")
        low = b.op("Less", [wrapped, zero], f"still_negative{j}")
        wrapped = b.op("Where", [low, zero, wrapped], f"at_least_zero{j}")
        last = b.constant(dim - 1, f"last{j}")
        high = b.op("Less", [last, wrapped], f"past_end{j}")
        coordinate = b.op("Where", [high, last, wrapped], f"coordinate{j}")
        terms.append((b.op("Mul", [coordinate, b.constant(strides[axis], f"stride{j}")], f"offset{j}"),
                      facts.logical))  # the indices' shape, each coordinate tuple folded to one element
    for d in range(rank):
        if d in axes or data_shape[d] == 1 or out[d] == 1:
            continue
        iota = (np.arange(out[d], dtype=np.int64) * strides[d]).reshape([out[d] if e == d else 1 for e in range(rank)])
        terms.append((b.constant(iota, f"iota{d}"), iota.shape))
    offsets, shape = (terms[0] if terms else (b.constant(np.zeros([1] * rank, np.int64), "origin"), (1,) * rank))
    for term, term_shape in terms[1:]:
        offsets, shape = b.op("Add", [offsets, term], "offsets"), np.broadcast_shapes(shape, term_shape)
    if tuple(shape) != tuple(out):
        offsets = b.op("Expand", [offsets, b.constant(list(out), "output_shape")], "offsets_expanded")
    size = prod(data_shape)
    # Mode "zero": out-of-range positions read a zero element appended to the data (not Where on the
    # result: ORT's Where writes +0.0 for -0.0, and has no int16, uint16, uint64 or bool kernel)
    if valid is not None:
        offsets = b.op("Where", [valid, offsets, b.constant(size, "zero_element_offset")], "offsets_zeroed")
    if size < INT32_LIMIT:
        offsets = b.cast(offsets, TensorProto.INT32, "offsets_int32")
    flat = b.op("Reshape", [node.input[0], b.constant([size], "flat_shape")], "flat_data")
    if valid is not None:
        zero_value = numpy_helper.from_array(np.zeros(1, helper.tensor_dtype_to_np_dtype(elem_type)), name="")
        flat = b.op("Concat", [flat, b.op("Constant", [], "zero_element", value=zero_value)], "flat_data_and_zero",
                    axis=0)
    b.op("Gather", [flat, offsets], "read", axis=0)
    b.rename_last_output(node.output[0])
    return list(b.nodes)
