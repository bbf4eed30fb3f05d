"""CoreML's gathers (coremltools MIL, iOS15-iOS17): int32/int16/uint16/int8/uint8 indices; with
``validate_indices`` negative ones are out of bounds (iOS17's check), without it they count from the end."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..alignment import gather_alignment, gather_elements_alignment, gather_nd_alignment
from ..contract import GatherIndexError, GatherShapeError
from .variant_steps import one_gather


def _coreml_indices(indices: ArrayLike, validate_indices: bool) -> np.ndarray:
    """The indices as int32 or int64 for the kernel; TypeError for dtypes CoreML refuses."""
    # negative indices count from the end as coremltools' value inference (np.take) and the iOS15/16 docs
    # say; validate_indices makes them out of bounds, as iOS17's check does
    indices = np.asarray(indices)
    if indices.dtype.kind not in "iu" or indices.dtype == np.uint32:  # coremltools refuses uint32 in every opset
        raise TypeError(f"CoreML gather indices must be int32, int16, uint16, int8 or uint8, got {indices.dtype}")
    if validate_indices and (indices < 0).any():
        raise GatherIndexError(f"validate_indices: CoreML (iOS17) treats negative indices as out of bounds, got "
                               f"{indices[indices < 0][0]}")
    if indices.dtype == np.uint64:  # a MIL constant (coremltools narrows it to int32, clamping): no index
        # at or above 2**63 is in range, and below it int64 is exact (astype(int32) wrapped 2**32 + 1 to 1)
        too_large = indices > np.iinfo(np.int64).max
        if too_large.any():
            raise GatherIndexError(f"index {indices[too_large][0]} is out of range (above int64)")
        return indices.astype(np.int64)
    return indices if indices.dtype in (np.int32, np.int64) else indices.astype(np.int32)  # 8/16-bit: exact


def coreml_gather(x: ArrayLike, indices: ArrayLike, axis: int = 0, batch_dims: int = 0,
                  validate_indices: bool = False) -> np.ndarray:
    """MIL ``gather``: tf.gather's rule with ``batch_dims`` >= 0; out-of-range indices raise (CoreML
    leaves them undefined)."""
    x = np.asarray(x)
    indices = _coreml_indices(indices, validate_indices)
    if batch_dims < 0:
        raise ValueError(f"CoreML's batch_dims is a count of leading dims, got {batch_dims}")
    return one_gather("coreml_gather", x, indices, None,
                      alignment=gather_alignment(x.ndim, indices.ndim, axis, batch_dims))


def coreml_gather_along_axis(x: ArrayLike, indices: ArrayLike, axis: int = 0,
                             validate_indices: bool = False) -> np.ndarray:
    """MIL ``gather_along_axis``: indices of x's sizes on every dim but ``axis`` (CoreML's type inference
    refuses smaller or broadcast ones)."""
    x = np.asarray(x)
    indices = _coreml_indices(indices, validate_indices)
    alignment = gather_elements_alignment(x.ndim, indices.ndim, axis)
    (read,) = alignment.axes
    if any(i != n for d, (i, n) in enumerate(zip(indices.shape, x.shape)) if d != read):
        raise GatherShapeError(f"CoreML gather_along_axis needs indices of x's sizes on every dim but axis {axis}: "
                               f"x {list(x.shape)}, indices {list(indices.shape)}")
    return one_gather("coreml_gather_along_axis", x, indices, None, alignment=alignment)


def coreml_gather_nd(x: ArrayLike, indices: ArrayLike, batch_dims: int = 0,
                     validate_indices: bool = False) -> np.ndarray:
    """MIL ``gather_nd`` (batch_dims since iOS16): output shape ``K[:-1] + D[batch_dims + K[-1]:]``."""
    x = np.asarray(x)
    indices = _coreml_indices(indices, validate_indices)
    if indices.ndim == 0:
        raise GatherShapeError("CoreML gather_nd needs indices of rank >= 1 (the last dim holds the coordinates)")
    return one_gather("coreml_gather_nd", x, indices, None,
                      alignment=gather_nd_alignment(x.ndim, indices.ndim, indices.shape[-1], batch_dims))
