"""graphs/webnn/webnn_findings.py: the nodes ORT's WebNN EP would not take, and why."""

from onnx import TensorProto, helper

from gathermultiaxis.graphs.webnn.webnn_findings import Finding, webnn_check


def test_findings_name_the_node_and_the_reason():
    nodes = [helper.make_node("GatherND", ["x", "i"], ["y"], name="nd", batch_dims=1),
             helper.make_node("Det", ["x2"], ["d"], name="det")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("i", TensorProto.INT64, [2, 1]),
                                           helper.make_tensor_value_info("x2", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("d", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert webnn_check(model) == [Finding("nd", "GatherND", "batch_dims 1 (WebNN's gatherND has none)"),
                                  Finding("det", "Det", "not in the WebNN EP's op table")]
