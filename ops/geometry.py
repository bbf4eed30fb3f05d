"""The dimension bookkeeping of one gather_multiaxis call, kept apart from the computation (the shape rule is
``ops.contract.output_dims``)."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Sequence

from .contract import GatherShapeError, logical_indices_dims, normalize_axes, output_dims, shape_text


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
        """The rank shared by the input, the indices and the output."""
        return len(self.input_shape)

    @property
    def output_size(self) -> int:
        """The number of output elements."""
        return prod(self.output_shape)

    @classmethod
    def infer(cls, input_shape: Sequence[int], indices_shape: Sequence[int],
              axes: Sequence[int]) -> "GatherGeometry":
        """Validate the shapes and axes and derive the logical indices and output shapes.

        Args:
            input_shape: the input's shape.
            indices_shape: the indices' shape (coordinate tuples unfolded in the last dimension).
            axes: the gathered input dimensions, in tuple order; negatives count from the end.

        Returns:
            The call's geometry, axes normalised.

        Raises:
            GatherShapeError: the shapes or axes break the contract's shape rule."""
        input_shape = tuple(int(d) for d in input_shape)
        indices_shape = tuple(int(d) for d in indices_shape)
        output = output_dims(input_shape, indices_shape, axes)  # raises GatherShapeError
        axes = normalize_axes(axes, len(input_shape))
        logical = logical_indices_dims(indices_shape, len(axes))
        return cls(input_shape, indices_shape, axes, tuple(logical), tuple(output))

    def check_addressable(self) -> None:
        """Raise when an axis of size 0 is to be indexed by a non-empty set of coordinates.

        Raises:
            GatherShapeError: an axis has size 0 and the logical indices hold coordinates."""
        coordinates = prod(self.logical_indices_shape)
        for axis in self.axes:
            if self.input_shape[axis] == 0 and coordinates > 0:
                raise GatherShapeError(
                    f"axis {axis} of the input has size 0, so no index can address it, but the indices hold "
                    f"{coordinates} coordinates (input shape {shape_text(self.input_shape)})")
