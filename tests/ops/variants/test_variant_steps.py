"""The one gather of every variant: its trace, and the crop of torch-style data."""

import numpy as np

from gathermultiaxis.ops import Mode
from gathermultiaxis.ops.alignment import gather_alignment
from gathermultiaxis.ops.variants.variant_steps import Step, crop_to_indices, one_gather, trace


def test_one_gather_records_the_shapes_in_every_open_trace():
    data, indices = np.arange(24).reshape(2, 3, 4), np.array([[2, 0]])
    with trace() as outer:
        with trace() as inner:
            result = one_gather("test", data, indices, None, Mode.ZERO, alignment=gather_alignment(3, 2, 1))
        one_gather("after", data.reshape(-1), np.array([23, 24]), [0], Mode.ZERO)
    np.testing.assert_array_equal(result, data[:, [[2, 0]], :])
    assert inner == [Step("test", ((2, 3, 4), (2, 1, 3, 4)), ((1, 2), (1, 1, 2, 1)), (2,), "zero",
                          ((2, 1, 2, 4), (2, 1, 2, 4)))]
    assert [step.variant for step in outer] == ["test", "after"]
    assert type(outer[0].mode) is str


def test_a_closed_trace_records_nothing():
    with trace() as steps:
        pass
    np.testing.assert_array_equal(one_gather("plain", np.arange(3), np.array([2, -1]), [0]), [2, 2])
    assert steps == []


def test_crop_to_indices_keeps_the_gathered_axis_whole():
    data = np.arange(24).reshape(2, 3, 4)
    cropped = crop_to_indices(data, np.zeros((1, 5, 2), np.int64), 1)
    assert cropped.shape == (1, 3, 2) and np.shares_memory(cropped, data)
