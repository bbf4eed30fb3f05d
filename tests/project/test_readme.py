"""The README's Python examples (and the operator example of docs/operator.md) run as written and do what they
claim. tests/project/test_docs.py runs every block of the README and docs/ too; this file checks what they print."""

import re
import shutil
from pathlib import Path

import numpy as np
import onnx
from sessions import builtin_session
from support import assert_bit_identical

from gathermultiaxis.examples import EXAMPLE_PATH, example_inputs

README = Path(__file__).resolve().parents[2] / "README.md"
OPERATOR_PAGE = Path(__file__).resolve().parents[2] / "docs" / "operator.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
OPERATOR_BLOCKS = re.findall(r"```python\n(.*?)```", OPERATOR_PAGE.read_text(), re.S)


def block(containing: str, blocks: list[str] = BLOCKS) -> str:
    (code,) = [code for code in blocks if containing in code]
    return code


def run(code: str, folder: Path, monkeypatch) -> dict:
    monkeypatch.chdir(folder)
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    return namespace


def test_every_python_block_is_tested():
    assert len(BLOCKS) == 3


def test_operator_example(capsys, tmp_path, monkeypatch):
    code = block('h.make_node("GatherMultiaxis"', OPERATOR_BLOCKS)
    assert len(code.strip().splitlines()) <= 12
    run(code, tmp_path, monkeypatch)
    image = np.arange(2 * 4 * 5, dtype=np.float32).reshape(2, 4, 5)
    assert capsys.readouterr().out.strip() == str(image[:, [0, 3], [4, 1]].reshape(2, 1, 2)).strip()


def test_rewrite_example(capsys, tmp_path, monkeypatch):
    namespace = run(block("rewrite_model(model)"), tmp_path, monkeypatch)
    assert "total                    8     0" in capsys.readouterr().out
    original = onnx.load_model(str(EXAMPLE_PATH))
    expected = builtin_session(original).run(None, example_inputs())
    for actual, want in zip(namespace["outputs"], expected):
        assert_bit_identical(actual, want)
    portable = onnx.load_model(str(tmp_path / "example.portable.onnx"))
    assert all(node.domain in ("", "ai.onnx") for node in portable.graph.node)
    for actual, want in zip(builtin_session(portable).run(None, example_inputs()), expected):  # plain ORT
        assert_bit_identical(actual, want)


def test_check_example(capsys, tmp_path, monkeypatch):
    shutil.copy(EXAMPLE_PATH, tmp_path / "model.onnx")
    namespace = run(block("check.run("), tmp_path, monkeypatch)
    assert namespace["report"].counts()["passed"] == 1 and namespace["report"].exit_status() == 0
    assert capsys.readouterr().out.startswith("1 passed, 0 failed")
