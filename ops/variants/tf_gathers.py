"""TensorFlow's gather and gather_nd."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..alignment import gather_alignment, gather_nd_alignment
from .variant_steps import one_gather


def tf_gather(params: ArrayLike, indices: ArrayLike, axis: int | None = None, batch_dims: int = 0) -> np.ndarray:
    """``tf.gather``: ``axis=None`` is ``batch_dims``; negative ``batch_dims`` count from the indices' rank."""
    params, indices = np.asarray(params), np.asarray(indices)
    if batch_dims < 0:
        batch_dims += indices.ndim
    axis = batch_dims if axis is None else axis
    return one_gather("tf_gather", params, indices, None,
                      alignment=gather_alignment(params.ndim, indices.ndim, axis, batch_dims))


def tf_gather_nd(params: ArrayLike, indices: ArrayLike, batch_dims: int = 0) -> np.ndarray:
    """``tf.gather_nd``: the last dimension of ``indices`` holds coordinates after ``batch_dims``."""
    params, indices = np.asarray(params), np.asarray(indices)
    return one_gather("tf_gather_nd", params, indices, None,
                      alignment=gather_nd_alignment(params.ndim, indices.ndim, indices.shape[-1], batch_dims))
