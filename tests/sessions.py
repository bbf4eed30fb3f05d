"""Running a model on plain ORT and its rewrite with the custom op, and comparing them bit for bit."""

import onnxruntime as ort
from support import assert_bit_identical

from gathermultiaxis import session_options
from gathermultiaxis.graphs import rewrite_model


def _options():
    options = ort.SessionOptions()
    # With optimizations on, ORT constant-folds shape arithmetic through a builtin Gather but not
    # through a custom op; the two foldings can round differently. Compare the gathers, not the folding.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return options


def builtin_session(model):
    return ort.InferenceSession(model.SerializeToString(), _options(), providers=["CPUExecutionProvider"])


def custom_session(model):
    return ort.InferenceSession(model.SerializeToString(), session_options(_options()),
                                providers=["CPUExecutionProvider"])


def assert_rewrite_matches(model, feeds):
    """Rewrite ``model``; its outputs on ``feeds`` must equal the original's on plain ORT bit for bit."""
    rewritten, report = rewrite_model(model)
    expected = builtin_session(model).run(None, feeds)
    actual = custom_session(rewritten).run(None, feeds)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_bit_identical(a, e)
    return report
