"""PyTorch's gather, take, take_along_dim and index_select, on NumPy arrays."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..alignment import gather_alignment, gather_elements_alignment
from .variant_steps import one_gather


def torch_gather(input: ArrayLike, dim: int, index: ArrayLike) -> np.ndarray:
    """``torch.gather``: ``index`` may be smaller than ``input`` on the other dimensions."""
    input, index = np.asarray(input), np.asarray(index)
    return one_gather("torch_gather", input, index, None, crop=True,
                      alignment=gather_elements_alignment(input.ndim, index.ndim, dim))


def torch_take(input: ArrayLike, index: ArrayLike) -> np.ndarray:
    """``torch.take``: ``input`` seen as 1-D."""
    input, index = np.asarray(input), np.asarray(index)
    return one_gather("torch_take", input, index, None, data_shape=(-1,), alignment=gather_alignment(1, index.ndim, 0))


def torch_take_along_dim(input: ArrayLike, indices: ArrayLike, dim: int | None = None) -> np.ndarray:
    """``torch.take_along_dim``; ``dim=None``: ``input`` and ``indices`` flattened."""
    input, indices = np.asarray(input), np.asarray(indices)
    if dim is None:
        return one_gather("torch_take_along_dim (dim=None)", input, indices, [0], data_shape=(-1,),
                          indices_shape=(-1,))
    return one_gather("torch_take_along_dim", input, indices, None,
                      alignment=gather_elements_alignment(input.ndim, indices.ndim, dim))


def torch_index_select(input: ArrayLike, dim: int, index: ArrayLike) -> np.ndarray:
    """``torch.index_select`` with 1-D (or scalar) ``index``."""
    input, index = np.asarray(input), np.asarray(index)
    return one_gather("torch_index_select", input, index, None, indices_shape=(-1,),
                      alignment=gather_alignment(input.ndim, 1, dim))
