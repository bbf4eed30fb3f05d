"""ops.geometry: GatherGeometry's shapes agree with what the reference gather returns."""

import math

import numpy as np
import pytest

from gathermultiaxis.ops.contract import GatherShapeError
from gathermultiaxis.ops.geometry import GatherGeometry
from gathermultiaxis.ops.reference import reference_gather_multiaxis


@pytest.mark.parametrize("input_shape,indices_shape,axes", [
    ((4, 5), (4, 3), (1,)), ((4, 5, 6), (1, 5, 2), (0, 2)), ((3, 1), (1, 7), (-2,)), ((2, 3, 4), (2, 1, 3), (0, 1, 2))])
def test_infer_matches_the_reference_output(input_shape, indices_shape, axes):
    rng = np.random.default_rng(0)
    data = rng.standard_normal(input_shape)
    indices = np.zeros(indices_shape, np.int64)
    geometry = GatherGeometry.infer(input_shape, indices_shape, axes)
    out = reference_gather_multiaxis(data, indices, axes)
    assert geometry.output_shape == out.shape
    assert geometry.rank == len(input_shape) == out.ndim
    assert geometry.output_size == out.size == math.prod(out.shape)
    assert geometry.axes == tuple(a % len(input_shape) for a in axes)
    assert geometry.logical_indices_shape[:-1] == tuple(indices_shape[:-1])
    assert all(isinstance(d, int) for d in geometry.input_shape + geometry.indices_shape)


def test_infer_rejects_rank_mismatch_and_bad_axes():
    with pytest.raises(GatherShapeError):
        GatherGeometry.infer((4, 5), (4,), (0,))
    with pytest.raises(GatherShapeError):
        GatherGeometry.infer((4, 5), (4, 1), (2,))


def test_check_addressable_only_for_empty_axes_with_coordinates():
    GatherGeometry.infer((0, 3), (0, 3), (0,)).check_addressable()  # no coordinates: fine
    GatherGeometry.infer((2, 3), (1, 3), (0,)).check_addressable()
    with pytest.raises(GatherShapeError, match="size 0"):
        GatherGeometry.infer((0, 3), (2, 3), (0,)).check_addressable()
