"""The package logs through ``logging`` and prints nothing: silent by default, the command line's -q/-v
choose what reaches stderr."""

import ast
import logging
import pathlib
import subprocess
import sys

import onnx
import pytest

from gathermultiaxis import cli, examples
from gathermultiaxis.graphs import rewrite_model

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_nothing_in_graphs_or_ops_prints():
    printing = []
    for path in sorted((ROOT / "graphs").rglob("*.py")) + sorted((ROOT / "ops").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                printing.append(f"{path.name}:{node.lineno}")
    assert printing == []


def test_the_package_logger_is_silent_until_the_application_configures_logging():
    handlers = logging.getLogger("gathermultiaxis").handlers
    assert any(isinstance(handler, logging.NullHandler) for handler in handlers)
    script = ("import logging, onnx, gathermultiaxis\n"
              "from gathermultiaxis import examples\n"
              "from gathermultiaxis.graphs import rewrite_model\n"
              "logging.getLogger('gathermultiaxis').setLevel(logging.DEBUG)\n"  # records made, nobody shows them
              "rewrite_model(examples.build_example_model())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "" and done.stderr == ""


def test_the_passes_log_what_they_did(caplog):
    with caplog.at_level(logging.DEBUG, logger="gathermultiaxis"):
        _, report = rewrite_model(examples.build_example_model())
    passes = [r for r in caplog.records if r.name.endswith("graphs.passes")]
    summary = [r.getMessage() for r in passes if r.levelno == logging.INFO]
    assert summary == [f"RewritePass: {report.rewritten} rewritten, {report.left} left as they were"]
    assert sum(r.levelno == logging.DEBUG for r in passes) == len(report.outcomes)


@pytest.mark.parametrize("flags, shown", [([], False), (["-q"], False), (["-v"], True)])
def test_the_command_line_maps_q_and_v_to_log_levels(tmp_path, capsys, flags, shown):
    model = tmp_path / "m.onnx"
    onnx.save(examples.build_example_model(), model)
    assert cli.main(["rewrite", str(model), "-o", str(tmp_path / "out.onnx"), *flags]) == 0
    err = capsys.readouterr().err
    assert ("graphs.passes: RewritePass:" in err) == shown, err
