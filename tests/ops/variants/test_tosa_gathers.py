"""TOSA gather: its definition, and the ranks it takes."""

import numpy as np
import pytest
from support import assert_bit_identical

from gathermultiaxis.ops.variants import tosa_gathers as v


def test_tosa_gather_definition():
    rng = np.random.default_rng(1)
    values, indices = rng.random((2, 5, 3)), rng.integers(0, 5, (2, 4))
    expected = np.array([[values[n, indices[n, w], :] for w in range(4)] for n in range(2)])
    assert_bit_identical(v.tosa_gather(values, indices), expected)


def test_other_ranks_are_refused():
    with pytest.raises(ValueError, match=r"values \[N, K, C\]"):
        v.tosa_gather(np.zeros((2, 5)), np.zeros((2, 4), np.int64))
