"""graphs.ranks.symbolic_ranks: layer 2, the ranks ORT's symbolic shape inference states."""

import subprocess
import sys
import textwrap

from onnx import TensorProto, helper

from gathermultiaxis.graphs.ranks.symbolic_ranks import symbolic_inference


def _model(nodes, inputs, outputs, opset=17):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", opset)])


def test_symbolic_inference_ranks_a_reshape_chain_onnx_leaves_unranked():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    result = symbolic_inference(_model(nodes, [x], [y]))
    assert result.failure == "" and result.infos["r"].rank == 2


def test_below_opset_7_it_says_why_it_gave_up():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    result = symbolic_inference(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y], opset=6))
    assert result.infos == {} and "below 7" in result.failure


def test_symbolic_inference_runs_without_onnxruntime_tools_package_init():
    """ORT's symbolic inference is loaded from its file: ``onnxruntime/tools/__init__.py`` imports torch
    whenever it is installed (seconds), which the rewrite and the session must not pay for."""
    script = textwrap.dedent("""
        import sys
        from onnx import TensorProto, helper
        from gathermultiaxis.graphs.ranks.symbolic_ranks import symbolic_infos
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
        graph = helper.make_graph(nodes, "g", [x], [y])
        infos = symbolic_infos(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
        print(infos["h"].rank, "onnxruntime.tools" in sys.modules, "torch" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "False", "False"]
