"""The WebNN nodes of the three single-gather plans (gather, gatherElements, gatherND), the indices prepared for
the node's mode (clamped into range, or moved to a zero slice for "zero"), and the empty output."""

from __future__ import annotations

from math import prod

import numpy as np
from onnx import NodeProto, helper, numpy_helper

from ...ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ..ir.builder import NodeBuilder
from ..lower import GENERAL
from ..lower.form_plans import CoordinatesPlan, ElementsPlan, GatherPlan, Plan
from .reshape_chains import choose_shapes, finish_at_target, reshape_chain, result_targets, view_as
from .webnn_facts import EmptyOutput, NodeFacts, WebNNLowering, indices_in_range, zero_fills
from .webnn_ops import INT32_LIMIT

# The forms a node can take, cheapest first (``LoweredNode.form``; the general one is the flat offsets)
FORM_GATHER = GATHER                     # one gather (ONNX Gather)
FORM_GATHER_ELEMENTS = GATHER_ELEMENTS   # one gatherElements, the indices expanded first where they broadcast
FORM_GATHER_ND = GATHER_ND              # one gatherND, constant batch coordinates concatenated in front
FORM_FLAT = GENERAL                      # one gather of the data as 1-D at computed flat offsets
FORM_EMPTY = "empty"                     # a static output with a size-0 dim: that empty tensor, a Constant
FORMS = (FORM_GATHER, FORM_GATHER_ELEMENTS, FORM_GATHER_ND, FORM_FLAT, FORM_EMPTY)
FOLDED_LIMIT = 1 << 20  # elements of a folded index constant; beyond, the Expand runs in the graph


def index_bounds(facts: NodeFacts) -> tuple[np.ndarray, np.ndarray]:
    """The lowest and highest valid index of each component, in the indices' type: scalars for one
    axis, else vectors along the last dimension (which holds one tuple)."""
    dims = np.array([facts.data_shape[axis] for axis in facts.axes], np.int64)
    if facts.k == 1:
        dims = dims.reshape(())
    return (-dims).astype(facts.index_dtype), (dims - 1).astype(facts.index_dtype)


def gather_index_dtype(lowering: WebNNLowering, facts: NodeFacts) -> np.dtype:
    """int32 (the index type every WebNN backend takes) wherever every index fits in it (in mode
    "zero", up to 2 dim: ``_zeroing``)."""
    largest = max(facts.data_shape) * (2 if zeroes_out_of_range(lowering, facts) else 1)
    return np.dtype(np.int32) if largest < INT32_LIMIT else facts.index_dtype


def zeroes_out_of_range(lowering: WebNNLowering, facts: NodeFacts) -> bool:
    """Mode "zero" with indices that may be out of range: on each axis the data is read as [data, data,
    a zero slice], at ``min(index, dim) + dim`` brought up to -1 (the zero slice, counted from the end):
    an index in [-dim, dim - 1] reads its element, any other the zero slice (``_prepared_indices``)."""
    return zero_fills(facts.mode) and not indices_in_range(lowering, facts)


def prepared_indices(lowering: WebNNLowering, b: NodeBuilder, facts: NodeFacts, shape: tuple[int, ...], dtype: np.dtype):
    """The indices viewed as ``shape`` (one tuple on the last dimension when k > 1), clamped into
    range (to [-dim, dim - 1]: the gathers count negatives from the end) or, in mode "zero", moved to
    [data, data, zero slice] (``_zeroing``), cast to ``dtype``: a value, or an array where the
    indices are constants. Gathers at the same indices share one copy."""
    indices = facts.node.input[1]
    low, high = index_bounds(facts)
    zeroing = zeroes_out_of_range(lowering, facts)
    if indices in lowering.constants:
        raw = lowering.constants[indices].reshape(shape)
        if zeroing:
            moved = np.maximum(np.minimum(raw, high + 1) + (high + 1), -1)
            return np.asarray(moved).astype(dtype)  # (0-d: NumPy returns a scalar)
        return np.asarray(np.minimum(np.maximum(raw, low), high)).astype(dtype)
    source = reshape_chain(lowering, indices)[-1][0]  # (each gather's own alignment reshapes it)
    key = (source, tuple(shape), dtype.str, low.tobytes(), high.tobytes(), zeroing)
    if key in lowering.prepared:  # (several gathers at the same indices: hummingbird's trees)
        return lowering.prepared[key]
    value = view_as(lowering, b, indices, shape, "indices_view")
    if zeroing:  # (min first: the Add cannot overflow)
        dims = typed_constant(b, high + 1, "dims")
        value = b.op("Add", [at_most(lowering, b, value, dims, "at_most_dim"), dims], "in_doubled_data")
        value = at_least(lowering, b, value, typed_constant(b, np.array(-1, facts.index_dtype), "minus_one"),
                               "zero_slice_from_end")
    elif not indices_in_range(lowering, facts):
        value = at_least(lowering, b, at_most(lowering, b, value, typed_constant(b, high, "highest_index"), "below_end"),
                               typed_constant(b, low, "lowest_index"), "clamped")
    if dtype != facts.index_dtype:  # exact: the values are within [-dim, 2 dim] by now
        value = b.cast(value, helper.np_dtype_to_tensor_dtype(dtype), f"indices_{dtype.name}")
    lowering.pending[key] = value
    return value


def data_read(lowering: WebNNLowering, b: NodeBuilder, facts: NodeFacts, shape: tuple[int, ...], axes: list[int]) -> str:
    """The data the form reads, viewed as ``shape``: in mode "zero" as [data, data, zero slice] on each
    of ``axes`` (positions in ``shape``; ``_zeroing``), folded for a constant. (Not ``where`` on the
    result: ORT's Where writes +0.0 for -0.0, and has no kernel for int16, uint16, uint64, bool.)"""
    name = facts.narrow_data or facts.node.input[0]
    if not zeroes_out_of_range(lowering, facts):
        return view_as(lowering, b, name, shape, "data_view")
    dtype = helper.tensor_dtype_to_np_dtype(facts.elem_type)
    source = reshape_chain(lowering, name)[-1][0]
    if source in lowering.constants and (lowering.constants.size(source) or 0) <= FOLDED_LIMIT:  # (known: a constant)
        padded = lowering.constants[source].reshape(shape)
        for axis in axes:
            zeros = np.zeros(padded.shape[:axis] + (1,) + padded.shape[axis + 1:], padded.dtype)
            padded = np.concatenate([padded, padded, zeros], axis=axis)
        return typed_constant(b, padded, "data_doubled_and_zero")
    data, padded_shape = view_as(lowering, b, name, shape, "data_view"), list(shape)
    for axis in axes:
        zeros = np.zeros(padded_shape[:axis] + [1] + padded_shape[axis + 1:], dtype)
        data = b.op("Concat", [data, data, typed_constant(b, zeros, f"zero_slice{axis}")],
                    f"data_doubled_and_zero{axis}", axis=axis)
        padded_shape[axis] = 2 * padded_shape[axis] + 1
    return data


def at_most(lowering: WebNNLowering, b: NodeBuilder, x: str, high: str, role: str) -> str:
    """min(x, high) on integers: Min from opset 12 (not Clip: ORT's WebNN EP takes float bounds only)."""
    if lowering.opset >= 12:
        return b.op("Min", [x, high], role)
    return b.op("Where", [b.op("Less", [high, x], role + "_past"), high, x], role)


def at_least(lowering: WebNNLowering, b: NodeBuilder, x: str, low: str, role: str) -> str:
    """max(x, low) on integers."""
    if lowering.opset >= 12:
        return b.op("Max", [x, low], role)
    return b.op("Where", [b.op("Less", [x, low], role + "_before"), low, x], role)


def typed_constant(b: NodeBuilder, array: np.ndarray, role: str) -> str:
    return b.op("Constant", [], role, value=numpy_helper.from_array(np.asarray(array), name=""))


def indices_value(lowering: WebNNLowering, b: NodeBuilder, clamped, role: str = "indices") -> str:
    return typed_constant(b, clamped, role) if isinstance(clamped, np.ndarray) else clamped


def gather_form(lowering: WebNNLowering, facts: NodeFacts, plan: GatherPlan) -> list[NodeProto]:
    """Gather(data without the block's other dims (size 1), indices of the block); Unfit where no shape fits."""
    axis, data_shape, logical = facts.axes[0], facts.data_shape, facts.logical
    start, end = plan.axis, plan.axis + len(plan.data_squeeze) + 1  # the block of the axis and the indices' dims
    data_view = data_shape[:start] + (data_shape[axis],) + data_shape[end:]
    canonical = logical[start:end]

    def result_shape(shape):
        return data_shape[:start] + tuple(shape) + data_shape[end:]

    def index_shape_for(shape):
        tail = len(data_shape) - end
        if (len(shape) >= start + tail and shape[:start] == data_shape[:start]
                and shape[len(shape) - tail:] == data_shape[end:]):
            middle = shape[start:len(shape) - tail]
            return middle if prod(middle) == prod(canonical) else None
        return None

    shape, target = choose_shapes(lowering, facts, canonical, result_shape, index_shape_for)
    b = NodeBuilder(lowering.opset, lowering.names, facts.node.name or "gather_multiaxis")
    data = data_read(lowering, b, facts, data_view, [start])
    indices = prepared_indices(lowering, b, facts, shape, gather_index_dtype(lowering, facts))
    result = b.op(GATHER, [data, indices_value(lowering, b, indices)], "gathered", axis=start)
    finish_at_target(lowering, b, result, result_shape(shape), target)
    return list(b.nodes)


def gather_elements_form(lowering: WebNNLowering, facts: NodeFacts, plan: ElementsPlan) -> list[NodeProto]:
    """GatherElements, the indices expanded to the data's size where they have size 1."""
    axis, data_shape, logical = plan.axis, facts.data_shape, facts.logical
    b = NodeBuilder(lowering.opset, lowering.names, facts.node.name or "gather_multiaxis")
    clamped = prepared_indices(lowering, b, facts, facts.indices_shape, gather_index_dtype(lowering, facts))
    full = tuple(data_shape[d] if d != axis else logical[d] for d in range(facts.rank))
    if tuple(facts.indices_shape) != full:
        if isinstance(clamped, np.ndarray) and prod(full) <= FOLDED_LIMIT:
            clamped = np.ascontiguousarray(np.broadcast_to(clamped, full))
        else:
            clamped = b.op("Expand", [indices_value(lowering, b, clamped), b.constant(list(full), "full_shape")],
                           "indices_expanded")
    data = data_read(lowering, b, facts, data_shape, [axis])
    result = b.op(GATHER_ELEMENTS, [data, indices_value(lowering, b, clamped)], "gathered", axis=axis)
    finish_at_target(lowering, b, result, full, result_targets(lowering, facts, flexible=False)[0])
    return list(b.nodes)


def gather_nd_form(lowering: WebNNLowering, facts: NodeFacts, plan: CoordinatesPlan) -> list[NodeProto]:
    """GatherND of coordinate tuples [batch coordinates (constant), the node's components in the data's
    order]; where the indices vary after the axes, the data's size-1 dims there are dropped (the tuples take
    those dims too, as an aten.index export aligns them). Unfit where no shape fits."""
    axes, logical, data_shape = facts.axes, facts.logical, facts.data_shape
    start, k, varying = plan.start, facts.k, plan.indices_vary_after
    data_view = data_shape[:start + k] if varying else data_shape  # (dropped: size-1 dims)
    canonical = (logical if varying else logical[:start + k]) + (k,)
    # The tuples' dims may take any shape of as many elements (the result then has it): the indices'
    # own, or one the reading reshape wants. Only the leading (batch) dims stay, as the batch
    # coordinates are laid out on them; and where the indices broadcast there, they are expanded.
    broadcast = logical[:start] != facts.out[:start]

    def result_shape(shape):
        return tuple(shape[:-1]) + data_view[start + k:]

    def index_shape_for(shape):
        tail = len(data_view) - start - k
        if len(shape) >= tail and tuple(shape[len(shape) - tail:]) == data_view[start + k:]:
            tuples = tuple(shape[:len(shape) - tail])
            if (prod(tuples) == prod(logical) and tuples[:start] == logical[:start]
                    and (not broadcast or tuples == logical[:start + k])):
                return tuples + (k,)
        return None

    shape, target = choose_shapes(lowering, facts, canonical, result_shape, index_shape_for)
    b = NodeBuilder(lowering.opset, lowering.names, facts.node.name or "gather_multiaxis")
    # int64: the one index type of ONNX's GatherND (ORT's WebNN EP runs int64 as int32 on a backend without it)
    clamped = prepared_indices(lowering, b, facts, shape, np.dtype(np.int64))
    order = sorted(range(k), key=lambda j: axes[j])  # the components in the data's order
    if order != list(range(k)):
        if isinstance(clamped, np.ndarray):
            clamped = clamped[..., order]
        else:
            clamped = b.op("Gather", [clamped, typed_constant(b, np.array(order, np.int32), "data_order")],
                           "coordinates_in_data_order", axis=len(shape) - 1)
    if start:
        tuple_dims = facts.out[:start] + tuple(shape[start:-1])
        clamped = with_batch_coordinates(lowering, b, facts, clamped, tuple_dims)
        shape = tuple_dims + (start + k,)
    data = data_read(lowering, b, facts, data_view, list(range(start, start + k)))
    result = b.op(GATHER_ND, [data, indices_value(lowering, b, clamped)], "gathered")
    finish_at_target(lowering, b, result, result_shape(shape), target)
    return list(b.nodes)


def emit_plan(lowering: WebNNLowering, facts: NodeFacts, plan: Plan) -> list[NodeProto]:
    """The WebNN nodes of one of ``form_plans.WEBNN_TARGET``'s plans; Unfit where no shape of it fits."""
    match plan:
        case GatherPlan():
            return gather_form(lowering, facts, plan)
        case ElementsPlan():
            return gather_elements_form(lowering, facts, plan)
        case CoordinatesPlan():
            return gather_nd_form(lowering, facts, plan)
    raise TypeError(f"not a WebNN plan: {plan!r}")  # (ONNX's NDPlan: batch_dims, which WebNN has not)


def with_batch_coordinates(lowering: WebNNLowering, b: NodeBuilder, facts: NodeFacts, components, tuple_dims: tuple[int, ...]):
    """The coordinate tuples [the output position on each leading dim (0 where the data has size 1
    there), the components]: a constant concatenated in front (both folded where the indices are
    constants), the components expanded first over leading dims where the indices have size 1."""
    start, k = min(facts.axes), facts.k
    dtype = np.dtype(np.int64)  # GatherND's index type
    grids = np.meshgrid(*[np.arange(size) if facts.data_shape[d] != 1 else np.zeros(size, np.int64)
                          for d, size in enumerate(facts.out[:start])], indexing="ij")
    batch = np.stack(grids, axis=-1).astype(dtype).reshape(
        facts.out[:start] + (1,) * (len(tuple_dims) - start) + (start,))
    full = tuple_dims + (start,)
    if isinstance(components, np.ndarray) and prod(tuple_dims) * (start + k) <= FOLDED_LIMIT:
        return np.concatenate([np.broadcast_to(batch, full), np.broadcast_to(components, tuple_dims + (k,))],
                              axis=-1)
    if isinstance(components, np.ndarray):
        components = typed_constant(b, components, "components")
    if tuple(facts.logical[:start]) != tuple(facts.out[:start]):
        components = b.op("Expand", [components, b.constant(list(tuple_dims) + [k], "tuple_shape")],
                          "components_expanded")
    if prod(full) <= FOLDED_LIMIT:
        batch_name = typed_constant(b, np.ascontiguousarray(np.broadcast_to(batch, full)), "batch_coordinates")
    else:
        batch_name = b.op("Expand", [typed_constant(b, batch, "batch_coordinates_grid"),
                                     b.constant(list(full), "batch_shape")], "batch_coordinates")
    return b.op("Concat", [batch_name, components], "coordinates", axis=len(tuple_dims))


def empty_constant(lowering: WebNNLowering, node: NodeProto, empty: EmptyOutput) -> NodeProto:
    """The output, empty, as a constant: not the standard lowering's Expand from size 1 to 0, which
    ORT's optimizer removes (ExpandElimination takes a target 0 for 1) and OpenVINO ignores or dies on."""
    value = helper.make_tensor("", empty.elem_type, list(empty.dims), [])
    return helper.make_node("Constant", [], [node.output[0]], name=lowering.names.fresh(f"{node.name or 'gather_multiaxis'}/empty"),
                            value=value)
