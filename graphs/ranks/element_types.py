"""Element types by op schema (ONNX's, or ORT's for its own domains), and standard stand-ins for the fused ops
ORT's optimizer writes, so that inference types what follows them."""

from __future__ import annotations

import functools
from typing import Any

import onnx
import onnx.defs
from onnx import NodeProto

from ..ir.walk import attribute

# ORT's fused ops have no ONNX schema, and ORT's symbolic shape inference stops at the first op it does
# not know (FusedConv, FusedGemm, FusedMatMul among them). For shape inference only, the typing copy holds
# a standard op with exactly the same output type and shape in their place.
# ORT's fused ops have no ONNX schema, and ORT's symbolic shape inference stops at the first op it does
# not know (FusedConv, FusedGemm, FusedMatMul among them). For shape inference only, the typing copy holds
# a standard op with exactly the same output type and shape in their place.

_MICROSOFT = "com.microsoft"
_CONV_ATTRIBUTES = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}
_GEMM_ATTRIBUTES = {"alpha", "beta", "transA", "transB"}


def typing_stand_in(node: onnx.NodeProto) -> onnx.NodeProto | None:
    """A standard Conv, Gemm, MatMul or Einsum node typing a com.microsoft fused op's outputs exactly as ORT
    computes them; None for any other node (or a form without an exact stand-in)."""
    if node.domain != _MICROSOFT:
        return None
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "FusedConv":  # Conv + activation (+ Z, added: of the output's shape)
        kept = {k: v for k, v in attributes.items() if k in _CONV_ATTRIBUTES}
        return onnx.helper.make_node("Conv", list(node.input[:3]), list(node.output), name=node.name, **kept)
    if node.op_type == "FusedGemm":  # Gemm + activation
        kept = {k: v for k, v in attributes.items() if k in _GEMM_ATTRIBUTES}
        return onnx.helper.make_node("Gemm", list(node.input[:3]), list(node.output), name=node.name, **kept)
    if node.op_type == "FusedMatMul":  # alpha * op(A) @ op(B); op transposes the last two dims
        if attributes.get("transBatchA", 0) or attributes.get("transBatchB", 0):
            return None
        trans_a, trans_b = attributes.get("transA", 0), attributes.get("transB", 0)
        if not (trans_a or trans_b):
            return onnx.helper.make_node("MatMul", list(node.input[:2]), list(node.output), name=node.name)
        a, b = ("...ji" if trans_a else "...ij"), ("...kj" if trans_b else "...jk")
        return onnx.helper.make_node("Einsum", list(node.input[:2]), list(node.output), name=node.name,
                                     equation=f"{a},{b}->...ik")
    return None


@functools.lru_cache(maxsize=1)
def _contrib_schemas() -> dict[tuple[str, str], Any]:  # Any: ORT's pybind schemas have no type information
    """ORT's own op schemas (com.microsoft and the other domains ORT registers), newest version of each."""
    try:
        from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema
    except ImportError:
        return {}
    schemas: dict[tuple[str, str], Any] = {}
    for schema in get_all_operator_schema():
        key = (schema.domain, schema.name)
        if schema.domain not in ("", "ai.onnx") and (key not in schemas or
                                                      schema.since_version > schemas[key].since_version):
            schemas[key] = schema
    return schemas


def _elem_type_of(type_str: str) -> int:
    name = type_str.removeprefix("tensor(").removesuffix(")").upper()
    try:
        return onnx.TensorProto.DataType.Value(name)
    except ValueError:
        return 0


def schema_output_types(node: onnx.NodeProto, input_types: list[int]) -> list[int] | None:
    """The element types of a non-ONNX node's outputs by ORT's op schema; None without a schema."""
    schema = _contrib_schemas().get((node.domain, node.op_type))
    if schema is None:
        return None
    formals = [(formal.typeStr, str(formal.option).endswith("Variadic"), formal.isHomogeneous)
               for formal in schema.inputs]
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    outputs = [formal.typeStr for formal in schema.outputs]
    if schema.outputs and str(schema.outputs[-1].option).endswith("Variadic"):
        outputs += outputs[-1:] * (len(node.output) - len(outputs))
    return bound_output_types(formals, outputs, allowed, input_types, len(node.output))


def bound_output_types(inputs: list[tuple[str, bool, bool]], outputs: list[str], allowed: dict[str, list[str]],
                       input_types: list[int], count: int) -> list[int]:
    """The element types of a node's first ``count`` outputs by its op schema: an output's type parameter is
    bound by an input of that parameter whose type is known (a homogeneous variadic input by any of its values),
    or allows a single type; 0 where the schema does not tell."""
    bound: dict[str, int] = {}
    for position, (type_str, variadic, homogeneous) in enumerate(inputs):
        if variadic:  # the last formal input: it takes every remaining value
            if homogeneous:
                known = next((elem_type for elem_type in input_types[position:] if elem_type), 0)
                if known:
                    bound.setdefault(type_str, known)
            break
        if position < len(input_types) and input_types[position]:
            bound.setdefault(type_str, input_types[position])
    types = []
    for type_str in outputs[:count]:
        choices = allowed.get(type_str, [type_str])
        types.append(bound.get(type_str) or (_elem_type_of(choices[0]) if len(choices) == 1 else 0))
    return types



@functools.lru_cache(maxsize=None)
def _onnx_schema(op_type: str, opset: int):
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


def output_elem_types(node: NodeProto, input_types: list[int], opset: int) -> list[int] | None:
    """The element types of ``node``'s outputs by its op schema (ONNX's at ``opset``, ORT's for other domains);
    0 where it does not tell, None without a schema. Independent of ranks, so that an element type crosses ops
    whose shapes no layer knows."""
    if node.domain not in ("", "ai.onnx"):
        return schema_output_types(node, input_types)
    if node.op_type == "Cast":
        return [attribute(node, "to", 0)]
    schema = _onnx_schema(node.op_type, opset)
    if schema is None:
        return None
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    formals = [(formal.type_str, formal.option == variadic, formal.is_homogeneous) for formal in schema.inputs]
    outputs = [formal.type_str for formal in schema.outputs]
    if schema.outputs and schema.outputs[-1].option == variadic:
        outputs += outputs[-1:] * (len(node.output) - len(outputs))
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    return bound_output_types(formals, outputs, allowed, input_types, len(node.output))


__all__ = ["bound_output_types", "output_elem_types", "schema_output_types", "typing_stand_in"]
