"""graphs.ort_types: the types ORT's load-time inference gives a model's values."""

import pytest
from onnx import TensorProto, helper

pytest.importorskip("onnxruntime", reason="ort_value_types asks onnxruntime")

from gathermultiaxis.graphs.ort_types import OrtTypesError, ort_value_types, plain_session_options  # noqa: E402


def model(op_type="Relu", domain=""):
    nodes = [helper.make_node(op_type, ["x"], ["y"], domain=domain), helper.make_node("Identity", ["y"], ["z"]),
             helper.make_node("ReduceSum", ["z"], ["s"], keepdims=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def dims(type_proto):
    return [d.dim_param or d.dim_value for d in type_proto.tensor_type.shape.dim]


def test_types_of_produced_values():
    original = model()
    before = original.SerializeToString()
    types = ort_value_types(original, ["y", "x", "s", "unknown"], session_options=plain_session_options)
    assert set(types) == {"y", "s"}  # x is a graph input, "unknown" no value: neither is asked of ORT
    assert types["y"].tensor_type.elem_type == TensorProto.FLOAT
    assert dims(types["y"]) == ["batch", 3]  # Relu keeps its input's shape
    assert types["s"].tensor_type.HasField("shape") and dims(types["s"]) == []  # a full reduction: a scalar
    assert original.SerializeToString() == before


def test_nothing_asked_gives_nothing():
    assert ort_value_types(model(), [], session_options=plain_session_options) == {}


def test_a_model_ort_cannot_load_raises():
    with pytest.raises(OrtTypesError):
        ort_value_types(model("NoSuchOp", domain="no.such.domain"), ["y"], session_options=plain_session_options)


def test_plain_session_options_keeps_given_options():
    import onnxruntime as ort

    options = ort.SessionOptions()
    assert plain_session_options(options) is options
    assert isinstance(plain_session_options(), ort.SessionOptions)


def test_scalars_and_unknown_ranks_are_told_apart():
    # "first": a Gather by a scalar constant (its Shape asked at once); "total": a scalar ORT shows as [] like an
    # unknown shape (asked again with its Shape); "reshaped": a rank ORT cannot know (a shape input of unknown length)
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["first"], axis=0),
             helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Reshape", ["x", "target"], ["reshaped"]),
             helper.make_node("Relu", ["x"], ["relu"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
                                           helper.make_tensor_value_info("target", TensorProto.INT64, ["k"])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("reshaped",)],
                              [helper.make_tensor("zero", TensorProto.INT64, [], [0])])
    graph.output.add().CopyFrom(helper.make_tensor_value_info("first", TensorProto.INT64, None))
    original = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    types = ort_value_types(original, ["first", "total", "reshaped", "relu"], session_options=plain_session_options)
    assert types["first"].tensor_type.HasField("shape") and dims(types["first"]) == []
    assert types["total"].tensor_type.HasField("shape") and dims(types["total"]) == []
    assert not types["reshaped"].tensor_type.HasField("shape")  # the rank is not known: no shape at all
    assert dims(types["relu"]) == ["batch", 3]


def test_one_session_where_every_rank_shows(monkeypatch):
    import onnxruntime as ort

    made = []
    real = ort.InferenceSession

    def counted(*args, **kwargs):
        made.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counted)
    types = ort_value_types(model(), ["y", "z"], session_options=plain_session_options)
    assert dims(types["y"]) == dims(types["z"]) == ["batch", 3]
    assert len(made) == 1 and b"ort_type_shape" not in made[0]  # outputs only: no Shape node was needed

