"""graphs.passes.inlining: the pass's own copy, with the functions holding a target inlined (attribute defaults
applied, the IR version kept), or the inliner's reason."""

from onnx import TensorProto, helper

from gathermultiaxis.graphs.passes.inlining import InlineFunctionsHolding, inline_functions_holding, pass_copy


def _model(functions=True):
    relu = helper.make_function("local", "with_relu", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                                [helper.make_opsetid("", 17)])
    scaled = helper.make_function("local", "scaled", ["a"], ["b"],
                                  [helper.make_node("Constant", [], ["s"], value_float=1.0),
                                   helper.make_node("Mul", ["a", "s"], ["b"])], [helper.make_opsetid("", 17)])
    caller = helper.make_function("local", "calls_relu", ["a"], ["b"],
                                  [helper.make_node("with_relu", ["a"], ["b"], domain="local")],
                                  [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    nodes = [helper.make_node("calls_relu", ["x"], ["y"], domain="local"),
             helper.make_node("scaled", ["y"], ["z"], domain="local")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                             functions=[relu, scaled, caller] if functions else [], ir_version=8)


def is_relu(node):
    return node.op_type == "Relu"


def test_only_the_functions_holding_a_target_are_inlined_and_the_model_is_not_changed():
    model = _model()
    before = model.SerializeToString()
    copy, failure = pass_copy(model, is_relu)
    assert failure == "" and model.SerializeToString() == before
    assert [node.op_type for node in copy.graph.node] == ["Relu", "scaled"]  # through the function that calls one
    assert [f.name for f in copy.functions] == ["scaled"] and copy.ir_version == 8


def test_nothing_to_inline_returns_the_model_itself():
    model = _model()
    assert inline_functions_holding(model, lambda node: node.op_type == "Gather") == (model, "")


def test_attribute_defaults_reach_the_inlined_body():
    body = [helper.make_node("Constant", [], ["k"], value_float=0.0),
            helper.make_node("LeakyRelu", ["a"], ["b"], alpha=0.5)]
    function = helper.make_function("local", "leaky", ["a"], ["b"], body, [helper.make_opsetid("", 17)],
                                    attributes=[])
    function.attribute_proto.append(helper.make_attribute("unused_default", 3))
    graph = helper.make_graph([helper.make_node("leaky", ["x"], ["y"], domain="local")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                              functions=[function])
    inlined, failure = inline_functions_holding(model, lambda node: node.op_type == "LeakyRelu")
    assert failure == "" and [node.op_type for node in inlined.graph.node] == ["Constant", "LeakyRelu"]
    assert [a.name for a in model.graph.node[0].attribute] == ["unused_default"]  # written into the call


def test_the_step_of_a_sequential_copies():
    model = _model()
    result = InlineFunctionsHolding(is_relu)(model)
    assert result.modified and result.model is not model and len(model.functions) == 3
    assert not InlineFunctionsHolding(is_relu)(_model(functions=False)).modified
