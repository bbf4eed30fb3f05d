"""The executable specification of GatherMultiaxis, and the operator for ``onnx.reference``.

``reference_gather_multiaxis``, one output element at a time, is the slow, simple oracle the kernel and the
lowering are tested against; ``ReferenceEvaluator(model, new_ops=[GatherMultiaxis])`` needs no ONNX Runtime."""

from __future__ import annotations

from typing import Sequence, assert_never

import numpy as np
from onnx.reference.op_run import OpRun

from .geometry import GatherGeometry
from .contract import INDEX_DTYPES, GatherIndexError, Mode, OutOfRange
from .kernel import zero_element


def reference_gather_multiaxis(data, indices, axes: Sequence[int], mode: Mode | str = Mode.ERROR) -> np.ndarray:
    """``output[o] = data[c]``: ``c[d] = o[d]`` (0 where ``data.shape[d] == 1``) off ``axes``, ``c[axes[j]]`` the
    ``j``-th component of the coordinate tuple at ``o``. Contract, modes and errors as ``ops.contract`` states.

    Args:
        data: the input, any dtype.
        indices: int32 or int64, the rank of ``data``; with several axes the last dimension holds the tuples.
        axes: the gathered dimensions of ``data``.
        mode: one of ``MODES``.

    Returns:
        The output, of ``data``'s dtype and rank (``output_dims``).

    Raises:
        GatherShapeError: shapes or axes that break the contract.
        GatherIndexError: an out-of-range index in mode "error" or "error_nonempty".
        TypeError: indices that are not int32 or int64."""
    mode = Mode.from_any(mode)  # raises, naming the modes
    data, indices = np.asarray(data), np.asarray(indices)
    if indices.dtype not in INDEX_DTYPES:
        raise TypeError(f"indices must be int32 or int64, got {indices.dtype}")
    geometry = GatherGeometry.infer(data.shape, indices.shape, axes)
    axes, k = geometry.axes, len(geometry.axes)
    logical, out_shape = geometry.logical_indices_shape, geometry.output_shape
    if mode.checks_indices and not mode.checks_when_empty and geometry.output_size == 0:
        return np.empty(out_shape, dtype=data.dtype)  # nothing is read, so nothing is checked
    if k:
        geometry.check_addressable()
    if mode.checks_indices:  # every index value must be in range, used or not
        for position in np.ndindex(*indices.shape):
            axis = axes[position[-1] % k if k > 1 else 0] if k else None
            value = int(indices[position])
            if axis is not None and not -data.shape[axis] <= value < data.shape[axis]:
                dim = data.shape[axis]
                raise GatherIndexError(f"index {value} at indices{list(position)} is out of range for axis {axis} "
                                       f"of size {dim} (valid range [{-dim}, {dim - 1}])")
    output = np.empty(out_shape, dtype=data.dtype)
    zero = zero_element(data.dtype)
    for o in np.ndindex(*out_shape):
        in_coord = [o[d] if data.shape[d] != 1 else 0 for d in range(geometry.rank)]
        idx_coord = [o[d] if logical[d] != 1 else 0 for d in range(geometry.rank)]
        is_zero = False
        for j, axis in enumerate(axes):
            position = tuple(idx_coord[:-1] + [idx_coord[-1] * k + j] if k > 1 else idx_coord)
            value = int(indices[position])
            dim = data.shape[axis]
            if value < 0:
                value += dim
            if not 0 <= value < dim:
                match mode.out_of_range:
                    case OutOfRange.CLAMP:
                        value = min(max(value, 0), dim - 1)
                    case OutOfRange.ZERO:
                        is_zero, value = True, 0
                    case OutOfRange.RAISE:  # every value was checked above
                        raise AssertionError("an index out of range left unchecked")
                    case _:
                        assert_never(mode.out_of_range)
            in_coord[axis] = value
        output[o] = zero if is_zero else data[tuple(in_coord)]
    return output


class GatherMultiaxis(OpRun):
    """GatherMultiaxis(input, indices, axes, mode) for ``onnx.reference.ReferenceEvaluator``."""

    op_domain = "ai.onnx.contrib"

    def _run(self, data, indices, axes, mode=None):  # noqa: D401 - OpRun's signature
        mode = Mode.ERROR if mode is None else mode
        if isinstance(mode, bytes):
            mode = mode.decode()
        axes = np.asarray(axes)
        if axes.ndim != 1 or axes.dtype.kind not in "iu":
            raise TypeError(f"GatherMultiaxis: axes must be a 1-D integer tensor, got {axes.dtype}{list(axes.shape)}")
        return (reference_gather_multiaxis(data, indices, [int(a) for a in axes], mode),)


__all__ = ["GatherMultiaxis", "reference_gather_multiaxis"]
