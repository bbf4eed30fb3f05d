"""NumPy's take and take_along_axis."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..alignment import gather_alignment, gather_elements_alignment
from .variant_steps import one_gather


def numpy_take(a: ArrayLike, indices: ArrayLike, axis: int | None = None) -> np.ndarray:
    """``numpy.take`` with its default ``mode="raise"``; ``axis=None`` takes from ``a`` flattened."""
    a, indices = np.asarray(a), np.asarray(indices)
    if axis is None:
        return one_gather("numpy_take (axis=None)", a, indices, None, data_shape=(-1,),
                          alignment=gather_alignment(1, indices.ndim, 0))
    return one_gather("numpy_take", a, indices, None, alignment=gather_alignment(a.ndim, indices.ndim, axis))


def numpy_take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None) -> np.ndarray:
    """``numpy.take_along_axis``: ``indices`` broadcast against ``arr``; ``axis=None``: both flattened."""
    arr, indices = np.asarray(arr), np.asarray(indices)
    if axis is None:
        return one_gather("numpy_take_along_axis (axis=None)", arr, indices, [0], data_shape=(-1,))
    return one_gather("numpy_take_along_axis", arr, indices, None,
                      alignment=gather_elements_alignment(arr.ndim, indices.ndim, axis))
