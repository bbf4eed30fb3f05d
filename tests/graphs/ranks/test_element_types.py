"""graphs.ranks.element_types: element types by op schema, and standard stand-ins for ORT's fused ops."""

from onnx import TensorProto, helper

from gathermultiaxis.graphs.ranks.element_types import bound_output_types, output_elem_types, typing_stand_in


def test_schema_types_and_stand_ins():
    cast = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)
    assert output_elem_types(cast, [TensorProto.FLOAT], 17) == [TensorProto.INT32]
    shape = helper.make_node("Shape", ["x"], ["y"])
    assert output_elem_types(shape, [TensorProto.FLOAT], 17) == [TensorProto.INT64]
    assert bound_output_types([("T", False, True)], ["T"], {"T": ["tensor(float)", "tensor(double)"]},
                              [TensorProto.DOUBLE], 1) == [TensorProto.DOUBLE]
    fused = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft", transB=1)
    stand_in = typing_stand_in(fused)
    assert stand_in.op_type == "Einsum" and stand_in.attribute[0].s == b"...ij,...kj->...ik"
    assert typing_stand_in(helper.make_node("Relu", ["a"], ["y"])) is None
