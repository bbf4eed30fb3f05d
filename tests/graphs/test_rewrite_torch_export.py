"""A model exported from PyTorch with dynamic axes, rewritten and matched (shipped file; re-exported
and checked against torch itself when torch is installed)."""

import numpy as np
import onnx
import pytest
from sessions import assert_rewrite_matches, custom_session
from support import assert_bit_identical
from torch_gathers import INPUT_NAMES, SHIPPED, export, feeds_for, module_and_inputs

from gathermultiaxis.graphs import rewrite_model


@pytest.mark.parametrize("batch, seq", [(2, 5), (1, 1), (4, 9), (0, 4)])
def test_shipped_torch_export_rewrites_and_matches(batch, seq):
    model = onnx.load_model(str(SHIPPED))
    feeds = feeds_for(batch, seq, batch * 10 + seq)
    report = assert_rewrite_matches(model, feeds)
    assert report.left == 0 and report.counts()["GatherElements"]["rewritten"] == 1
    assert report.rewritten >= 5, report.table()


def test_reexport_matches_torch():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    model = onnx.load_model_from_string(export())
    rewritten, report = rewrite_model(model)
    assert report.left == 0
    module, inputs = module_and_inputs(batch=3, seq=7, seed=4)
    with torch.no_grad():
        expected = [t.numpy() for t in module(*inputs)]
    actual = custom_session(rewritten).run(None, dict(zip(INPUT_NAMES, [t.numpy() for t in inputs])))
    for a, e in zip(actual, expected):
        assert_bit_identical(a, e)
