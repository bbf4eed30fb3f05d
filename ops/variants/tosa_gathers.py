"""TOSA's gather."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .variant_steps import one_gather


def tosa_gather(values: ArrayLike, indices: ArrayLike) -> np.ndarray:
    """TOSA gather: values [N, K, C], indices [N, W] -> [N, W, C]; raises ValueError for other ranks."""
    values, indices = np.asarray(values), np.asarray(indices)
    if values.ndim != 3 or indices.ndim != 2:
        raise ValueError(f"TOSA gather takes values [N, K, C] and indices [N, W], got {list(values.shape)} "
                         f"and {list(indices.shape)}")
    return one_gather("tosa_gather", values, indices, [1], indices_shape=(*indices.shape, 1))
