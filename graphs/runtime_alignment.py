"""Run-time rank alignment: the fourth layer, for gathers whose ranks (or GatherND's coordinate size) no
inference finds.

The same alignments as ``gathermultiaxis.ops.alignment``, written as shape arithmetic the model computes
itself: ranks are ``Size(Shape(x))``, the inserted dimensions are ``Range``s fed to ``Unsqueeze``, and
GatherMultiaxis reads its axes from a tensor. Two choices keep every rank case one graph (no If):

* Gather's indices get a trailing size-1 dimension first, so even scalar indices take the general path;
  that dimension is squeezed from the output at ``axis + q``.
* GatherND's data and indices get one trailing size-1 dimension that holds the folded coordinates, so
  a padding dimension always exists; it is squeezed from the output with the index region's padding.
  Indices with no coordinate (``[..., 0]``: whole slices) are padded to one zero coordinate first.

The squeezed axes are therefore never empty (an empty Squeeze axes input would squeeze every size-1
dimension). From opset 13 on, Unsqueeze and Squeeze take the computed axes as an input. Below 13 they
take axes only as an attribute, so the same alignments are Reshapes to computed shapes: the shape
vectors are cut at the node's (static) axis attribute and joined with vectors of ones
(``Shape * 0 + 1``), which needs only opset 7's ops (Slice with attributes below opset 10, no Range,
int64 comparisons only through Equal). Reshape's 0 copies an input dimension, so a size 0 in a
computed shape is written as -1 (the first) and 1 (the others), then an Expand to the shape restores the
0s (opset 11 on; below it, Gather on a tensor with two or more size-0 dimensions is refused by the
Reshape: an error, never a wrong result). GatherND (opset 11 on) may use opset 11's Range, Where and
Slice inputs there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, numpy_helper

from .ir.builder import INT64_MAX, NodeBuilder

MIN_OPSET = 7               # Gather; GatherElements and GatherND exist from opset 11
AXES_INPUT_OPSET = 13       # Unsqueeze/Squeeze take axes as an input; below it, Reshape to computed shapes


@dataclass(frozen=True)
class RuntimeAlignment:
    """Names of the aligned data and indices, the 1-D axes tensor, and how the output gets its rank back:
    the 1-D axes to squeeze, or the shape to reshape it to (or neither)."""

    data: str
    indices: str
    axes: str
    output_squeeze: str | None
    output_shape: str | None = None


class _Arith:
    """int64 scalar arithmetic on graph tensors, named after the replaced node."""

    def __init__(self, builder: NodeBuilder):
        self.b = builder

    def const(self, value, role: str) -> str:
        return self.b.constant(value, role)

    def rank(self, x: str, role: str) -> str:
        return self.b.length(self.b.shape(x, role + "_shape"), role)

    def add(self, a: str, c: str, role: str) -> str:
        return self.b.op("Add", [a, c], role)

    def sub(self, a: str, c: str, role: str) -> str:
        return self.b.op("Sub", [a, c], role)

    def range(self, start: str, end: str, role: str) -> str:
        return self.b.op("Range", [start, end, self.const(1, role + "_step")], role)

    def vector(self, scalar: str, role: str) -> str:
        return self.b.unsqueeze(scalar, [0], role)

    def axis(self, axis: int, rank: str, role: str) -> str:
        """A node's axis attribute made non-negative against a run-time rank. An axis below -rank becomes
        ``rank`` (out of range), so that GatherMultiaxis or Unsqueeze refuses it instead of wrapping it."""
        if axis >= 0:
            return self.const(axis, role)
        shifted = self.add(self.const(axis, role + "_attribute"), rank, role + "_shifted")
        if self.b.opset >= 9:
            below = self.b.op("Less", [shifted, self.const(0, role + "_zero")], role + "_below")
            return self.b.op("Where", [below, rank, shifted], role)
        # Opset 7/8: Less takes floats only and there is no Where: shifted + below * (rank - shifted).
        as_float = self.b.cast(shifted, TensorProto.FLOAT, role + "_as_float")
        zero = self.b.op("Constant", [], role + "_float_zero", value=numpy_helper.from_array(np.array(0, np.float32)))
        below = self.b.cast(self.b.op("Less", [as_float, zero], role + "_below"), TensorProto.INT64, role + "_below_01")
        return self.add(shifted, self.b.op("Mul", [below, self.sub(rank, shifted, role + "_to_rank")], role + "_jump"),
                        role)

    def ones_like(self, vector: str, role: str) -> str:
        """A 1-D vector of ones as long as ``vector`` (a shape): no Range or ConstantOfShape needed."""
        zeros = self.b.op("Mul", [vector, self.const(0, role + "_zero")], role + "_zeros")
        return self.add(zeros, self.const(1, role + "_one"), role)

    def ones(self, length: str, role: str) -> str:
        """A 1-D vector of ``length`` (a scalar) ones (opset 9)."""
        one = numpy_helper.from_array(np.array([1], np.int64))
        return self.b.op("ConstantOfShape", [self.vector(length, role + "_length")], role, value=one)

    def cut(self, vector: str, start: int, end: int, role: str) -> str:
        """``vector[start:end]`` with static bounds (negative ones count from the end), at any opset."""
        if self.b.opset < 10:
            return self.b.op("Slice", [vector], role, starts=[start], ends=[end], axes=[0])
        return self.b.slice(vector, self.const([start], role + "_start"), self.const([end], role + "_end"),
                            self.const([0], role + "_axes"), role)

    def reshape(self, x: str, shape: str, role: str) -> str:
        """Reshape to a computed shape whose 0s mean size 0 (Reshape's 0 would copy an input dimension).
        From opset 11: the first 0 becomes -1 and the others 1, and an Expand to ``shape`` turns those 1s
        back into 0s (broadcasting 1 with 0 gives 0; an Expand to its own shape is a copy). Below: every
        0 becomes -1, so a shape with two size-0 dimensions is refused by Reshape (an error)."""
        is_zero = self.b.cast(self.b.op("Equal", [shape, self.const(0, role + "_zero")], role + "_is_zero"),
                              TensorProto.INT64, role + "_is_zero_01")
        if self.b.opset < 11:
            return self.b.op("Reshape", [x, self.sub(shape, is_zero, role + "_shape")], role)
        zeros_so_far = self.b.op("CumSum", [is_zero, self.const(0, role + "_cumsum_axis")], role + "_zeros_so_far")
        first = self.b.op("Mul", [is_zero, self.b.cast(self.b.op("Equal", [zeros_so_far, self.const(1, role + "_one")],
                                                                 role + "_first"), TensorProto.INT64,
                                                       role + "_first_01")], role + "_first_zero")
        twice_first = self.add(first, first, role + "_twice_first_zero")
        loose = self.sub(self.add(shape, is_zero, role + "_zeros_as_one"), twice_first, role + "_loose_shape")
        return self.b.op("Expand", [self.b.op("Reshape", [x, loose], role + "_loose"), shape], role)


def _gather_by_reshape(builder: NodeBuilder, data: str, indices: str, axis: int) -> RuntimeAlignment:
    """``gather`` below opset 13: data.shape[:axis] + ones(q) + data.shape[axis:] for the data, ones(axis) +
    indices.shape + [1] + ones(r-axis-1) for the indices, and the output reshaped to Gather's shape."""
    m = _Arith(builder)
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
    """ONNX Gather (batch_dims 0): output = data.shape[:axis] + indices.shape + data.shape[axis+1:].

    Args:
        builder: the NodeBuilder the alignment nodes are appended to.
        data: the name of the data tensor (rank known only at run time).
        indices: the name of the indices tensor.
        axis: Gather's ``axis`` attribute (negative counts from the end).

    Returns:
        The RuntimeAlignment: the names GatherMultiaxis reads and how its output gets Gather's rank.
    """
    if builder.opset < AXES_INPUT_OPSET:
        return _gather_by_reshape(builder, data, indices, axis)
    m = _Arith(builder)
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


def _empty_coordinates_as_one(builder: NodeBuilder, m: "_Arith", indices: str, last: str, q: str) -> tuple[str, str]:
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
    m = _Arith(builder)
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


def gather_elements(builder: NodeBuilder, data: str, indices: str, axis: int) -> RuntimeAlignment:
    """GatherElements: equal ranks already; the data is cut to the indices' extents except on ``axis``.

    Args:
        builder: the NodeBuilder the alignment nodes are appended to.
        data: the name of the data tensor.
        indices: the name of the indices tensor.
        axis: GatherElements' ``axis`` attribute (negative counts from the end).

    Returns:
        The RuntimeAlignment (no squeeze, no reshape: the output has the indices' rank).
    """
    m = _Arith(builder)
    r = m.rank(indices, "rank")
    a = m.axis(axis, r, "axis")
    dims = m.range(m.const(0, "zero"), r, "dims")
    indices_shape = builder.shape(indices, "indices_shape")
    on_axis = builder.op("Equal", [dims, a], "on_axis")
    ends = builder.op("Where", [on_axis, m.const(INT64_MAX, "whole_axis"), indices_shape], "slice_ends")
    starts = builder.op("Sub", [indices_shape, indices_shape], "slice_starts")
    data = builder.slice(data, starts, ends, dims, "fit_data")
    return RuntimeAlignment(data, indices, m.vector(a, "axes"), None)


def gather_nd(builder: NodeBuilder, data: str, indices: str, batch_dims: int) -> RuntimeAlignment:
    """GatherND: output = indices.shape[:-1] + data.shape[b+k:], with k = indices.shape[-1] at run time.

    Aligned rank A = b + M + T + 1 with M = max(k, q-1-b) and T = r-b-k: batch dims, the index region,
    the trailing data dims, and the size-1 dimension that carries the folded coordinates.

    Args:
        builder: the NodeBuilder the alignment nodes are appended to.
        data: the name of the data tensor.
        indices: the name of the indices tensor (its last dimension, k, known only at run time).
        batch_dims: GatherND's ``batch_dims`` attribute.

    Returns:
        The RuntimeAlignment: the names GatherMultiaxis reads and how its output gets GatherND's rank.
    """
    if builder.opset < AXES_INPUT_OPSET:
        return _gather_nd_by_reshape(builder, data, indices, batch_dims)
    m = _Arith(builder)
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



def reshape(builder: NodeBuilder, x: str, shape: str, role: str) -> str:
    """Reshape ``x`` to a computed ``shape`` whose 0s are sizes (see _Arith.reshape).

    Args:
        builder: the NodeBuilder the nodes are appended to.
        x: the name of the tensor to reshape.
        shape: the name of the 1-D int64 target shape.
        role: what the value is, for the names of the nodes (``PREFIX/ROLE``, made unique).

    Returns:
        The name of the reshaped tensor.
    """
    return _Arith(builder).reshape(x, shape, role)
