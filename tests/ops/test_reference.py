"""The reference OpRun (gathermultiaxis.ops.reference) in onnx's ReferenceEvaluator: random calls
against the kernel, a rewritten model against ORT's builtin gathers, and its errors."""

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator
from support import assert_bit_identical, gather_cases, gather_multiaxis_model

from gathermultiaxis import GatherIndexError, GatherShapeError, gather_multiaxis
from gathermultiaxis.harness import make_session
from gathermultiaxis.examples import EXAMPLE_PATH, example_inputs
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.ops.reference import GatherMultiaxis

_MODELS = {}


def _evaluator(mode):
    if mode not in _MODELS:
        _MODELS[mode] = ReferenceEvaluator(gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64, mode),
                                           new_ops=[GatherMultiaxis])
    return _MODELS[mode]


@settings(max_examples=300, deadline=None)
@given(case=gather_cases())
def test_reference_op_matches_kernel(case):
    data = case.as_dtype(np.float32)
    feeds = {"input": data, "indices": case.indices, "axes": np.array(case.axes, dtype=np.int64)}
    try:
        expected = gather_multiaxis(data, case.indices, case.axes, case.mode)
    except (GatherIndexError, GatherShapeError) as error:
        with pytest.raises(type(error)):
            _evaluator(case.mode).run(None, feeds)
        return
    assert_bit_identical(_evaluator(case.mode).run(None, feeds)[0], expected)


def test_reference_evaluator_runs_the_rewritten_example():
    model = onnx.load_model(str(EXAMPLE_PATH))
    rewritten, report = rewrite_model(model)
    assert report.rewritten and not report.left
    for seed in range(2):
        feeds = example_inputs(seed=seed)
        expected = make_session(model, custom=False).run(None, feeds)
        actual = ReferenceEvaluator(rewritten, new_ops=[GatherMultiaxis]).run(None, feeds)
        for a, e in zip(actual, expected):
            assert_bit_identical(a, e)


def test_reference_errors_name_the_problem():
    evaluator = _evaluator("error")
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(GatherIndexError, match=r"index 3 at indices\[0, 1\] is out of range for axis 1 of size 3"):
        evaluator.run(None, {"input": data, "indices": np.array([[0, 3]]), "axes": np.array([1])})
    with pytest.raises(GatherShapeError, match="equal ranks"):
        evaluator.run(None, {"input": data, "indices": np.array([0]), "axes": np.array([1])})
    with pytest.raises(GatherShapeError, match="size 0"):
        _evaluator("zero").run(None, {"input": np.zeros((0, 2), np.float32), "indices": np.array([[1]]),
                                      "axes": np.array([0])})


def test_reference_module_does_not_import_onnxruntime():
    import ast
    import pathlib

    import gathermultiaxis.ops.reference as reference

    tree = ast.parse(pathlib.Path(reference.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.startswith("onnxruntime") for name in imported), imported
