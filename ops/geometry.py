"""Shape rules of gatherMultiaxis, kept apart from the computation.

The contract, for ``output = gather_multiaxis(input, indices, axes)``:

* ``input.ndim == indices.ndim == output.ndim == rank`` (rank 0 allowed, then ``axes`` is empty).
* ``axes`` are unique ints in ``[-rank, rank - 1]``; negative ones count from the end.
* With ``k = len(axes) > 1`` the coordinates are folded into the last indices dimension, in the
  order of ``axes``; that dimension must be a multiple of ``k``. The *logical* indices shape is the
  actual one with its last dimension divided by ``k`` (for ``k <= 1`` the two are the same).
* ``output.shape[d]`` is ``logical[d]`` for ``d`` in ``axes``; for every other ``d`` it is the
  bidirectional broadcast of ``input.shape[d]`` and ``logical[d]`` (equal sizes, or one of them 1).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from math import prod
from typing import Sequence


class GatherShapeError(ValueError):
    """The shapes or axes given to gather_multiaxis do not satisfy its shape contract."""


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def normalize_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """Axes as non-negative ints; raises GatherShapeError for non-ints, out-of-range or repeated axes."""
    if all(type(axis) is int and 0 <= axis < rank for axis in axes) and len(set(axes)) == len(axes):
        return tuple(axes)  # the common case, cheaply
    normalized = []
    for axis in axes:
        try:
            value = operator.index(axis)
        except TypeError:
            raise GatherShapeError(f"axes must be integers, got {axis!r}") from None
        if not -rank <= value < rank:
            raise GatherShapeError(
                f"axis {value} is out of range for rank {rank} (valid range [{-rank}, {rank - 1}])")
        value %= rank
        if value in normalized:
            raise GatherShapeError(f"axes {list(axes)} name dimension {value} more than once")
        normalized.append(value)
    return tuple(normalized)


@dataclass(frozen=True)
class GatherGeometry:
    """Dimension bookkeeping of one gatherMultiaxis call (all shapes are tuples of ints)."""

    input_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    axes: tuple[int, ...]
    logical_indices_shape: tuple[int, ...]
    output_shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.input_shape)

    @property
    def output_size(self) -> int:
        return prod(self.output_shape)

    @classmethod
    def infer(cls, input_shape: Sequence[int], indices_shape: Sequence[int],
              axes: Sequence[int]) -> "GatherGeometry":
        """Validate the shapes and axes and derive the logical indices shape and the output shape."""
        input_shape = tuple(int(d) for d in input_shape)
        indices_shape = tuple(int(d) for d in indices_shape)
        rank = len(input_shape)
        if len(indices_shape) != rank:
            raise GatherShapeError(
                f"input rank {rank} and indices rank {len(indices_shape)} differ; gather_multiaxis needs "
                f"equal ranks (input shape {_shape_text(input_shape)}, indices shape {_shape_text(indices_shape)})")
        axes = normalize_axes(axes, rank)
        logical = list(indices_shape)
        if len(axes) > 1:
            if logical[-1] % len(axes):
                raise GatherShapeError(
                    f"the last indices dimension ({logical[-1]}) must be a multiple of len(axes)={len(axes)}, "
                    f"since each coordinate tuple is folded into it (indices shape {_shape_text(indices_shape)})")
            logical[-1] //= len(axes)
        output = []
        for d, (size_in, size_idx) in enumerate(zip(input_shape, logical)):
            if d in axes:
                output.append(size_idx)
            elif size_in == size_idx or size_idx == 1:
                output.append(size_in)
            elif size_in == 1:
                output.append(size_idx)
            else:
                raise GatherShapeError(
                    f"dimension {d} is not broadcastable: input size {size_in} vs logical indices size {size_idx} "
                    f"(need equal sizes or one of them 1; input shape {_shape_text(input_shape)}, "
                    f"logical indices shape {_shape_text(logical)}, axes {list(axes)})")
        return cls(input_shape, indices_shape, axes, tuple(logical), tuple(output))

    def check_addressable(self) -> None:
        """Raise when an axis of size 0 is to be indexed by a non-empty set of coordinates."""
        coordinates = prod(self.logical_indices_shape)
        for axis in self.axes:
            if self.input_shape[axis] == 0 and coordinates > 0:
                raise GatherShapeError(
                    f"axis {axis} of the input has size 0, so no index can address it, but the indices hold "
                    f"{coordinates} coordinates (input shape {_shape_text(self.input_shape)})")
