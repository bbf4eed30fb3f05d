"""The proposal's (x, y) points on NCHW images."""

import numpy as np
from support import assert_bit_identical

from gathermultiaxis.ops.variants import proposal_gathers as v


def test_xy_points_on_nchw():
    rng = np.random.default_rng(2)
    images, points = rng.random((2, 3, 6, 7)), np.array([[6, 0], [0, 5], [3, 2]])
    assert_bit_identical(v.gather_xy_nchw(images, points), images[:, :, points[:, 1], points[:, 0]])
