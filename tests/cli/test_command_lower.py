"""``lower``: GatherMultiaxis back to standard ONNX ops (or WebNN's subset), the report printed."""

import re

import onnx
import pytest

from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    path = tmp_path_factory.mktemp("rewritten") / "rewritten.onnx"
    assert main(["rewrite", str(EXAMPLE_PATH), "-o", str(path), "-q"]) == 0
    return path


def test_lower_leaves_no_gather_multiaxis(tmp_path, capsys, rewritten):
    lowered = tmp_path / "lowered.onnx"
    assert main(["lower", str(rewritten), "-o", str(lowered)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote {lowered}\n")
    assert not any(node.op_type == "GatherMultiaxis" for node in onnx.load_model(str(lowered)).graph.node)


def test_a_node_left_is_exit_1_with_the_model_written(tmp_path, capsys, rewritten):
    """The example holds gathers WebNN's subset cannot take: the report counts them, the model is written."""
    lowered = tmp_path / "lowered.onnx"
    shapes = ["token_ids:[2,5]", "sort_order:[2,5,8]", "positions:[2,3,1]"]
    assert main(["lower", str(rewritten), "-o", str(lowered), "--target", "webnn", "--input-shapes", *shapes]) == 1
    out = capsys.readouterr().out
    assert re.search(r"GatherMultiaxis lowered: \d+, left: [1-9]", out) and out.endswith(f"wrote {lowered}\n")
    onnx.checker.check_model(str(lowered))


def test_input_shapes_go_with_webnn_only(tmp_path, capsys, rewritten):
    assert main(["lower", str(rewritten), "-o", str(tmp_path / "x.onnx"), "--input-shapes", "a:[1]"]) == 2
    assert capsys.readouterr().err == "gathermultiaxis lower: --input-shapes goes with --target webnn\n"
    assert list(tmp_path.iterdir()) == []
