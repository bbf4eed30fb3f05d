"""ONNX's Gather, GatherElements and GatherND (opset 13)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..alignment import gather_alignment, gather_elements_alignment, gather_nd_alignment
from .variant_steps import one_gather


def onnx_gather(data: ArrayLike, indices: ArrayLike, axis: int = 0) -> np.ndarray:
    """ONNX ``Gather``: negative indices count from the end; out-of-range ones raise."""
    data, indices = np.asarray(data), np.asarray(indices)
    return one_gather("onnx_gather", data, indices, None, alignment=gather_alignment(data.ndim, indices.ndim, axis))


def onnx_gather_elements(data: ArrayLike, indices: ArrayLike, axis: int = 0) -> np.ndarray:
    """ONNX ``GatherElements``: ``indices`` may be smaller than ``data`` on the other axes (as in ORT)."""
    data, indices = np.asarray(data), np.asarray(indices)
    return one_gather("onnx_gather_elements", data, indices, None, crop=True,
                      alignment=gather_elements_alignment(data.ndim, indices.ndim, axis))


def onnx_gather_nd(data: ArrayLike, indices: ArrayLike, batch_dims: int = 0) -> np.ndarray:
    """ONNX ``GatherND``: the last dimension of ``indices`` holds coordinates after ``batch_dims``."""
    data, indices = np.asarray(data), np.asarray(indices)
    alignment = gather_nd_alignment(data.ndim, indices.ndim, indices.shape[-1] if indices.ndim else 0, batch_dims)
    return one_gather("onnx_gather_nd", data, indices, None, alignment=alignment)
