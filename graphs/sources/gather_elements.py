"""ONNX GatherElements(axis): equal ranks, one axis read (``ops.alignment.gather_elements_alignment``)."""

from __future__ import annotations

from onnx import NodeProto

from ...ops.alignment import GATHER_ELEMENTS, gather_elements_alignment
from ...ops.contract import Mode
from ..ranks.tensor_info import Dim, TensorInfo
from ..ir.builder import INT64_MAX, NodeBuilder
from ..ir.walk import attribute
from ..ranks.rank_rules import elem_type_of, known, ranked
from .run_time_shapes import RuntimeAlignment, ShapeArithmetic
from .source_gather import Replacement, Rewrite, SourceGather


def _same_dim(a: Dim, b: Dim) -> bool:
    # Only concrete sizes: ORT does not enforce that equal symbolic names have equal sizes at run time.
    return isinstance(a, int) and a == b


def rule_gather_elements(node: NodeProto, data: TensorInfo, indices: TensorInfo) -> Replacement:
    """Indices smaller than the data on other dimensions (which ORT accepts) need the data cut to the indices'
    extents first, unless both sizes are known and equal."""
    assert data.shape is not None and indices.shape is not None, "RULES run on known ranks (_static_replacement)"
    assert data.rank is not None and indices.rank is not None  # the same fact, for the type checker
    alignment = gather_elements_alignment(data.rank, indices.rank, attribute(node, "axis", 0))
    axis = alignment.axes[0]
    same = all(_same_dim(a, b) for d, (a, b) in enumerate(zip(data.shape, indices.shape)) if d != axis)
    return Replacement(alignment, slice_data_except=None if same else axis)


def equal_ranks(data: TensorInfo, indices: TensorInfo) -> tuple[TensorInfo, TensorInfo]:
    """GatherElements requires equal ranks, so a known rank tells the unknown one (sizes stay unknown)."""
    if data.rank is None and indices.rank is not None:
        data = TensorInfo(data.elem_type, (None,) * indices.rank)
    elif indices.rank is None and data.rank is not None:
        indices = TensorInfo(indices.elem_type, (None,) * data.rank)
    return data, indices


def rank_rule(node, inputs, constants):
    """The indices' rank (the data's when the indices' is unknown), of the data's type."""
    chosen = inputs[1] if known(inputs[1]) else inputs[0]
    return [ranked(elem_type_of(inputs[0]), chosen.rank)] if known(chosen) else None


def gather_elements(builder: NodeBuilder, data: str, indices: str, axis: int) -> RuntimeAlignment:
    """GatherElements' alignment at run time: the data cut to the indices' extents except on ``axis``."""
    m = ShapeArithmetic(builder)
    r = m.rank(indices, "rank")
    a = m.axis(axis, r, "axis")
    dims = m.range(m.const(0, "zero"), r, "dims")
    indices_shape = builder.shape(indices, "indices_shape")
    on_axis = builder.op("Equal", [dims, a], "on_axis")
    ends = builder.op("Where", [on_axis, m.const(INT64_MAX, "whole_axis"), indices_shape], "slice_ends")
    starts = builder.op("Sub", [indices_shape, indices_shape], "slice_starts")
    data = builder.slice(data, starts, ends, dims, "fit_data")
    return RuntimeAlignment(data, indices, m.vector(a, "axes"), None)


def align_at_run_time(builder: NodeBuilder, data: str, indices: str, node: NodeProto) -> RuntimeAlignment:
    """GatherElements' run-time alignment."""
    return gather_elements(builder, data, indices, attribute(node, "axis", 0))


SOURCE = SourceGather("", GATHER_ELEMENTS, Rewrite.DEFAULT, first_opset=11, mode=Mode.ERROR,
                      align=rule_gather_elements, align_at_run_time=align_at_run_time, complete_ranks=equal_ranks,
                      rank_rule=rank_rule, recorded_attributes=("axis",))

__all__ = ["SOURCE", "equal_ranks", "gather_elements", "rank_rule", "rule_gather_elements"]
