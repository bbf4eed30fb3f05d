"""Run-time rank alignment, the fourth layer: the alignments of ``ops.alignment`` written as shape arithmetic
the model computes itself (ranks are ``Size(Shape(x))``, inserted dimensions ``Range``s fed to ``Unsqueeze``,
GatherMultiaxis reads its axes from a tensor), for gathers whose ranks no inference finds. Each source record's
``align_at_run_time`` builds on the shared pieces here."""

# Every rank case is one graph (no If), and the squeezed axes are never empty (an empty Squeeze axes input
# would squeeze every size-1 dimension). From opset 13 on, Unsqueeze and Squeeze take the computed axes as an
# input. Below 13 they take axes only as an attribute, so the same alignments are Reshapes to computed shapes:
# the shape vectors are cut at the node's (static) axis attribute and joined with vectors of ones
# (``Shape * 0 + 1``), which needs only opset 7's ops (Slice with attributes below opset 10, no Range, int64
# comparisons only through Equal). Reshape's 0 copies an input dimension, so a size 0 in a computed shape is
# written as -1 (the first) and 1 (the others), then an Expand to the shape restores the 0s (opset 11 on;
# below it, Gather on a tensor with two or more size-0 dimensions is refused by the Reshape: an error, never
# a wrong result). GatherND (opset 11 on) may use opset 11's Range, Where and Slice inputs there.

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, numpy_helper

from ..ir.builder import NodeBuilder

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


class ShapeArithmetic:
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


def reshape(builder: NodeBuilder, x: str, shape: str, role: str) -> str:
    """Reshape ``x`` to a computed ``shape`` whose 0s are sizes (see ShapeArithmetic.reshape)."""
    return ShapeArithmetic(builder).reshape(x, shape, role)
