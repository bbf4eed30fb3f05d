"""conformance.roundtrip: check_lowered passes a model whose lowered form equals it, on given feeds or
generated ones."""

import numpy as np
import pytest
from onnx import TensorProto

from gathermultiaxis.conformance.check_results import CheckMode
from gathermultiaxis.conformance.roundtrip import check_lowered
from gathermultiaxis.harness import single_gather_model

pytest.importorskip("onnxruntime", reason="check_lowered runs both models in onnxruntime")


def model():
    return single_gather_model("GatherElements", TensorProto.FLOAT, TensorProto.INT64, [3, 4], [3, 2], axis=1)


def test_lowered_round_trip_passes_on_given_feeds():
    feeds = {"data": np.arange(12, dtype=np.float32).reshape(3, 4), "indices": np.array([[0, 3], [1, -1], [2, 2]])}
    result = check_lowered(model(), feeds, name="elements")
    assert result.name == "elements"
    assert result.verdict == "passed", result.detail
    assert result.rewritten == 1 and result.compared == 1


def test_several_feeds_and_generated_inputs():
    feeds = [{"data": np.ones((3, 4), np.float32), "indices": np.zeros((3, 2), np.int64)},
             {"data": np.zeros((3, 4), np.float32), "indices": np.full((3, 2), 3, np.int64)}]
    assert check_lowered(model(), feeds).compared == 2
    generated = check_lowered(model(), seed=4)
    assert generated.verdict == "passed", generated.detail
    assert CheckMode.LOWERED.value == "lowered"


def test_out_of_range_feeds_raise_on_both_sides():
    feeds = {"data": np.ones((3, 4), np.float32), "indices": np.full((3, 2), 9, np.int64)}
    result = check_lowered(model(), feeds)
    assert result.verdict == "passed" and result.both_raised == 1
