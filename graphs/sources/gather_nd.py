"""ONNX GatherND(batch_dims) with k-tuples (``ops.alignment.gather_nd_alignment``), in Mode.ERROR_NONEMPTY:
ORT's GatherND checks nothing when its output is empty."""

from __future__ import annotations

import numpy as np
from onnx import NodeProto, TensorProto, numpy_helper

from ...ops.alignment import GATHER_ND, gather_nd_alignment
from ...ops.contract import Mode
from ..ranks.tensor_info import TensorInfo
from ..ir.builder import INT64_MAX, NodeBuilder
from ..ir.walk import attribute
from .run_time_shapes import AXES_INPUT_OPSET, RuntimeAlignment, ShapeArithmetic
from .source_gather import NeedsRunTime, Replacement, Rewrite, SourceGather

BATCH_DIMS_OPSET = 12  # GatherND's batch_dims attribute


def rule_gather_nd(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Replacement:
    """GatherND's static alignment; raises NeedsRunTime where the coordinate size is not known statically."""
    assert data.rank is not None and indices.shape is not None, "RULES run on known ranks (_static_replacement)"
    assert indices.rank is not None  # the same fact, for the type checker
    k = indices.shape[-1] if indices.rank else 0
    if not isinstance(k, int):
        raise NeedsRunTime("the coordinate size (last indices dimension) is not known statically")
    alignment = gather_nd_alignment(data.rank, indices.rank, k, attribute(node, "batch_dims", 0))
    return Replacement(alignment, mode=Mode.ERROR_NONEMPTY)


# At run time, the data and indices get one trailing size-1 dimension that holds the folded coordinates, so a
# padding dimension always exists; it is squeezed from the output with the index region's padding. Indices
# with no coordinate (``[..., 0]``: whole slices) are padded to one zero coordinate first.
def _empty_coordinates_as_one(builder: NodeBuilder, m: ShapeArithmetic, indices: str, last: str, q: str) -> tuple[str, str]:
    """GatherND with k = 0 (indices ``[..., 0]``) reads whole slices and no coordinate. Its indices' empty
    last dimension is padded to size 1 (a zero that no axis reads) so that the dimension holding the
    folded coordinates exists, as it does for k >= 1 (squeezing a size-0 dimension would fail). The pad
    is ``k == 0`` at the end of the last axis: nothing otherwise (Pad takes pads as an input from 11).
    Returns the indices and ``k == 0`` as a 1-D int64 vector (their last dimension's size is ``k`` plus
    that)."""
    no_coordinates = builder.cast(builder.op("Equal", [last, m.const([0], "k_zero")], "no_coordinates"),
                                  TensorProto.INT64, "no_coordinates_01")
    other_pads = m.sub(m.add(q, q, "two_q"), m.const(1, "one_pad"), "other_pads")  # 2q - 1
    zero = numpy_helper.from_array(np.array([0], np.int64))
    zeros = builder.op("ConstantOfShape", [m.vector(other_pads, "other_pads_1d")], "pads_head", value=zero)
    pads = builder.concat([zeros, no_coordinates], "coordinate_pads")
    return builder.op("Pad", [indices, pads], "coordinates_or_one"), no_coordinates


def _gather_nd_by_reshape(builder: NodeBuilder, data: str, indices: str, batch_dims: int) -> RuntimeAlignment:
    """``gather_nd`` below opset 13 (GatherND exists from 11): data.shape[:b+k] + ones(M-k) +
    data.shape[b+k:] + [1] for the data, indices.shape[:-1] + ones(A-q) + [k] for the indices, and the
    output reshaped to indices.shape[:-1] + data.shape[b+k:]."""
    m = ShapeArithmetic(builder)
    data_shape, indices_shape = builder.shape(data, "data_shape"), builder.shape(indices, "indices_shape")
    r = builder.length(data_shape, "data_rank")
    q = builder.length(indices_shape, "indices_rank")
    b = m.const(batch_dims, "batch_dims")
    last = m.cut(indices_shape, -1, INT64_MAX, "coordinate_size_1d")
    b_k = m.add(b, builder.squeeze(last, [0], "coordinate_size"), "indexed_end")          # b+k
    short = m.sub(m.sub(q, m.const(1, "one"), "q_minus_one"), b_k, "index_dims_over_k")  # q-1-b-k
    below = builder.op("Less", [short, m.const(0, "zero")], "no_padding")
    pad = builder.op("Where", [below, m.const(0, "zero_pad"), short], "padding")         # M-k
    b_k_1d = m.vector(b_k, "indexed_end_1d")
    head = builder.slice(data_shape, m.const([0], "head_start"), b_k_1d, m.const([0], "head_axes"), "data_head")
    tail = builder.slice(data_shape, b_k_1d, m.const([INT64_MAX], "tail_end"), m.const([0], "tail_axes"),
                         "data_tail")
    index_region = m.cut(indices_shape, 0, -1, "index_region")
    indices, no_coordinates = _empty_coordinates_as_one(builder, m, indices, last, q)
    last = m.add(last, no_coordinates, "folded_size_1d")  # k, or 1 where k = 0 (Max needs opset 12 for int64)
    data_ones = m.ones(pad, "data_ones")
    aligned_data = builder.concat([head, data_ones, tail, m.const([1], "data_one_last")], "data_aligned_shape")
    # A - q = r + (M-k) + 1 - q >= 0
    indices_ones = m.ones(m.sub(m.add(m.add(r, pad, "r_pad"), m.const(1, "one_"), "aligned_rank_minus_b"), q,
                                "indices_pad"), "indices_ones")
    aligned_indices = builder.concat([index_region, indices_ones, last], "indices_aligned_shape")
    output_shape = builder.concat([index_region, tail], "output_shape")
    return RuntimeAlignment(m.reshape(data, aligned_data, "align_data"),
                            m.reshape(indices, aligned_indices, "align_indices"),
                            m.range(b, b_k, "axes"), None, output_shape)


def gather_nd(builder: NodeBuilder, data: str, indices: str, batch_dims: int) -> RuntimeAlignment:
    """GatherND's alignment at run time: aligned rank A = b + M + T + 1, with M = max(k, q-1-b) and T = r-b-k
    (batch dims, the index region, the trailing data dims, the size-1 dimension of the folded coordinates)."""
    if builder.opset < AXES_INPUT_OPSET:
        return _gather_nd_by_reshape(builder, data, indices, batch_dims)
    m = ShapeArithmetic(builder)
    r, q = m.rank(data, "data_rank"), m.rank(indices, "indices_rank")
    b = m.const(batch_dims, "batch_dims")
    last = builder.slice(builder.shape(indices, "indices_shape"), m.const([-1], "last_start"),
                         m.const([INT64_MAX], "last_end"), m.const([0], "last_axes"), "coordinate_size_1d")
    k = builder.squeeze(last, [0], "coordinate_size")
    indices, _ = _empty_coordinates_as_one(builder, m, indices, last, q)
    q_index = m.sub(m.sub(q, m.const(1, "one"), "q_minus_one"), b, "index_dims")    # q-1-b
    region_end = m.add(b, builder.op("Max", [k, q_index], "region"), "region_end")  # b+M
    b_k = m.add(b, k, "indexed_end")                                                # b+k
    trailing = m.sub(r, b_k, "trailing")                                            # T
    last_axis = m.add(region_end, trailing, "last_axis")                            # b+M+T = A-1
    data_ones = builder.concat([m.range(b_k, region_end, "data_ones_region"), m.vector(last_axis, "data_one_last")],
                               "data_ones")
    data = builder.op("Unsqueeze", [data, data_ones], "align_data")
    q_minus_one = m.sub(q, m.const(1, "one_"), "folded_axis")
    indices = builder.op("Unsqueeze", [indices, m.range(q_minus_one, last_axis, "indices_ones")], "align_indices")
    squeeze = builder.concat([m.range(q_minus_one, region_end, "squeeze_region"), m.vector(last_axis, "squeeze_last")],
                             "restore_rank_axes")
    return RuntimeAlignment(data, indices, m.range(b, b_k, "axes"), squeeze)


def align_at_run_time(builder: NodeBuilder, data: str, indices: str, node: NodeProto) -> RuntimeAlignment:
    """GatherND's run-time alignment."""
    return gather_nd(builder, data, indices, attribute(node, "batch_dims", 0))


SOURCE = SourceGather("", GATHER_ND, Rewrite.DEFAULT, first_opset=11, mode=Mode.ERROR_NONEMPTY,
                      align=rule_gather_nd, align_at_run_time=align_at_run_time, recorded_attributes=("batch_dims",))

__all__ = ["BATCH_DIMS_OPSET", "SOURCE", "gather_nd", "rule_gather_nd"]
