"""The WebNN proposal's own multiaxis case."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .variant_steps import one_gather


def gather_xy_nchw(images: ArrayLike, points: ArrayLike) -> np.ndarray:
    """(x, y) points [P, 2] read from every channel of NCHW images: output [N, C, P]."""
    images, points = np.asarray(images), np.asarray(points)
    # axes [3, 2]: each pair's x indexes W and its y indexes H (non-contiguous, swapped coordinates)
    return one_gather("gather_xy_nchw", images, points, [3, 2], indices_shape=(1, 1, points.shape[0], 2),
                      output_shape=(*images.shape[:2], points.shape[0]))
