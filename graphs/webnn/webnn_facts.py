"""What is static about a GatherMultiaxis node for the WebNN target, the lowering's state, and the value range
of an integer tensor (through constants, gathers, reshapes, comparisons and arithmetic)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import assert_never

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper

from ...ops.contract import (GatherShapeError, Mode, OutOfRange, is_gather_multiaxis,
                             logical_indices_dims, normalize_axes, output_dims)
from ...ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ..lower.ort_guards import possibly_string
from ..ir.builder import NameScope
from ..ir.constant_view import ConstantView
from ..ir.walk import ONNX_DOMAINS, all_names, attribute, default_opset, names_read
from ..lower import LowerReport
from ..lower.general_form import NotLowered, node_mode
from .static_shapes import static_infos
from .webnn_ops import MAX_RANK, MIN_OPSET, NO_WEBNN_TYPES, RESHAPES

# Ops whose output holds only values of their first input
RANGE_KEEPING = RESHAPES | {GATHER, GATHER_ELEMENTS, GATHER_ND, "Expand", "Tile", "Transpose", "Slice"}
INTEGER_LIMITS = {t: (int(np.iinfo(d).min), int(np.iinfo(d).max)) for t, d in (
    (TensorProto.INT8, np.int8), (TensorProto.INT16, np.int16), (TensorProto.INT32, np.int32),
    (TensorProto.INT64, np.int64), (TensorProto.UINT8, np.uint8), (TensorProto.UINT16, np.uint16),
    (TensorProto.UINT32, np.uint32), (TensorProto.UINT64, np.uint64))} | {TensorProto.BOOL: (0, 1)}
COMPARISONS = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf"}


@dataclass
class NodeFacts:
    """One GatherMultiaxis node with everything static about it."""

    node: NodeProto
    mode: Mode
    data_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    axes: tuple[int, ...]         # normalized, in the node's order (the order of the tuples' components)
    logical: tuple[int, ...]      # the indices' shape with each tuple folded to one element
    out: tuple[int, ...]
    elem_type: int
    index_dtype: np.dtype
    # The float16 round trip (the rewrite's exact Casts around the node: the custom op has no float16):
    # the float16 value the data is a Cast of, and the Cast back that alone reads the output (through
    # at most one reshape). The single-gather forms gather the float16 value itself (WebNN has float16).
    narrow_data: str | None = None
    narrow_cast: NodeProto | None = None

    @property
    def rank(self) -> int:
        return len(self.data_shape)

    @property
    def k(self) -> int:
        return len(self.axes)


class NotLoweredForWebNN(Exception):
    """The node has no WebNN form; the message says why."""


class EmptyOutput(Exception):
    """The node's static output shape has a size-0 dim: the result is that empty tensor, whatever the inputs."""

    def __init__(self, elem_type: int, dims: tuple[int, ...]):
        super().__init__(f"empty output {list(dims)}")
        self.elem_type, self.dims = elem_type, dims


class WebNNLowering:
    """The state of one model's WebNN lowering: its static facts, and what the nodes lowered so far changed."""

    def __init__(self, model: ModelProto, report: LowerReport, external_data_folder: str | os.PathLike | None = None):
        self.opset = default_opset(model)
        self.names = NameScope(all_names(model))
        self.infos = static_infos(model)
        # (read on demand: a table that is only gathered from is never loaded)
        self.constants = ConstantView(model.graph, external_data_folder=external_data_folder)
        self.report = report
        self.freed: set[str] = set()
        self.absorbed: set[str] = set()  # outputs of reshaping nodes a lowered node now writes itself
        self.producers = {name: node for node in model.graph.node for name in node.output}
        self.main_readers: dict[str, list[NodeProto]] = {}
        for node in model.graph.node:
            for name in node.input:
                self.main_readers.setdefault(name, []).append(node)
        self.read_count: dict[str, int] = {}
        for name in names_read(model.graph):  # subgraphs' reads of outer names too
            self.read_count[name] = self.read_count.get(name, 0) + 1
        self.graph_outputs = {value.name for value in model.graph.output}
        self.ranges: dict[str, tuple[int, int] | None] = {}
        # The indices as a form reads them (viewed, clamped, cast), by (indices, shape, type, bounds): one
        # for all the gathers at the same indices; pending until the node that made them is lowered
        self.prepared: dict[tuple, str] = {}
        self.pending: dict[tuple, str] = {}


def static_shape(lowering: WebNNLowering, name: str) -> tuple[int, ...] | None:
    info = lowering.infos.get(name)
    if info is None or info.shape is None or not all(isinstance(d, int) for d in info.shape):
        return None
    return tuple(info.shape)


def required_shape(lowering: WebNNLowering, name: str, what: str) -> tuple[int, ...]:
    shape = static_shape(lowering, name)
    if shape is None:
        raise NotLoweredForWebNN(f"the {what}'s shape is not static (WebNN graphs have static shapes)")
    return shape


def node_facts(lowering: WebNNLowering, node: NodeProto) -> NodeFacts:
    if lowering.opset < MIN_OPSET:
        raise NotLoweredForWebNN(f"the WebNN target needs opset {MIN_OPSET} (the model has {lowering.opset})")
    try:
        mode = node_mode(node)
    except NotLowered as error:  # no mode, or an unknown one: the node is left, as plain lower leaves it
        raise NotLoweredForWebNN(str(error)) from None
    data, indices = node.input[0], node.input[1]
    data_shape, indices_shape = required_shape(lowering, data, "data"), required_shape(lowering, indices, "indices")
    if node.input[2] not in lowering.constants:
        raise NotLoweredForWebNN("its axes are not a constant")
    elem_type = lowering.infos[data].elem_type
    if elem_type in NO_WEBNN_TYPES:
        raise NotLoweredForWebNN(f"WebNN has no {NO_WEBNN_TYPES[elem_type]} tensors")
    if possibly_string(elem_type):
        raise NotLoweredForWebNN("the input's element type is not known (it may be string, which WebNN has not)")
    raw_axes = [int(a) for a in lowering.constants[node.input[2]].reshape(-1)]
    try:
        out = output_dims(data_shape, indices_shape, raw_axes)
        axes = normalize_axes(raw_axes, len(data_shape))
        logical = logical_indices_dims(indices_shape, len(axes))
    except GatherShapeError as error:
        raise NotLoweredForWebNN(f"its shapes break the operator's rule: {error}") from None
    if 0 in out:  # whatever the rank: no gather to run
        raise EmptyOutput(elem_type, tuple(out))
    rank = len(data_shape)
    if rank > MAX_RANK:
        raise NotLoweredForWebNN(f"rank {rank} > {MAX_RANK}, the ranks every WebNN backend supports")
    if 0 in data_shape or 0 in indices_shape:
        raise NotLoweredForWebNN("a size-0 dimension (WebNN tensors have none)")
    index_dtype = helper.tensor_dtype_to_np_dtype(lowering.infos[indices].elem_type)
    return NodeFacts(node, mode, data_shape, indices_shape, axes, tuple(logical), tuple(out), elem_type,
                 np.dtype(index_dtype))


def indices_in_range(lowering: WebNNLowering, facts: NodeFacts) -> bool:
    """Whether every value the indices can hold is a valid index of every axis (``_value_range``)."""
    bounds = value_range(lowering, facts.node.input[1])
    smallest = min(facts.data_shape[axis] for axis in facts.axes)
    return bounds is not None and -smallest <= bounds[0] and bounds[1] <= smallest - 1


def value_range(lowering: WebNNLowering, name: str, depth: int = 0) -> tuple[int, int] | None:
    """The lowest and highest value the integer tensor ``name`` can hold, where the graph decides them
    whatever its inputs: constants, and what gathers, reshapes, Where, Concat, Add, Sub, Mul, Min, Max,
    ArgMax... make of them (a gather's output holds values of its data). None where not known."""
    if name in lowering.ranges:
        return lowering.ranges[name]
    lowering.ranges[name] = None  # (a cycle, in a malformed graph, stays unknown)
    bounds = computed_range(lowering, name, depth) if depth < 64 else None
    info = lowering.infos.get(name)
    if bounds is not None and info is not None and info.elem_type in INTEGER_LIMITS:
        low, high = INTEGER_LIMITS[info.elem_type]
        if not low <= bounds[0] <= bounds[1] <= high:  # it would wrap around at run time
            bounds = None
    elif bounds is not None:
        bounds = None  # not an integer tensor (a float's range is not its values' after a Cast)
    lowering.ranges[name] = bounds
    return bounds


def computed_range(lowering: WebNNLowering, name: str, depth: int) -> tuple[int, int] | None:
    if name in lowering.constants:
        dtype = lowering.constants.dtype(name)
        if dtype is None or dtype.kind not in "iub" or lowering.constants.size(name) == 0:
            return None  # (decided from the proto: a float table is never loaded here)
        array = lowering.constants[name]
        return int(array.min()), int(array.max())
    node = lowering.producers.get(name)
    if node is None:
        return None
    ranges = [value_range(lowering, i, depth + 1) if i else None for i in node.input]
    if is_gather_multiaxis(node):  # the other GatherMultiaxis nodes
        zero = reads_zero(attribute(node, "mode"))
        return None if ranges[0] is None else range_union(ranges[0], (0, 0)) if zero else ranges[0]
    if node.domain not in ONNX_DOMAINS:
        return None
    op = node.op_type
    if op in COMPARISONS:
        return 0, 1
    if op in RANGE_KEEPING or op == "Cast":  # (a Cast's output type is checked by the caller)
        return ranges[0]
    if op == "Where":
        return range_union(ranges[1], ranges[2])
    if op in ("Concat", "Min", "Max") and (not ranges or None in ranges):
        return None
    if op == "Concat":
        return functools.reduce(range_union, ranges)
    if op in ("Min", "Max"):
        pick = min if op == "Min" else max
        return pick(r[0] for r in ranges if r is not None), pick(r[1] for r in ranges if r is not None)
    if op in ("Add", "Sub", "Mul") and len(ranges) == 2 and None not in ranges:
        (a, b), (c, d) = [r for r in ranges if r is not None]  # (None is not in ranges)
        if op == "Add":
            return a + c, b + d
        if op == "Sub":
            return a - d, b - c
        products = (a * c, a * d, b * c, b * d)
        return min(products), max(products)
    if op == "Neg" and ranges[0] is not None:
        return -ranges[0][1], -ranges[0][0]
    if op in ("ArgMax", "ArgMin"):
        shape = static_shape(lowering, node.input[0])
        if shape:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            return 0, shape[axis % len(shape)] - 1
    return None


def range_union(first: tuple[int, int] | None, second: tuple[int, int] | None) -> tuple[int, int] | None:
    return None if first is None or second is None else (min(first[0], second[0]), max(first[1], second[1]))


def zero_fills(mode: Mode) -> bool:
    """Whether ``mode`` reads 0 at an out-of-range index (the others raise or clamp: values of the data only)."""
    match mode.out_of_range:
        case OutOfRange.ZERO:
            return True
        case OutOfRange.RAISE | OutOfRange.CLAMP:
            return False
        case unknown:
            assert_never(unknown)


def reads_zero(mode: object) -> bool:
    """``zero_fills`` of a node's ``mode`` attribute; False for a missing or unknown one."""
    try:
        return zero_fills(Mode(mode))
    except (ValueError, TypeError):
        return False
