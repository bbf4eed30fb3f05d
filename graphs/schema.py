"""An ``onnx.defs.OpSchema`` for GatherMultiaxis, so that onnx's shape inference and checker understand
rewritten models; the shape contract is ``gathermultiaxis.ops.geometry``'s. Needs onnx only.
"""

from __future__ import annotations

import threading

import onnx
import onnx.defs
from onnx import TensorProto, TypeProto, numpy_helper
from onnx.defs import OpSchema

from ..ops.contract import DATA_TYPES, DOMAIN, INDEX_TYPES, OP_TYPE, GatherShapeError, output_dims

VERSION = 1
_lock = threading.Lock()


def _type_string(elem_type: int) -> str:
    return f"tensor({TensorProto.DataType.Name(elem_type).lower()})"


def _dims(type_proto: TypeProto) -> list[int | None] | None:
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]


def _static_axes(ctx) -> list[int] | None:
    try:
        data = ctx.get_input_data(2)
    except Exception:  # noqa: BLE001 - no constant value known for the axes
        return None
    return None if data is None else [int(a) for a in numpy_helper.to_array(data).reshape(-1)]


def _infer(ctx) -> None:
    data_type = ctx.get_input_type(0)
    output = TypeProto()
    output.tensor_type.elem_type = data_type.tensor_type.elem_type
    input_dims = _dims(data_type)
    indices_dims = _dims(ctx.get_input_type(1)) if ctx.has_input(1) else None
    if input_dims is None and indices_dims is not None:
        input_dims = [None] * len(indices_dims)
    if input_dims is not None:
        if indices_dims is None:
            indices_dims = [None] * len(input_dims)
        if len(indices_dims) != len(input_dims):
            raise onnx.shape_inference.InferenceError(
                f"[ShapeInferenceError] {OP_TYPE}: input rank {len(input_dims)} and indices rank "
                f"{len(indices_dims)} differ")
        try:
            axes = _static_axes(ctx)  # not known: every output size is unknown (the rank is not)
            dims = [None] * len(input_dims) if axes is None else output_dims(input_dims, indices_dims, axes)
        except GatherShapeError as error:
            raise onnx.shape_inference.InferenceError(f"[ShapeInferenceError] {OP_TYPE}: {error}") from None
        shape = output.tensor_type.shape
        for size in dims:
            dim = shape.dim.add()
            if size is not None:
                dim.dim_value = size
    ctx.set_output_type(0, output)


def _schema() -> OpSchema:
    parameter = OpSchema.FormalParameter
    schema = OpSchema(
        OP_TYPE, DOMAIN, VERSION,
        doc="gatherMultiaxis: output[o] = input[o with o[a] replaced by indices[o][a] for a in axes]; input, "
            "indices and output share one rank, other dims broadcast (see gathermultiaxis.ops.geometry).",
        inputs=[parameter("input", "T", "the data"), parameter("indices", "Tind", "coordinates, folded into the "
                                                                                  "last dimension when len(axes) > 1"),
                parameter("axes", "tensor(int64)", "the axes read, 1-D")],
        outputs=[parameter("output", "T", "the gathered values, same rank as input")],
        type_constraints=[("T", [_type_string(t) for t in DATA_TYPES], "data types the PyOp bridge carries"),
                          ("Tind", [_type_string(t) for t in INDEX_TYPES], "index types")],
        attributes=[OpSchema.Attribute("mode", OpSchema.AttrType.STRING,
                                       "out-of-range indices: error, error_nonempty, zero or clamp", required=True)],
    )
    # onnx < 1.19 cannot take a Python inference function; the rewriter's value_info still types every
    # replaced output there, so only a second inference through a GatherMultiaxis node learns less.
    if hasattr(schema, "set_type_and_shape_inference_function"):
        schema.set_type_and_shape_inference_function(_infer)
    return schema


def register_schema() -> None:
    """Register the GatherMultiaxis schema with onnx (once per process; later calls do nothing)."""
    with _lock:
        if not onnx.defs.has(OP_TYPE, DOMAIN):
            onnx.defs.register_schema(_schema())
