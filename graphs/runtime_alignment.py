"""Run-time rank alignment: the fourth layer, for gathers whose ranks (or GatherND's coordinate size) no
inference finds.

The same alignments as ``gathermultiaxis.ops.alignment``, written as shape arithmetic the model computes
itself: ranks are ``Size(Shape(x))``, the inserted dimensions are ``Range``s fed to ``Unsqueeze``, and
GatherMultiaxis reads its axes from a tensor. Two choices keep every rank case one graph (no If):

* Gather's indices get a trailing size-1 dimension first, so even scalar indices take the general path;
  that dimension is squeezed from the output at ``axis + q``.
* GatherND's data and indices get one trailing size-1 dimension that holds the folded coordinates, so
  a padding dimension always exists; it is squeezed from the output with the index region's padding.

The squeezed axes are therefore never empty (an empty Squeeze axes input would squeeze every size-1
dimension). Needs opset 13 (Unsqueeze and Squeeze with axes as an input).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .builder import NodeBuilder

MIN_OPSET = 13
_INT64_MAX = int(np.iinfo(np.int64).max)


@dataclass(frozen=True)
class RuntimeAlignment:
    """Names of the aligned data and indices, the 1-D axes tensor, and the 1-D axes to squeeze (or None)."""

    data: str
    indices: str
    axes: str
    output_squeeze: str | None


class _Arith:
    """int64 scalar arithmetic on graph tensors, named after the replaced node."""

    def __init__(self, builder: NodeBuilder):
        self.b = builder

    def const(self, value, role: str) -> str:
        return self.b.constant(value, role)

    def rank(self, x: str, role: str) -> str:
        return self.b.op("Size", [self.b.shape(x, role + "_shape")], role)

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
        below = self.b.op("Less", [shifted, self.const(0, role + "_zero")], role + "_below")
        return self.b.op("Where", [below, rank, shifted], role)


def gather(builder: NodeBuilder, data: str, indices: str, axis: int) -> RuntimeAlignment:
    """ONNX Gather (batch_dims 0): output = data.shape[:axis] + indices.shape + data.shape[axis+1:]."""
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


def gather_elements(builder: NodeBuilder, data: str, indices: str, axis: int) -> RuntimeAlignment:
    """GatherElements: equal ranks already; the data is cut to the indices' extents except on ``axis``."""
    m = _Arith(builder)
    r = m.rank(indices, "rank")
    a = m.axis(axis, r, "axis")
    dims = m.range(m.const(0, "zero"), r, "dims")
    indices_shape = builder.shape(indices, "indices_shape")
    on_axis = builder.op("Equal", [dims, a], "on_axis")
    ends = builder.op("Where", [on_axis, m.const(_INT64_MAX, "whole_axis"), indices_shape], "slice_ends")
    starts = builder.op("Sub", [indices_shape, indices_shape], "slice_starts")
    data = builder.slice(data, starts, ends, dims, "fit_data")
    return RuntimeAlignment(data, indices, m.vector(a, "axes"), None)


def gather_nd(builder: NodeBuilder, data: str, indices: str, batch_dims: int) -> RuntimeAlignment:
    """GatherND: output = indices.shape[:-1] + data.shape[b+k:], with k = indices.shape[-1] at run time.

    Aligned rank A = b + M + T + 1 with M = max(k, q-1-b) and T = r-b-k: batch dims, the index region,
    the trailing data dims, and the size-1 dimension that carries the folded coordinates.
    """
    m = _Arith(builder)
    r, q = m.rank(data, "data_rank"), m.rank(indices, "indices_rank")
    b = m.const(batch_dims, "batch_dims")
    last = builder.slice(builder.shape(indices, "indices_shape"), m.const([-1], "last_start"),
                         m.const([_INT64_MAX], "last_end"), m.const([0], "last_axes"), "coordinate_size_1d")
    k = builder.squeeze(last, [0], "coordinate_size")
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

