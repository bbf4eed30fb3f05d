"""graphs.ir.constant_view: a scope's constants (initializers that are not inputs, Constant values, the int64
casts of old opsets, the enclosing scopes'), each read on first use, external data only from the model's folder."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.graphs.ir.constant_view import ConstantView
from gathermultiaxis.graphs.modelfile import ExternalDataError


def _value(name, elem_type=TensorProto.FLOAT, shape=(2,)):
    return helper.make_tensor_value_info(name, elem_type, shape)


def test_initializer_is_the_scopes_own():
    weight = numpy_helper.from_array(np.ones(3, np.float32), "weight")
    default = numpy_helper.from_array(np.zeros(3, np.float32), "default")  # also a graph input: a default only
    outer = helper.make_graph([helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(2)))],
                              "outer", [_value("default")], [_value("c")], [weight, default])
    inner = helper.make_graph([], "inner", [], [], [numpy_helper.from_array(np.ones(1, np.int64), "own")])
    outer_view = ConstantView(outer)
    view = ConstantView(inner, outer_view)
    assert outer_view.initializer("weight") is not None
    assert outer_view.initializer("default") is None  # a graph input's initializer may be overridden
    assert outer_view.initializer("c") is None        # a Constant's value, not an initializer
    assert outer_view.tensor("c") is not None
    assert view.initializer("own") is not None
    assert view.initializer("weight") is None         # the enclosing scope's
    assert view.tensor("weight") is not None          # (which the full view does see)
    assert sorted(view) == ["c", "own", "weight"] and "default" not in view


def test_a_graph_input_hides_an_outer_constant():
    outer = helper.make_graph([], "outer", [], [], [numpy_helper.from_array(np.ones(2, np.float32), "x")])
    inner = helper.make_graph([], "inner", [_value("x")], [])
    assert "x" in ConstantView(outer) and "x" not in ConstantView(inner, ConstantView(outer))


def test_initializer_keeps_external_data_unread(tmp_path):
    tensor = numpy_helper.from_array(np.arange(8, dtype=np.float32), "table")
    graph = helper.make_graph([], "g", [], [_value("table")], [tensor])
    model = helper.make_model(graph)
    onnx.save_model(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    loaded = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    found = ConstantView(loaded.graph).initializer("table")
    assert found.data_location == TensorProto.EXTERNAL
    assert {entry.key: entry.value for entry in found.external_data}["location"] == "m.data"
    view = ConstantView(loaded.graph)
    assert view.dtype("table") == np.float32 and view.size("table") == 8  # from the proto: no payload read
    with pytest.raises(ExternalDataError, match="the model's folder is not known"):
        view["table"]
    assert ConstantView(loaded.graph, external_data_folder=tmp_path)["table"].tolist() == list(range(8))


def test_constants_are_the_nodes_present_when_the_view_was_made():
    graph = helper.make_graph([helper.make_node("Constant", [], ["a"], value_ints=[1, 2])], "g", [], [_value("a")])
    view = ConstantView(graph)
    graph.node.append(helper.make_node("Constant", [], ["b"], value_ints=[3]))  # a replacement, appended later
    assert view["a"].tolist() == [1, 2]
    assert "b" not in view
    view.learn("b", np.array([3]))  # a value a pass computed
    assert view["b"].tolist() == [3] and len(view) == 2


def test_int64_cast_of_a_float_constant_is_read_on_demand():
    graph = helper.make_graph([helper.make_node("Constant", [], ["d"], value=numpy_helper.from_array(np.array([2.0, 3.0]))),
                               helper.make_node("Cast", ["d"], ["i"], to=TensorProto.INT64)], "g", [], [_value("i")])
    view = ConstantView(graph)
    assert "i" in view and view["i"].dtype == np.int64 and view["i"].tolist() == [2, 3]
    assert view.dtype("i") == np.int64 and view.size("i") == 2
