"""graphs.ranks.tensor_info: what an ONNX type says of a value, and how sources of it are merged."""

from onnx import TensorProto, helper

from gathermultiaxis.graphs.ranks.tensor_info import (TensorInfo, declared_ranks, graph_infos, known_rank, learn,
                                                       tensor_info, with_elem_type)


def test_tensor_info_reads_concrete_symbolic_and_unknown_dims():
    value = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "n", None])
    assert tensor_info(value.type) == TensorInfo(TensorProto.FLOAT, (2, "n", None))
    unranked = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    assert tensor_info(unranked.type) == TensorInfo(TensorProto.INT64, None)
    assert not known_rank(tensor_info(unranked.type)) and known_rank(tensor_info(value.type))


def test_learn_never_forgets_a_known_rank():
    infos = {"x": TensorInfo(0, (3, 4))}
    learn(infos, "x", TensorInfo(TensorProto.FLOAT, None))  # a source with the type but no shape
    assert infos["x"] == TensorInfo(TensorProto.FLOAT, (3, 4))
    learn(infos, "x", TensorInfo(0, (5,)))  # a shape without a type keeps the known type
    assert infos["x"] == TensorInfo(TensorProto.FLOAT, (5,))
    assert with_elem_type(TensorInfo(0, (1,)), None) == TensorInfo(0, (1,))


def test_graph_infos_and_declared_ranks_read_the_graph():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    h = helper.make_tensor_value_info("h", TensorProto.FLOAT, ["a", "b"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
                              "g", [x], [y], value_info=[h])
    infos = graph_infos(graph, main=True)
    assert infos["x"].shape == (2, 3) and infos["h"].rank == 2
    assert declared_ranks(graph)["h"].rank == 2
