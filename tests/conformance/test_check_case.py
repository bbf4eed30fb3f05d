"""One case's verdict: rewrite vs builtin, the lowered and WebNN forms, and the split helpers' verdicts."""

import numpy as np
from onnx import TensorProto, helper
from support import make_model

from gathermultiaxis.conformance.cases import CheckCase, DataSet
from gathermultiaxis.conformance.check_case import check_case
from gathermultiaxis.conformance.check_results import CheckMode

T = TensorProto


def oob_gather_model():
    node = helper.make_node("Gather", ["data", "indices"], ["out"], axis=0)
    return make_model([node], [helper.make_tensor_value_info("data", T.FLOAT, [3]),
                               helper.make_tensor_value_info("indices", T.INT64, [2])],
                      [helper.make_tensor_value_info("out", T.FLOAT, None)])


def test_builtin_errors_must_be_errors_of_the_rewrite_too():
    model = oob_gather_model()
    feeds = {"data": np.zeros(3, np.float32), "indices": np.array([0, 3])}
    made_to_raise = check_case(CheckCase("oob", model, [DataSet(feeds, raising_compares=True)]))
    assert made_to_raise.verdict == "passed" and made_to_raise.both_raised == made_to_raise.compared == 1
    assert "out of data bounds" in made_to_raise.detail and "index 3 at indices[1]" in made_to_raise.detail
    # the same inputs given as ordinary test data compare nothing: never a pass
    given = check_case(CheckCase("oob", model, [DataSet(feeds)]))
    assert given.verdict == "not compared" and given.compared == 0 and "both raise" in given.detail


def test_every_mode_compares_the_same_in_spec_data_set():
    feeds = {"data": np.arange(3, dtype=np.float32), "indices": np.array([2, 0])}
    for mode in (CheckMode.DEFAULT, CheckMode.ORT_OPTIMIZED, CheckMode.LOWERED, CheckMode.WEBNN, CheckMode.SESSION):
        result = check_case(CheckCase("in spec", oob_gather_model(), [DataSet(feeds, [np.array([2, 0], np.float32)])]),
                            mode=mode)
        assert (result.verdict, result.compared, result.expected) == ("passed", 1, "exact"), (mode, result)


def test_a_model_with_no_gather_says_why():
    node = helper.make_node("Relu", ["x"], ["y"])
    model = make_model([node], [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    result = check_case(CheckCase("relu", model))
    assert result.verdict == "no gather" and result.detail == "nothing to compare: the model holds no gather"
