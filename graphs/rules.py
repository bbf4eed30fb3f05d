"""One rewrite rule per ONNX gather: match -> rank alignment -> GatherMultiaxis.

A rule only decides the *alignment*: which size-1 dimensions to insert into the data and the
indices, which axes GatherMultiaxis reads, and which size-1 dimensions to drop from its output. It
needs ranks (and GatherND's coordinate size), never concrete sizes, so symbolic dimensions are fine.
``emit_replacement`` turns an alignment into nodes, shared by all rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from onnx import NodeProto, TensorProto, helper

from ..ops import DATA_TYPES
from .builder import INT64_MAX, NodeBuilder

Dim = int | str | None  # a concrete size, a symbolic name, or unknown


@dataclass(frozen=True)
class TensorInfo:
    """What shape inference knows about a tensor: element type (0 if unknown) and shape."""

    elem_type: int
    shape: tuple[Dim, ...] | None  # None: rank unknown

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


class LeftUnchanged(Exception):
    """The node is kept as it is; the message says why."""


@dataclass(frozen=True)
class Alignment:
    """How one gather maps onto GatherMultiaxis (all positions are dimension numbers)."""

    axes: tuple[int, ...]
    data_unsqueeze: tuple[int, ...] = ()     # Unsqueeze axes for the data
    indices_unsqueeze: tuple[int, ...] = ()  # Unsqueeze axes for the indices
    output_squeeze: tuple[int, ...] = ()     # Squeeze axes for the GatherMultiaxis output
    slice_data_except: int | None = None     # GatherElements: cut data to the indices' extents but on this axis
    mode: str = "error"                      # "error_nonempty" for GatherND: ORT checks nothing when nothing is read


def _attribute(node: NodeProto, name: str, default: int) -> int:
    for attribute in node.attribute:
        if attribute.name == name:
            return helper.get_attribute_value(attribute)
    return default


def _normalized_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise LeftUnchanged(f"{what} {axis} is out of range for data rank {rank}")
    return axis % rank


def _same_dim(a: Dim, b: Dim) -> bool:
    # Only concrete sizes: ORT does not enforce that equal symbolic names have equal sizes at run time.
    return isinstance(a, int) and a == b


def align_gather(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Alignment:
    """Gather: output = data.shape[:axis] + indices.shape + data.shape[axis+1:].

    The indices dimensions are lined up in front of the data axis: q-1 ones are inserted into the data
    before the axis, the indices get ``axis`` leading and ``r-axis-1`` trailing ones, and the read axis
    is the last indices dimension. A scalar index reads through a size-1 axis that is squeezed away.
    """
    r, q = data.rank, indices.rank
    if r == 0:
        raise LeftUnchanged("Gather of a scalar")
    axis = _normalized_axis(_attribute(node, "axis", 0), r, "axis")
    if q == 0:
        return Alignment(axes=(axis,), indices_unsqueeze=tuple(range(r)), output_squeeze=(axis,))
    return Alignment(axes=(axis + q - 1,), data_unsqueeze=tuple(range(axis, axis + q - 1)),
                     indices_unsqueeze=tuple(range(axis)) + tuple(range(axis + q, r + q - 1)))


def align_gather_elements(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Alignment:
    """GatherElements maps directly; indices smaller than the data on other dimensions (which ORT
    accepts) need the data cut to the indices' extents first, unless both sizes are known and equal."""
    r = data.rank
    if indices.rank != r:
        raise LeftUnchanged(f"GatherElements with data rank {r} and indices rank {indices.rank}")
    if r == 0:
        raise LeftUnchanged("GatherElements of a scalar")
    axis = _normalized_axis(_attribute(node, "axis", 0), r, "axis")
    same = all(_same_dim(a, b) for d, (a, b) in enumerate(zip(data.shape, indices.shape)) if d != axis)
    return Alignment(axes=(axis,), slice_data_except=None if same else axis)


def align_gather_nd(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Alignment:
    """GatherND with b batch dims and k-tuples: output = indices.shape[:-1] + data.shape[b+k:].

    Aligned layout: b batch dims, then an index region of M = max(k, q-1-b) dims (the data's k indexed
    dims or the indices' q-1-b index dims, each padded with ones), then the data's T = r-b-k trailing
    dims. The k-tuples already sit in the last indices dimension, which must be a padding one; when
    there is none (T = 0, q-1-b >= k) one trailing dimension is added and squeezed afterwards.
    """
    r, q = data.rank, indices.rank
    b = _attribute(node, "batch_dims", 0)
    k = indices.shape[-1] if q else None
    if q == 0:
        raise LeftUnchanged("GatherND with scalar indices")
    if not isinstance(k, int):
        raise LeftUnchanged("the coordinate size (last indices dimension) is not known statically")
    if k == 0:
        raise LeftUnchanged("GatherND with empty coordinate tuples (last indices dimension 0)")
    if not (0 <= b < min(r, q) and b + k <= r):
        raise LeftUnchanged(f"batch_dims {b} and coordinate size {k} do not fit data rank {r}, indices rank {q}")
    trailing = r - b - k
    region = max(k, q - 1 - b)
    aligned_rank = b + region + trailing
    data_unsqueeze = tuple(range(b + k, b + region))
    output_squeeze = tuple(range(q - 1, b + region))
    if aligned_rank < q:  # no padding dimension left for the folded coordinates
        data_unsqueeze += (aligned_rank,)
        output_squeeze += (aligned_rank,)
        aligned_rank += 1
    return Alignment(axes=tuple(range(b, b + k)), data_unsqueeze=data_unsqueeze,
                     indices_unsqueeze=tuple(range(q - 1, aligned_rank - 1)), output_squeeze=output_squeeze,
                     mode="error_nonempty")


RULES: dict[str, Callable[[NodeProto, TensorInfo, TensorInfo], Alignment]] = {
    "Gather": align_gather,
    "GatherElements": align_gather_elements,
    "GatherND": align_gather_nd,
}

# Types the bridge cannot carry but that survive a round trip through float32 exactly.
_VIA_FLOAT = {TensorProto.FLOAT16: 6, TensorProto.BFLOAT16: 13}  # type -> first opset whose Cast has it


def _type_name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type) if elem_type else "unknown"


def _equal_ranks(data: TensorInfo, indices: TensorInfo) -> tuple[TensorInfo, TensorInfo]:
    """GatherElements requires equal ranks, so a known rank tells the unknown one (sizes stay unknown)."""
    if data.rank is None and indices.rank is not None:
        data = TensorInfo(data.elem_type, (None,) * indices.rank)
    elif indices.rank is None and data.rank is not None:
        indices = TensorInfo(indices.elem_type, (None,) * data.rank)
    return data, indices


def emit_replacement(node: NodeProto, data: TensorInfo, indices: TensorInfo, builder: NodeBuilder) -> None:
    """Append the replacement of ``node`` to ``builder``; raises LeftUnchanged when it cannot."""
    if node.op_type == "GatherElements":
        data, indices = _equal_ranks(data, indices)
    if data.rank is None or indices.rank is None:
        unknown = [name for name, info in zip(node.input, (data, indices)) if info.rank is None]
        raise LeftUnchanged(f"the rank of {', '.join(repr(n) for n in unknown)} is not known")
    cast_to_float = data.elem_type in _VIA_FLOAT
    if cast_to_float and builder.opset < _VIA_FLOAT[data.elem_type]:
        raise LeftUnchanged(f"{_type_name(data.elem_type)} needs a Cast, which opset {builder.opset} lacks for it")
    if not cast_to_float and data.elem_type not in DATA_TYPES:
        raise LeftUnchanged(f"data type {_type_name(data.elem_type)} cannot cross the PyOp bridge")
    alignment = RULES[node.op_type](node, data, indices)

    x, idx = node.input[0], node.input[1]
    if alignment.slice_data_except is not None:
        x = _slice_like(builder, x, idx, alignment.slice_data_except, data.rank)
    if cast_to_float:
        x = builder.cast(x, TensorProto.FLOAT, "to_float")
    x = builder.unsqueeze(x, list(alignment.data_unsqueeze), "align_data")
    idx = builder.unsqueeze(idx, list(alignment.indices_unsqueeze), "align_indices")
    output = node.output[0]
    needs_tail = bool(alignment.output_squeeze) or cast_to_float
    gathered = builder.names.fresh(f"{builder.prefix}/gathered") if needs_tail else output
    builder.gather_multiaxis(x, idx, list(alignment.axes), gathered, node.name or builder.prefix, alignment.mode)
    y = builder.squeeze(gathered, list(alignment.output_squeeze), "restore_rank")
    if cast_to_float:
        y = builder.cast(y, data.elem_type, "from_float")
    if needs_tail:
        builder.rename_last_output(output)


def _slice_like(builder: NodeBuilder, data: str, indices: str, axis: int, rank: int) -> str:
    """data[:i0, :i1, ...] with the indices' extents on every dimension but ``axis``."""
    shape = builder.shape(indices, "indices_shape")
    parts = []
    if axis > 0:
        parts.append(builder.slice(shape, builder.constant([0], "head_start"), builder.constant([axis], "head_end"),
                                   builder.constant([0], "head_axes"), "shape_head"))
    parts.append(builder.constant([INT64_MAX], "whole_axis"))
    if axis < rank - 1:
        parts.append(builder.slice(shape, builder.constant([axis + 1], "tail_start"),
                                   builder.constant([rank], "tail_end"), builder.constant([0], "tail_axes"),
                                   "shape_tail"))
    ends = builder.concat(parts, "slice_ends")
    return builder.slice(data, builder.constant([0] * rank, "slice_starts"), ends,
                         builder.constant(list(range(rank)), "slice_axes"), "fit_data")
