"""Running a model on plain ORT and its rewrite with the custom op, and comparing them bit for bit."""

from support import assert_bit_identical

from gathermultiaxis.harness import make_session
from gathermultiaxis.graphs import rewrite_model


# Graph optimizations off, as in `gathermultiaxis check`: ORT constant-folds shape arithmetic through a
# builtin Gather but not through a custom op, and the two foldings can round differently.
def builtin_session(model):
    return make_session(model, custom=False)


def custom_session(model):
    return make_session(model, custom=True)


def assert_rewrite_matches(model, feeds):
    """Rewrite ``model``; its outputs on ``feeds`` must equal the original's on plain ORT bit for bit."""
    rewritten, report = rewrite_model(model)
    expected = builtin_session(model).run(None, feeds)
    actual = custom_session(rewritten).run(None, feeds)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_bit_identical(a, e)
    return report


def file_session(path, custom: bool, optimized: bool = False):
    """A CPU session of the model file at ``path`` (ORT finds its external data beside it); graph
    optimizations off unless ``optimized`` (then ORT's defaults)."""
    import onnxruntime as ort

    from gathermultiaxis import session_options

    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), session_options(options) if custom else options,
                                providers=["CPUExecutionProvider"])
