"""The replacement of one source gather: its record's static alignment where ranks are known, else its run-time
alignment, written as GatherMultiaxis between the Unsqueezes and the Squeeze (or Reshape) that align ranks."""

from __future__ import annotations

from onnx import NodeProto, TensorProto

from ...ops.contract import DATA_TYPES, Mode
from ...ops.alignment import AlignmentError
from .. import provenance
from ..sources import run_time_shapes
from ..sources.registry import RULES, default_source
from ..sources.source_gather import NeedsRunTime, OptInRule, Replacement
from ..ir.builder import INT64_MAX, NodeBuilder
from ..ir.tensors import type_name
from ..ranks.tensor_info import TensorInfo
from ..passes.pass_report import LeftUnchanged


# Types the bridge cannot carry but that survive a round trip through float32 exactly.
_VIA_FLOAT: dict[int, int] = {TensorProto.FLOAT16: 6, TensorProto.BFLOAT16: 13}  # type -> first opset whose Cast has it


def emit_replacement(node: NodeProto, data: TensorInfo, indices: TensorInfo, builder: NodeBuilder,
                     allow_runtime: bool = True) -> str | None:
    """Append the replacement of ``node`` (a default source gather) to ``builder``: its record's static alignment
    where ranks are known, else (unless ``allow_runtime`` is false) its run-time alignment. Returns None for a
    static alignment, else what was not known statically (the report's reason); raises LeftUnchanged with the
    reason where the node cannot be replaced."""
    source = default_source(node.op_type)
    if source.complete_ranks is not None:
        data, indices = source.complete_ranks(data, indices)
    cast_to_float = data.elem_type in _VIA_FLOAT
    if cast_to_float and builder.opset < _VIA_FLOAT[data.elem_type]:
        raise LeftUnchanged(f"{type_name(data.elem_type)} needs a Cast, which opset {builder.opset} lacks for it")
    if not cast_to_float and data.elem_type not in DATA_TYPES:
        raise LeftUnchanged(f"data type {type_name(data.elem_type)} cannot cross the PyOp bridge")
    missing_statically = None
    try:
        replacement = _static_replacement(node, data, indices)
    except NeedsRunTime as missing:
        missing_statically = str(missing)
        if not allow_runtime:  # e.g. for lowering, which needs static axes
            raise LeftUnchanged(f"{missing}, and the run-time alignment is off") from None
        if builder.opset < run_time_shapes.MIN_OPSET:
            raise LeftUnchanged(f"{missing}, and a run-time alignment needs opset "
                                f"{run_time_shapes.MIN_OPSET} (the model has {builder.opset})") from None
        replacement = None

    x, idx = node.input[0], node.input[1]
    if replacement is not None and replacement.slice_data_except is not None:
        assert data.rank is not None  # a static replacement was found, so both ranks are known
        x = _slice_like(builder, x, idx, replacement.slice_data_except, data.rank)
    if cast_to_float:
        x = builder.cast(x, TensorProto.FLOAT, "to_float")
    axes: list[int] | str  # static axes, or the run-time alignment's axes tensor
    squeeze: list[int] | str | None
    mode: Mode
    if replacement is None:
        assert source.align_at_run_time is not None and source.mode is not None, node.op_type
        aligned = source.align_at_run_time(builder, x, idx, node)
        x, idx, axes, squeeze = aligned.data, aligned.indices, aligned.axes, aligned.output_squeeze
        output_shape = aligned.output_shape
        mode = source.mode
    else:
        alignment = replacement.alignment
        x = builder.unsqueeze(x, list(alignment.data_unsqueeze), "align_data")
        idx = builder.unsqueeze(idx, list(alignment.indices_unsqueeze), "align_indices")
        axes, squeeze, mode = list(alignment.axes), list(alignment.output_squeeze), replacement.mode
        output_shape = None
    output = node.output[0]
    needs_tail = bool(squeeze) or bool(output_shape) or cast_to_float
    gathered = builder.names.fresh(f"{builder.prefix}/gathered") if needs_tail else output
    builder.gather_multiaxis(x, idx, axes, gathered, node.name or builder.prefix, mode)
    provenance.record(builder.nodes[-1], node)  # the lowering's way back to the one gather (graphs.provenance)
    y = builder.squeeze(gathered, squeeze, "restore_rank") if squeeze else gathered
    if output_shape:  # below opset 13 (its zeros are sizes: see sources.run_time_shapes)
        y = run_time_shapes.reshape(builder, y, output_shape, "restore_rank")
    if cast_to_float:
        y = builder.cast(y, data.elem_type, "from_float")
    if needs_tail:
        builder.rename_last_output(output)
    return missing_statically


def _static_replacement(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Replacement:
    if data.rank is None or indices.rank is None:
        unknown = [name for name, info in zip(node.input, (data, indices)) if info.rank is None]
        raise NeedsRunTime(f"the rank of {', '.join(repr(n) for n in unknown)} is not known")
    try:
        rule = RULES[node.op_type]
        assert not isinstance(rule, OptInRule), "an opt-in op is emitted by OptInRule.emit, never aligned here"
        return rule(node, data, indices)
    except AlignmentError as error:
        raise LeftUnchanged(str(error)) from None


def _slice_like(builder: NodeBuilder, data: str, indices: str, axis: int, rank: int) -> str:
    """data[:i0, :i1, ...] with the indices' extents on every dimension but ``axis``."""
    shape = builder.shape(indices, "indices_shape")

    def shape_part(start: int, end: int, role: str) -> str:  # shape[start:end]
        return builder.slice(shape, builder.constant([start], role + "_start"), builder.constant([end], role + "_end"),
                             builder.constant([0], role + "_axes"), role)

    parts = [shape_part(0, axis, "shape_head")] if axis > 0 else []
    parts.append(builder.constant([INT64_MAX], "whole_axis"))
    if axis < rank - 1:
        parts.append(shape_part(axis + 1, rank, "shape_tail"))
    ends = builder.concat(parts, "slice_ends")
    return builder.slice(data, builder.constant([0] * rank, "slice_starts"), ends,
                         builder.constant(list(range(rank)), "slice_axes"), "fit_data")


__all__ = ["RULES", "LeftUnchanged", "OptInRule", "Replacement", "emit_replacement"]
