"""ONNX Gather(axis): indices' dims in front of the data axis (``ops.alignment.gather_alignment``)."""

from __future__ import annotations

from onnx import NodeProto

from ...ops.alignment import GATHER, gather_alignment
from ...ops.contract import Mode
from ..ranks.tensor_info import TensorInfo
from ..ir.builder import INT64_MAX, NodeBuilder
from ..ir.walk import attribute
from ..ranks.rank_rules import known, ranked
from .run_time_shapes import AXES_INPUT_OPSET, RuntimeAlignment, ShapeArithmetic
from .source_gather import Replacement, Rewrite, SourceGather


def rule_gather(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Replacement:
    """Gather's static alignment, mode Mode.ERROR."""
    assert data.rank is not None and indices.rank is not None, "RULES run on known ranks (_static_replacement)"
    return Replacement(gather_alignment(data.rank, indices.rank, attribute(node, "axis", 0)))


def rank_rule(node, inputs, constants):
    """rank(data) + rank(indices) - 1; a 1-D result (of a shape vector) keeps its exact length."""
    if not (known(inputs[0]) and known(inputs[1])):
        return None
    data, indices = inputs[0].shape, inputs[1].shape
    axis = attribute(node, "axis", 0) % len(data)
    dims = (*data[:axis], *indices, *data[axis + 1:])
    if len(dims) == 1 and isinstance(dims[0], int):
        return [TensorInfo(inputs[0].elem_type, dims)]
    return [ranked(inputs[0].elem_type, len(dims))]


# At run time, the indices get a trailing size-1 dimension first, so even scalar indices take the general path;
# that dimension is squeezed from the output at ``axis + q``.
def _gather_by_reshape(builder: NodeBuilder, data: str, indices: str, axis: int) -> RuntimeAlignment:
    """``gather`` below opset 13: data.shape[:axis] + ones(q) + data.shape[axis:] for the data, ones(axis) +
    indices.shape + [1] + ones(r-axis-1) for the indices, and the output reshaped to Gather's shape."""
    m = ShapeArithmetic(builder)
    data_shape, indices_shape = builder.shape(data, "data_shape"), builder.shape(indices, "indices_shape")
    q = builder.length(indices_shape, "indices_rank")
    # the data's rank only places a negative axis (nothing else reads it: no dead nodes for axis >= 0)
    a = m.const(axis, "axis") if axis >= 0 else m.axis(axis, builder.length(data_shape, "data_rank"), "axis")
    head = m.cut(data_shape, 0, axis, "data_head") if axis != 0 else None   # data.shape[:axis]
    tail = m.cut(data_shape, axis, INT64_MAX, "data_tail")                 # data.shape[axis:]
    rest = m.cut(tail, 1, INT64_MAX, "data_rest")                           # data.shape[axis+1:]
    aligned_data = builder.concat([*([head] if head else []), m.ones_like(indices_shape, "data_ones"), tail],
                                  "data_aligned_shape")
    indices_parts = [m.ones_like(head, "indices_ones_head")] if head else []
    indices_parts += [indices_shape, m.const([1], "indices_one"), m.ones_like(rest, "indices_ones_tail")]
    aligned_indices = builder.concat(indices_parts, "indices_aligned_shape")
    output_shape = builder.concat([*([head] if head else []), indices_shape, rest], "output_shape")
    return RuntimeAlignment(m.reshape(data, aligned_data, "align_data"),
                            m.reshape(indices, aligned_indices, "align_indices"),
                            m.vector(m.add(a, q, "read_axis"), "axes"), None, output_shape)


def gather(builder: NodeBuilder, data: str, indices: str, axis: int) -> RuntimeAlignment:
    """Gather's alignment at run time: output = data.shape[:axis] + indices.shape + data.shape[axis+1:]."""
    if builder.opset < AXES_INPUT_OPSET:
        return _gather_by_reshape(builder, data, indices, axis)
    m = ShapeArithmetic(builder)
    r, q = m.rank(data, "data_rank"), m.rank(indices, "indices_rank")
    a = m.axis(axis, r, "axis")
    indices = builder.unsqueeze(indices, [-1], "indices_trailing_one")  # rank q+1: scalars take the same path
    read = m.add(a, q, "read_axis")                                      # axis + q
    data = builder.op("Unsqueeze", [data, m.range(a, read, "data_ones")], "align_data")
    after = m.add(read, m.const(1, "one"), "after_read_axis")
    ones = builder.concat([m.range(m.const(0, "zero"), a, "indices_ones_head"),
                           m.range(after, m.add(r, q, "aligned_rank"), "indices_ones_tail")], "indices_ones")
    indices = builder.op("Unsqueeze", [indices, ones], "align_indices")
    axes = m.vector(read, "axes")
    return RuntimeAlignment(data, indices, axes, axes)


def align_at_run_time(builder: NodeBuilder, data: str, indices: str, node: NodeProto) -> RuntimeAlignment:
    """Gather's run-time alignment."""
    return gather(builder, data, indices, attribute(node, "axis", 0))


SOURCE = SourceGather("", GATHER, Rewrite.DEFAULT, first_opset=1, mode=Mode.ERROR, align=rule_gather,
                      align_at_run_time=align_at_run_time, rank_rule=rank_rule, recorded_attributes=("axis",))

__all__ = ["SOURCE", "gather", "rank_rule", "rule_gather"]
