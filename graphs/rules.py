"""One rewrite rule per ONNX gather: match -> rank alignment -> GatherMultiaxis.

A rule decides the *alignment* (``gathermultiaxis.ops.alignment``, shared with the NumPy variants):
which size-1 dimensions to insert into the data and the indices, which axes GatherMultiaxis reads,
and which size-1 dimensions to drop from its output. It needs ranks (and GatherND's coordinate size),
never concrete sizes, so symbolic dimensions are fine. ``emit_replacement`` turns it into nodes; where
a rank or the coordinate size is unknown, it emits the run-time alignment of ``runtime_alignment``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from onnx import NodeProto, TensorProto

from ..ops.contract import DATA_TYPES, Mode
from ..ops.alignment import (Alignment, AlignmentError, gather_alignment, gather_elements_alignment,
                             gather_nd_alignment)
from . import block_quantized, provenance, runtime_alignment
from .ir.builder import INT64_MAX, NodeBuilder
from .ranks.tensor_info import Dim, TensorInfo
from .passes.pass_report import LeftUnchanged
from .ir.walk import attribute



class _NeedsRuntime(Exception):
    """No static alignment: what is missing (a rank, GatherND's coordinate size) is known only at run time."""


@dataclass(frozen=True)
class Replacement:
    """What a rule decides for one node: the alignment, plus the graph-only details."""

    alignment: Alignment
    slice_data_except: int | None = None  # GatherElements: cut data to the indices' extents but on this axis
    mode: str = "error"                   # "error_nonempty" for GatherND: ORT checks nothing when nothing is read


def _same_dim(a: Dim, b: Dim) -> bool:
    # Only concrete sizes: ORT does not enforce that equal symbolic names have equal sizes at run time.
    return isinstance(a, int) and a == b


def rule_gather(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Replacement:
    """Gather(axis): indices' dims in front of the data axis (``ops.alignment.gather_alignment``).

    Args:
        node: the Gather node.
        data: what is known of its data input (element type, dims).
        indices: what is known of its indices input.

    Returns:
        The alignment, mode "error".

    Raises:
        AlignmentError: ranks or attributes that describe no valid Gather.
    """
    assert data.rank is not None and indices.rank is not None, "RULES run on known ranks (_static_replacement)"
    return Replacement(gather_alignment(data.rank, indices.rank, attribute(node, "axis", 0)))


def rule_gather_elements(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Replacement:
    """Indices smaller than the data on other dimensions (which ORT accepts) need the data cut to the
    indices' extents first, unless both sizes are known and equal.

    Args:
        node: the GatherElements node.
        data: what is known of its data input (element type, dims).
        indices: what is known of its indices input.

    Returns:
        The alignment, and the axis to cut the data on except where every other size is known and equal.

    Raises:
        AlignmentError: ranks or attributes that describe no valid GatherElements.
    """
    assert data.shape is not None and indices.shape is not None, "RULES run on known ranks (_static_replacement)"
    assert data.rank is not None and indices.rank is not None  # the same fact, for the type checker
    alignment = gather_elements_alignment(data.rank, indices.rank, attribute(node, "axis", 0))
    axis = alignment.axes[0]
    same = all(_same_dim(a, b) for d, (a, b) in enumerate(zip(data.shape, indices.shape)) if d != axis)
    return Replacement(alignment, slice_data_except=None if same else axis)


def rule_gather_nd(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Replacement:
    """GatherND(batch_dims) with k-tuples (``ops.alignment.gather_nd_alignment``), in mode "error_nonempty"
    (ORT's GatherND checks nothing when its output is empty).

    Args:
        node: the GatherND node.
        data: what is known of its data input (element type, dims).
        indices: what is known of its indices input.

    Returns:
        The alignment, mode "error_nonempty".

    Raises:
        _NeedsRuntime: the coordinate size is not known statically (the caller aligns at run time).
        AlignmentError: ranks or attributes that describe no valid GatherND.
    """
    assert data.rank is not None and indices.shape is not None, "RULES run on known ranks (_static_replacement)"
    assert indices.rank is not None  # the same fact, for the type checker
    k = indices.shape[-1] if indices.rank else 0
    if not isinstance(k, int):
        raise _NeedsRuntime("the coordinate size (last indices dimension) is not known statically")
    alignment = gather_nd_alignment(data.rank, indices.rank, k, attribute(node, "batch_dims", 0))
    return Replacement(alignment, mode=Mode.ERROR_NONEMPTY)


@dataclass(frozen=True)
class OptInRule:
    """An entry of ``RULES`` for an op of another domain that gathers inside its kernel, rewritten only when
    the caller names it (``rewrite_model``'s ``ops``). No single alignment replaces it: ``emitter`` appends
    its replacement to a builder from the types of all its inputs, raises LeftUnchanged where it cannot,
    and returns the output's type; its own gathers are the ONNX gathers' replacements (handed to it as
    ``emit_replacement``, which needs no import of this module)."""

    domain: str
    emitter: Callable[..., TensorInfo]

    def emit(self, node: NodeProto, infos: dict[str, TensorInfo], builder: NodeBuilder) -> TensorInfo:
        """Append the replacement of ``node`` to ``builder``.

        Args:
            node: the node of this rule's op.
            infos: what is known of every value by name (the node's inputs among them).
            builder: where the replacement nodes go.

        Returns:
            What is known of the node's output.

        Raises:
            LeftUnchanged: the node cannot be replaced; the message says why.
        """
        return self.emitter(node, infos, builder, emit_replacement)


# op type -> its rule. The ONNX gathers' rules decide an alignment (TensorInfo in, Replacement out), and
# every rewrite applies them; an OptInRule only where the caller asks for its op.
RULES: dict[str, Callable[[NodeProto, TensorInfo, TensorInfo], Replacement] | OptInRule] = {
    "Gather": rule_gather,
    "GatherElements": rule_gather_elements,
    "GatherND": rule_gather_nd,
    block_quantized.OP_TYPE: OptInRule(block_quantized.DOMAIN, block_quantized.emit_gather_block_quantized),
}

# Types the bridge cannot carry but that survive a round trip through float32 exactly.
_VIA_FLOAT: dict[int, int] = {TensorProto.FLOAT16: 6, TensorProto.BFLOAT16: 13}  # type -> first opset whose Cast has it


def _type_name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type) if elem_type else "unknown"


def _equal_ranks(data: TensorInfo, indices: TensorInfo) -> tuple[TensorInfo, TensorInfo]:
    """GatherElements requires equal ranks, so a known rank tells the unknown one (sizes stay unknown)."""
    if data.rank is None and indices.rank is not None:
        data = TensorInfo(data.elem_type, (None,) * indices.rank)
    elif indices.rank is None and data.rank is not None:
        indices = TensorInfo(indices.elem_type, (None,) * data.rank)
    return data, indices


def emit_replacement(node: NodeProto, data: TensorInfo, indices: TensorInfo, builder: NodeBuilder,
                     allow_runtime: bool = True) -> str | None:
    """Append the replacement of ``node`` to ``builder``; raises LeftUnchanged when it cannot. Returns
    None for a static alignment, or what was missing (e.g. "the rank of 'x' is not known") for a
    run-time one.

    Ranks known: the static alignment of ``RULES``. A rank (or GatherND's coordinate size) unknown: the
    run-time alignment of ``runtime_alignment``, unless ``allow_runtime`` is false.

    Args:
        node: a Gather, GatherElements or GatherND node.
        data: what is known of its data input.
        indices: what is known of its indices input.
        builder: where the replacement nodes go; its last node's output is renamed to the node's output.
        allow_runtime: whether a rank known only at run time may be aligned at run time.

    Returns:
        None for a static alignment, else what was not known statically (the report's reason).

    Raises:
        LeftUnchanged: the node cannot be replaced (a type the bridge cannot carry, an opset too old, a run-time
            alignment not allowed); the message says why.
    """
    if node.op_type == "GatherElements":
        data, indices = _equal_ranks(data, indices)
    cast_to_float = data.elem_type in _VIA_FLOAT
    if cast_to_float and builder.opset < _VIA_FLOAT[data.elem_type]:
        raise LeftUnchanged(f"{_type_name(data.elem_type)} needs a Cast, which opset {builder.opset} lacks for it")
    if not cast_to_float and data.elem_type not in DATA_TYPES:
        raise LeftUnchanged(f"data type {_type_name(data.elem_type)} cannot cross the PyOp bridge")
    missing_statically = None
    try:
        replacement = _static_replacement(node, data, indices)
    except _NeedsRuntime as missing:
        missing_statically = str(missing)
        if not allow_runtime:  # e.g. for lowering, which needs static axes
            raise LeftUnchanged(f"{missing}, and the run-time alignment is off") from None
        if builder.opset < runtime_alignment.MIN_OPSET:
            raise LeftUnchanged(f"{missing}, and a run-time alignment needs opset "
                                f"{runtime_alignment.MIN_OPSET} (the model has {builder.opset})") from None
        replacement = None

    x, idx = node.input[0], node.input[1]
    if replacement is not None and replacement.slice_data_except is not None:
        assert data.rank is not None  # a static replacement was found, so both ranks are known
        x = _slice_like(builder, x, idx, replacement.slice_data_except, data.rank)
    if cast_to_float:
        x = builder.cast(x, TensorProto.FLOAT, "to_float")
    axes: list[int] | str  # static axes, or the run-time alignment's axes tensor
    squeeze: list[int] | str | None
    mode: str
    if replacement is None:
        aligned = _runtime(node, x, idx, builder)
        x, idx, axes, squeeze = aligned.data, aligned.indices, aligned.axes, aligned.output_squeeze
        output_shape = aligned.output_shape
        mode = Mode.ERROR_NONEMPTY if node.op_type == "GatherND" else Mode.ERROR
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
    if output_shape:  # below opset 13 (its zeros are sizes: see runtime_alignment)
        y = runtime_alignment.reshape(builder, y, output_shape, "restore_rank")
    if cast_to_float:
        y = builder.cast(y, data.elem_type, "from_float")
    if needs_tail:
        builder.rename_last_output(output)
    return missing_statically


def _static_replacement(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Replacement:
    if data.rank is None or indices.rank is None:
        unknown = [name for name, info in zip(node.input, (data, indices)) if info.rank is None]
        raise _NeedsRuntime(f"the rank of {', '.join(repr(n) for n in unknown)} is not known")
    try:
        rule = RULES[node.op_type]
        assert not isinstance(rule, OptInRule), "an opt-in op is emitted by OptInRule.emit, never aligned here"
        return rule(node, data, indices)
    except AlignmentError as error:
        raise LeftUnchanged(str(error)) from None


def _runtime(node: NodeProto, x: str, idx: str, builder: NodeBuilder) -> runtime_alignment.RuntimeAlignment:
    if node.op_type == "Gather":
        return runtime_alignment.gather(builder, x, idx, attribute(node, "axis", 0))
    if node.op_type == "GatherElements":
        return runtime_alignment.gather_elements(builder, x, idx, attribute(node, "axis", 0))
    return runtime_alignment.gather_nd(builder, x, idx, attribute(node, "batch_dims", 0))


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
