"""An ``onnx.defs.OpSchema`` for GatherMultiaxis, so that onnx's shape inference and checker understand
rewritten models (types and shapes flow through the op instead of stopping at it).

Registered once, on ``import gathermultiaxis.graphs``; ``register_schema()`` is idempotent. Needs onnx
only, not onnxruntime. The shape contract is the one of ``gathermultiaxis.ops.geometry``: output rank =
input rank = indices rank; output dims follow ``GatherGeometry.infer`` where sizes and axes are static.
"""

from __future__ import annotations

import threading

import onnx
import onnx.defs
from onnx import TensorProto, TypeProto, numpy_helper
from onnx.defs import OpSchema

from ..ops.geometry import GatherGeometry, GatherShapeError
from ..ops.signature import DATA_TYPES, DOMAIN, INDEX_TYPES, OP_TYPE

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


def output_dims(input_dims: list[int | None], indices_dims: list[int | None],
                axes: list[int] | None) -> list[int | None]:
    """Output dims from what is known: GatherGeometry's rules where the sizes involved are static."""
    if axes is not None and None not in input_dims and None not in indices_dims:
        return list(GatherGeometry.infer(input_dims, indices_dims, axes).output_shape)
    rank = len(input_dims)
    out: list[int | None] = [None] * rank
    if axes is None:
        return out
    axes = [a % rank for a in axes]
    logical = list(indices_dims)
    if len(axes) > 1 and logical:
        logical[-1] = None if logical[-1] is None else logical[-1] // len(axes)
    for d in range(rank):
        size_in, size_idx = input_dims[d], logical[d]
        if d in axes:
            out[d] = size_idx
        elif size_idx == 1 or (size_in is not None and size_in == size_idx):
            out[d] = size_in
        elif size_in == 1:
            out[d] = size_idx
        elif size_in is not None and size_idx is not None:  # neither 1, not equal: broadcast failure
            raise GatherShapeError(f"dimension {d} is not broadcastable: input {size_in} vs indices {size_idx}")
        elif size_in is not None:  # the indices' size is 1 or size_in: either way the output has size_in
            out[d] = size_in
    return out


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
            dims = output_dims(input_dims, indices_dims, _static_axes(ctx))
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
