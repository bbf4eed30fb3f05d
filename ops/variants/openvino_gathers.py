"""OpenVINO's Gather-1/7/8 and GatherND-5/8."""

from __future__ import annotations

from math import prod

import numpy as np
from numpy.typing import ArrayLike

from ..alignment import GATHER_ND, gather_alignment, gather_nd_alignment
from ..contract import Mode
from .variant_steps import one_gather

# Gather-1/7 specs allow indices in [0, dim - 1] only (the CPU plugin returns 0 for others); Gather-8 gives 0
GATHER_MODES = {1: Mode.ERROR, 7: Mode.ERROR, 8: Mode.ZERO}


def openvino_gather(data: ArrayLike, indices: ArrayLike, axis: int, batch_dims: int = 0,
                    version: int = 8) -> np.ndarray:
    """Gather-``version``: 1 (no batch_dims), 7 (negative batch_dims count from the indices' rank) or 8
    (also negative indices; out-of-range ones give 0)."""
    if version not in GATHER_MODES:
        raise ValueError(f"OpenVINO Gather has versions 1, 7 and 8, not {version}")
    data, indices = np.asarray(data), np.asarray(indices)
    if version == 1 and batch_dims:
        raise ValueError("Gather-1 has no batch_dims")
    if batch_dims < 0:
        batch_dims += indices.ndim
    alignment = gather_alignment(data.ndim, indices.ndim, axis, batch_dims)
    return one_gather(f"openvino_gather (Gather-{version})", data, indices, None, GATHER_MODES[version],
                      alignment=alignment)


def openvino_gather_nd(data: ArrayLike, indices: ArrayLike, batch_dims: int = 0, version: int = 8) -> np.ndarray:
    """GatherND-8 keeps the batch dimensions, GatherND-5 flattens them into one. Negative indices count
    from the end (as the CPU plugin does); out-of-range ones raise (the CPU plugin reads outside the data)."""
    if version not in (5, 8):
        raise ValueError(f"OpenVINO {GATHER_ND} has versions 5 and 8, not {version}")
    data, indices = np.asarray(data), np.asarray(indices)
    alignment = gather_nd_alignment(data.ndim, indices.ndim, indices.shape[-1], batch_dims)
    output_shape = None
    if version == 5 and batch_dims:
        output_shape = (prod(indices.shape[:batch_dims]), *indices.shape[batch_dims:-1],
                        *data.shape[batch_dims + indices.shape[-1]:])
    return one_gather(f"openvino_gather_nd ({GATHER_ND}-{version})", data, indices, None, alignment=alignment,
                      output_shape=output_shape)
