"""CoreML's index types, without coremltools (tests/peers/test_variants_coreml.py checks coremltools)."""

import numpy as np
import pytest

from gathermultiaxis.ops import GatherIndexError, GatherShapeError
from gathermultiaxis.ops.variants import coreml_gathers as v

@pytest.mark.parametrize("index", [np.uint32(2**32 - 1), np.uint32(2**32 - 3), np.uint64(2**32 + 1),
                                   np.uint64(2**64 - 1)])
def test_coreml_variants_never_wrap_wide_unsigned_indices(index):
    """The NumPy facts: narrowing to int32 wraps these to a valid row (-1 is the last, 2**32 + 1 is 1),
    while none is in range for an axis of 3. The CoreML variants used to narrow them so, even with
    validate_indices; now uint32 is refused (coremltools refuses it) and uint64 is range-checked."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert -3 <= int(np.array([index]).astype(np.int32)[0]) < 3  # the wrap the variants used to hit
    calls = {"coreml_gather": lambda i, check: v.coreml_gather(x, i, 1, validate_indices=check),
             "coreml_gather_along_axis": lambda i, check: v.coreml_gather_along_axis(
                 x, np.broadcast_to(i.reshape(1, 1, 1), (2, 3, 1)), 2, validate_indices=check),
             "coreml_gather_nd": lambda i, check: v.coreml_gather_nd(x, i.reshape(1, 1), validate_indices=check)}
    expected = (TypeError, "uint32") if index.dtype == np.uint32 else (GatherIndexError, "out of range")
    for name, call in calls.items():
        for check in (False, True):
            with pytest.raises(expected[0], match=expected[1]):
                call(np.array([index]), check)


def test_narrow_indices_count_from_the_end_unless_validated():
    x = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(v.coreml_gather(x, np.array([-1], np.int8), axis=1), [[2], [5]])
    with pytest.raises(GatherIndexError, match="validate_indices"):
        v.coreml_gather(x, np.array([-1], np.int8), axis=1, validate_indices=True)


def test_shapes_coreml_refuses():
    x = np.arange(6).reshape(2, 3)
    with pytest.raises(ValueError, match="batch_dims"):
        v.coreml_gather(x, np.array([[0]], np.int32), axis=1, batch_dims=-1)
    with pytest.raises(GatherShapeError, match="sizes on every dim"):
        v.coreml_gather_along_axis(x, np.zeros((1, 3), np.int32), axis=1)
    with pytest.raises(GatherShapeError, match="rank >= 1"):
        v.coreml_gather_nd(x, np.array(0, np.int32))
