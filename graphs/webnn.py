"""The WebNN target: GatherMultiaxis lowered to ops that map one-to-one onto WebNN, and a check of which
nodes of a model fall outside what ONNX Runtime's WebNN execution provider runs.

WebNN graphs have static shapes, so the lowering needs every input shape fixed (the model's own static
dims, or ``input_shapes``); shape arithmetic is then folded to constants. With every dim static, each
GatherMultiaxis node takes the first of these forms that computes it (``FORMS``; the report gives each
node's ``form``, and for the general one the reason no single gather fits):

1. ``Gather``: one axis, and off the axis the indices vary (size > 1) only on dims where the data has
   size 1, all in one block of adjacent dims with the axis. One ``gather`` of the data without those
   dims (a Reshape, where no value it is already a reshape of has that shape) at the indices of the block.
2. ``GatherElements``: one axis, and off the axis the indices have the data's size or size 1. One
   ``gatherElements``, the indices first expanded to the data's size (``expand``) where they have size 1.
3. ``GatherND``: the axes are one block of adjacent dims, and after it the indices have size 1 or the
   data has (then dropped: the tuples take those dims too, as dynamo's aten.index aligns them). One
   ``gatherND`` (no batch_dims: WebNN has none) at coordinate tuples: the output position on each dim
   before the block (a constant, 0 where the data has size 1; ``concat`` in front of the components),
   then the node's components in the data's order (a constant permutation, ``gather``, where the axes
   are not ascending).
4. ``general``, flat offsets: one ``gather`` of the data reshaped to 1-D, at offsets computed from the
   indices, ``sum_j c_j * stride(axes[j]) + sum_{d not in axes} iota_d * stride(d)`` (each component made
   non-negative and kept in range with ``where``; ``iota_d`` a constant ``[0, ..., out_d - 1]`` along d,
   stride 0 where the data has size 1). Every tensor has the output's rank or less.

An output whose static shape has a size-0 dim is that empty tensor, a ``Constant`` (``empty``): WebNN has
no empty tensors anyway, and the standard lowering's ``Expand`` from size 1 to 0 is removed by ORT's
optimizer (it takes a target 0 for 1) and ignored, or fatal, on OpenVINO.

In the first three forms the indices' tuple dims may take any shape of as many elements: where the
indices are a reshape of a value of another shape (the rewrite's alignment), or the one node reading
the output reshapes it (the rewrite's restoring Squeeze), the form reads and writes those shapes
directly, so ``rewrite`` then ``lower --target webnn`` of a Gather, GatherElements or GatherND gives back
one gather. Indices are int32 (the index type every WebNN backend takes) for ``gather`` and
``gatherElements``; int64 for ``gatherND``, the one index type of ONNX's GatherND (ORT's WebNN EP runs
int64 values as int32 on a backend without int64). Constant indices are folded (view, clamp, cast,
permutation, batch coordinates) into one constant.

Modes: WebNN cannot raise. ``clamp`` is exact: the indices are clamped to [-dim, dim - 1] (``min`` and
``max`` with constant bounds: not ``clamp``, whose bounds ORT's WebNN EP reads as floats only) and the
gathers count negatives from the end, the map Chromium's backends apply. ``zero``: on each axis the
data is read as [data, data, a zero slice] (``concat``; folded for a constant) at ``max(min(index, dim) +
dim, -1)``: an index in [-dim, dim - 1] reads its element, any other the zero slice (-1 counts from the
end). Not ``where`` on the result: ORT's Where writes +0.0 for -0.0 and has no int16, uint16, uint64 or
bool kernel; the flat form points out-of-range offsets at a zero element appended to the flat data.
``error`` and
``error_nonempty`` are lowered as ``clamp``: bit-identical to ORT wherever every index is in range; where
one is not, ORT raises and the WebNN model returns the clamped read, as Chromium's backends do (the
README's table "Out-of-range indices"). Where the indices' values are in range whatever the model's
inputs (a value range through constants, gathers, reshapes, comparisons, Cast, Where, Concat, Add, Sub,
Mul, Min, Max, ArgMax: hummingbird's tree traversals), nothing is clamped or masked; gathers at the same
indices share one clamped, cast copy.

``webnn_check`` lists each node that ORT's WebNN EP would not take (its op table, onnxruntime-web 1.22's
js/web/docs/webnn-operators.md, and the constraints stated there), and each value whose rank or type
WebNN does not guarantee.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass, field
from typing import ClassVar
from math import prod
from typing import cast

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from ..ops.contract import DOMAIN, OP_TYPE, GatherShapeError, Mode, logical_indices_dims, normalize_axes, output_dims
from ..ops.kernel import gather_multiaxis
from .ir.builder import NameScope, NodeBuilder
from .lower.ort_guards import check_emitted, possibly_string
from .ranks.tensor_info import graph_infos
from .ranks.shape_inference import inferred
from .ranks.typing_copy import typing_copy
from .lower import GENERAL, LoweredNode, LowerReport, is_gather_multiaxis, lower_model, unname_replaced_dims
from .passes import GraphScope, NotChanged, Visit, run_pass
from .lower.general_form import NotLowered, node_mode
from .ir.dead_nodes import remove_dead
from .ir.walk import (ONNX_DOMAINS, all_names, attribute, default_opset, holds_subgraph, names_read,
                      node_holders, round_trip_cast)
from .ir.constant_view import ConstantView

MIN_OPSET = 11  # WebNN's gatherElements and gatherND map from ONNX opset 11; Where/Less on int64 from 9
MAX_RANK = 5    # the ranks every WebNN backend supports
# ONNX op -> WebNN op, from ORT's WebNN EP table (onnxruntime-web 1.22, js/web/docs/webnn-operators.md)
WEBNN_OPS = {
    "Abs": "abs", "Add": "add", "And": "logicalAnd", "ArgMax": "argMax", "ArgMin": "argMin",
    "AveragePool": "averagePool2d", "BatchNormalization": "batchNormalization", "Cast": "cast", "Ceil": "ceil",
    "Clip": "clamp", "Concat": "concat", "Conv": "conv2d", "ConvTranspose": "convTranspose2d", "Cos": "cos",
    "CumSum": "cumulativeSum", "Div": "div", "DequantizeLinear": "dequantizeLinear", "Dropout": "identity",
    "Einsum": "matmul", "Elu": "elu", "Equal": "equal", "Erf": "erf", "Exp": "exp", "Expand": "expand",
    "Flatten": "reshape", "Floor": "floor", "Gather": "gather", "GatherElements": "gatherElements",
    "GatherND": "gatherND", "Gelu": "gelu", "Gemm": "gemm", "GlobalAveragePool": "averagePool2d",
    "GlobalMaxPool": "maxPool2d", "GlobalLpPool": "l2Pool2d", "Greater": "greater",
    "GreaterOrEqual": "greaterOrEqual", "GRU": "gru", "HardSigmoid": "hardSigmoid", "HardSwish": "hardSwish",
    "Identity": "identity", "InstanceNormalization": "instanceNormalization",
    "LayerNormalization": "layerNormalization", "LeakyRelu": "leakyRelu", "Less": "lesser",
    "LessOrEqual": "lesserOrEqual", "Log": "log", "LpPool": "l2Pool2d", "LRN": "averagePool2d", "LSTM": "lstm",
    "MatMul": "matmul", "Max": "max", "MaxPool": "maxPool2d", "Min": "min", "Mul": "mul", "Neg": "neg",
    "Not": "logicalNot", "Or": "logicalOr", "Pad": "pad", "Pow": "pow", "PRelu": "prelu",
    "QuantizeLinear": "quantizeLinear", "Reciprocal": "reciprocal", "ReduceL1": "reduceL1", "ReduceL2": "reduceL2",
    "ReduceLogSum": "reduceLogSum", "ReduceLogSumExp": "reduceLogSumExp", "ReduceMax": "reduceMax",
    "ReduceMean": "reduceMean", "ReduceMin": "reduceMin", "ReduceProd": "reduceProduct", "ReduceSum": "reduceSum",
    "ReduceSumSquare": "reduceSumSquare", "Relu": "relu", "Reshape": "reshape", "Resize": "resample2d",
    "ScatterElements": "scatterElements", "ScatterND": "scatterND", "Shape": "slice", "Sigmoid": "sigmoid",
    "Sign": "sign", "Softplus": "softplus", "Softsign": "softsign", "Sin": "sin", "Slice": "slice",
    "Softmax": "softmax", "Split": "split", "Sqrt": "sqrt", "Squeeze": "reshape", "Sub": "sub", "Tan": "tan",
    "Tanh": "tanh", "Tile": "tile", "Transpose": "transpose", "Trilu": "triangular", "Unsqueeze": "reshape",
    "Where": "where", "Xor": "logicalXor",
    "Constant": "(a constant: ORT makes it an initializer)",
}
# inputs the EP needs constant, by op ("'shape' input should be a constant", ...)
CONSTANT_INPUTS = {"Reshape": (1,), "Expand": (1,), "Slice": (1, 2, 3, 4), "Squeeze": (1,), "Unsqueeze": (1,),
                   "Clip": (1, 2),
                   "Tile": (1,), "Split": (1,), "CumSum": (1,), "Trilu": (1,),
                   **{op: (1,) for op in WEBNN_OPS if op.startswith("Reduce")}}
NO_WEBNN_TYPES = {TensorProto.STRING: "string", TensorProto.DOUBLE: "double", TensorProto.COMPLEX64: "complex64",
                  TensorProto.COMPLEX128: "complex128", TensorProto.BFLOAT16: "bfloat16"}
_NO_SUCH_TENSORS = "WebNN has no such tensors"  # the finding on a value of one of NO_WEBNN_TYPES
INT32_LIMIT = 2 ** 31
INT64_MAX = 2 ** 63 - 1


class NotStatic(ValueError):
    """The model's input shapes are not all fixed (WebNN graphs have static shapes), or one given is
    impossible (a negative size, or more elements than int64 counts)."""


@dataclass
class Finding:
    """A node ORT's WebNN EP would not take: its name, its op type (domain-qualified outside ONNX), and why."""

    node: str
    op_type: str
    reason: str


def fix_input_shapes(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None) -> None:
    """Give every graph input of ``model`` (changed in place) a static shape: ``input_shapes[name]``, or
    its own static dims. Raises NotStatic naming the inputs that still have symbolic dims.

    Args:
        model: the model, changed in place.
        input_shapes: input name to its static dims; None or empty keeps every input's own dims.

    Raises:
        NotStatic: an input keeps symbolic or unknown dims, ``input_shapes`` gives a negative size or
            more elements than int64 counts, or names no input of the model.
    """
    input_shapes = input_shapes or {}
    initializers = {init.name for init in model.graph.initializer}
    symbolic = []
    for value in model.graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        tensor_type = value.type.tensor_type
        if value.name in input_shapes:
            sizes = [int(size) for size in input_shapes[value.name]]
            if min(sizes, default=0) < 0 or prod(sizes) > INT64_MAX:
                raise NotStatic(f"--input-shapes {value.name}:{sizes} is impossible: "
                                f"{'a negative size' if min(sizes) < 0 else f'{prod(sizes)} elements, more than int64 counts'}")
            tensor_type.ClearField("shape")
            for size in input_shapes[value.name]:
                tensor_type.shape.dim.add().dim_value = int(size)
        elif not tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in tensor_type.shape.dim):
            symbolic.append(value.name)
    unknown = sorted(set(input_shapes) - {value.name for value in model.graph.input})
    if unknown:
        raise NotStatic(f"--input-shapes names {unknown[0]!r}, which is not an input of the model")
    if symbolic:
        raise NotStatic(f"WebNN graphs have static shapes, and input(s) {', '.join(map(repr, symbolic))} have "
                        f"symbolic or unknown dims: give --input-shapes NAME:[DIMS]")


def _static_infos(model: ModelProto) -> dict:
    """Types and shapes of the main graph's values by ONNX's shape inference with data propagation. (Not
    ORT's symbolic inference for sizes: it gave a wrong static shape for a Slice in ONNX's expanded
    rotary-embedding node test, (2, 3, 4, 4) where ORT computes (2, 3, 4, 8).)"""
    return graph_infos(inferred(typing_copy(model)).graph, main=True)


# Shape arithmetic folded once the input shapes are fixed (integer and bool values only: exact)
FOLDABLE = {"Shape", "Size", "Gather", "Where", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Range",
            "Concat", "Unsqueeze", "Squeeze", "Slice", "Add", "Sub", "Mul", "Div", "Mod", "Cast", "Reshape", "Expand",
            "ConstantOfShape", "Not", "And", "Or", "Max", "Min", "Abs", "Neg", "Identity", "ReduceProd", "ReduceSum",
            "ReduceMax", "ReduceMin", "CumSum", "Transpose", "Tile", "Flatten", "Sign"}
FOLD_LIMIT = 1 << 16  # elements of a folded value and of each input: shape arithmetic, not data
FOLD_ROUNDS = 4


def _exact_kind(array: np.ndarray) -> bool:
    return array.dtype.kind in "iub"


def _foldable_input(known: ConstantView, name: str) -> bool:
    """Whether ``name`` is a constant shape arithmetic reads: integer or bool, and small (told by its proto,
    no payload read: a table a gather reads from is data, never loaded to fold it)."""
    dtype, size = known.dtype(name), known.size(name)
    return dtype is not None and dtype.kind in "iub" and size is not None and size <= FOLD_LIMIT


def fold_shape_arithmetic(model: ModelProto, external_data_folder: str | os.PathLike | None = None) -> int:
    """Replace, in the main graph of ``model`` (changed in place, input shapes fixed), every node whose
    value its static shapes and constants decide (Shape of a static value, and integer arithmetic on
    such values and constants) by a Constant: WebNN needs Reshape/Expand/Slice shapes constant, and the
    lowering needs static shapes. Integer and bool values only, so folding is exact; inputs of at most
    ``FOLD_LIMIT`` elements (read from ``external_data_folder``, the model's folder, if kept there).
    Returns how many.

    Args:
        model: the model, changed in place (its input shapes fixed: ``fix_input_shapes``).
        external_data_folder: the model's folder, where external constants are read; None when none is
            needed.

    Returns:
        The number of nodes replaced by a Constant.
    """
    from onnx.reference import ReferenceEvaluator

    infos = _static_infos(model)
    known = ConstantView(model.graph, external_data_folder=external_data_folder)
    opset = default_opset(model)
    folded = {}
    for position, node in enumerate(model.graph.node):
        value = None
        if node.op_type == OP_TYPE and node.domain == DOMAIN:  # the shape gathers the rewrite made
            if all(_foldable_input(known, name) for name in node.input):
                mode = attribute(node, "mode")
                if mode is None:  # the schema requires it: not foldable, ORT refuses the node
                    continue
                try:
                    value = gather_multiaxis(known[node.input[0]], known[node.input[1]],
                                             [int(a) for a in known[node.input[2]].reshape(-1)], mode)
                except (GatherShapeError, IndexError, ValueError):  # it raises at run time: ORT says so there
                    continue
        elif (node.domain not in ONNX_DOMAINS or node.op_type not in FOLDABLE or len(node.output) != 1
                or holds_subgraph(node)):
            continue
        elif node.op_type in ("Shape", "Size"):
            info = infos.get(node.input[0])
            if info is None or info.shape is None or not all(isinstance(d, int) for d in info.shape):
                continue
            if node.op_type == "Size":
                value = np.array(prod(info.shape), np.int64)
            else:
                attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                value = np.array(info.shape, np.int64)[attributes.get("start", 0):attributes.get("end", None)]
        elif all(_foldable_input(known, name) for name in node.input if name):
            inputs = [name for name in node.input if name]
            single = helper.make_model(
                helper.make_graph([node], "fold", [helper.make_tensor_value_info(
                    name, helper.np_dtype_to_tensor_dtype(known[name].dtype), known[name].shape) for name in inputs],
                    [helper.make_empty_tensor_value_info(node.output[0])]),
                opset_imports=[helper.make_opsetid("", opset)])
            try:
                # cast: run returns a dict only for intermediate=True
                outputs = cast(list, ReferenceEvaluator(single).run(None, {name: known[name] for name in inputs}))
                value = np.asarray(outputs[0])
            except Exception:  # noqa: BLE001 - not foldable here: ORT computes it at run time
                continue
        if value is None or not _exact_kind(value) or value.size > FOLD_LIMIT:
            continue
        known.learn(node.output[0], value)
        folded[position] = helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                            value=numpy_helper.from_array(value, name=""))
    if folded:
        # what the folded nodes read: an initializer only they read goes (kept, it would be stored twice)
        read = {name for position in folded for name in model.graph.node[position].input if name}
        nodes = [folded.get(position, node) for position, node in enumerate(model.graph.node)]
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        constants = [node for node in model.graph.node if node.op_type == "Constant"]
        remove_dead(model.graph, constants, read, initializers="freed")
    return len(folded)


# The forms a node can take, cheapest first (``LoweredNode.form``; the general one is the flat offsets)
FORM_GATHER = "Gather"                   # one gather (ONNX Gather)
FORM_GATHER_ELEMENTS = "GatherElements"  # one gatherElements, the indices expanded first where they broadcast
FORM_GATHER_ND = "GatherND"              # one gatherND, constant batch coordinates concatenated in front
FORM_FLAT = GENERAL                      # one gather of the data as 1-D at computed flat offsets
FORM_EMPTY = "empty"                     # a static output with a size-0 dim: that empty tensor, a Constant
FORMS = (FORM_GATHER, FORM_GATHER_ELEMENTS, FORM_GATHER_ND, FORM_FLAT, FORM_EMPTY)
# Ops that only reshape: their output holds their first input's elements in the same order
RESHAPES = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"}
# Ops whose output holds only values of their first input
RANGE_KEEPING = RESHAPES | {"Gather", "GatherElements", "GatherND", "Expand", "Tile", "Transpose", "Slice"}
INTEGER_LIMITS = {t: (int(np.iinfo(d).min), int(np.iinfo(d).max)) for t, d in (
    (TensorProto.INT8, np.int8), (TensorProto.INT16, np.int16), (TensorProto.INT32, np.int32),
    (TensorProto.INT64, np.int64), (TensorProto.UINT8, np.uint8), (TensorProto.UINT16, np.uint16),
    (TensorProto.UINT32, np.uint32), (TensorProto.UINT64, np.uint64))} | {TensorProto.BOOL: (0, 1)}
COMPARISONS = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf"}
FOLDED_LIMIT = 1 << 20  # elements of a folded index constant; beyond, the Expand runs in the graph


@dataclass
class _Node:
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


@dataclass
class _Target:
    """Where the lowered node's result goes: the node's output, or the output of a node after it (the
    one reshape reading it, the float16 round trip's Cast back), whose shape and type the result then
    takes directly."""

    name: str
    shape: tuple[int, ...]
    absorbed: tuple[NodeProto, ...] = ()  # the nodes between the output and the target, which go


class _WebNNLowering:
    def __init__(self, model: ModelProto, report: LowerReport, external_data_folder: str | os.PathLike | None = None):
        self.opset = default_opset(model)
        self.names = NameScope(all_names(model))
        self.infos = _static_infos(model)
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

    def node(self, node: NodeProto, scope: GraphScope) -> tuple[list[NodeProto], str, str]:
        """The replacement of one main-graph GatherMultiaxis node, its form and (for the flat form) why no
        single gather computes it; raises _NotLowered, also where the nodes fail ``form_check.check_emitted``."""
        self.pending = {}
        absorbed, freed = set(self.absorbed), set(self.freed)
        nodes, form, reason = self._lower(node)
        unfit = check_emitted(nodes, scope)
        if unfit is not None:
            self.absorbed, self.freed = absorbed, freed
            raise _NotLowered(unfit)
        self.prepared.update(self.pending)  # (copies made for a node that was not lowered are gone)
        self.freed.update(node.input)  # the axes, and reshapes of data and indices a form read around
        return nodes, form, reason

    def _shape(self, name: str, what: str) -> tuple[int, ...]:
        shape = self._static(name)
        if shape is None:
            raise _NotLowered(f"the {what}'s shape is not static (WebNN graphs have static shapes)")
        return shape

    def _static(self, name: str) -> tuple[int, ...] | None:
        info = self.infos.get(name)
        if info is None or info.shape is None or not all(isinstance(d, int) for d in info.shape):
            return None
        return tuple(info.shape)

    def _facts(self, node: NodeProto) -> _Node:
        if self.opset < MIN_OPSET:
            raise _NotLowered(f"the WebNN target needs opset {MIN_OPSET} (the model has {self.opset})")
        try:
            mode = node_mode(node)
        except NotLowered as error:  # no mode, or an unknown one: the node is left, as plain lower leaves it
            raise _NotLowered(str(error)) from None
        data, indices = node.input[0], node.input[1]
        data_shape, indices_shape = self._shape(data, "data"), self._shape(indices, "indices")
        if node.input[2] not in self.constants:
            raise _NotLowered("its axes are not a constant")
        elem_type = self.infos[data].elem_type
        if elem_type in NO_WEBNN_TYPES:
            raise _NotLowered(f"WebNN has no {NO_WEBNN_TYPES[elem_type]} tensors")
        if possibly_string(elem_type):
            raise _NotLowered("the input's element type is not known (it may be string, which WebNN has not)")
        raw_axes = [int(a) for a in self.constants[node.input[2]].reshape(-1)]
        try:
            out = output_dims(data_shape, indices_shape, raw_axes)
            axes = normalize_axes(raw_axes, len(data_shape))
            logical = logical_indices_dims(indices_shape, len(axes))
        except GatherShapeError as error:
            raise _NotLowered(f"its shapes break the operator's rule: {error}") from None
        if 0 in out:  # whatever the rank: no gather to run
            raise _EmptyOutput(elem_type, tuple(out))
        rank = len(data_shape)
        if rank > MAX_RANK:
            raise _NotLowered(f"rank {rank} > {MAX_RANK}, the ranks every WebNN backend supports")
        if 0 in data_shape or 0 in indices_shape:
            raise _NotLowered("a size-0 dimension (WebNN tensors have none)")
        index_dtype = helper.tensor_dtype_to_np_dtype(self.infos[indices].elem_type)
        return _Node(node, mode, data_shape, indices_shape, axes, tuple(logical), tuple(out), elem_type,
                     np.dtype(index_dtype))

    def _lower(self, node: NodeProto) -> tuple[list[NodeProto], str, str]:
        """The nodes, the form, and (for the flat form) why no single gather computes the node."""
        try:
            facts = self._facts(node)
        except _EmptyOutput as empty:
            rank = len(empty.dims)
            outside = (f"rank {rank} > {MAX_RANK}, the ranks every WebNN backend supports; the empty output is a "
                       f"constant" if rank > MAX_RANK else "")
            return [self._empty(node, empty)], FORM_EMPTY, outside
        if not facts.axes:  # the rewrite never makes one
            return self._flat_offsets(facts), FORM_FLAT, "no axes: a broadcast of the data, not a gather"
        reasons = []
        narrowed = self._narrowed(facts)
        for form in (self._gather, self._gather_elements, self._gather_nd):
            outcome = form(narrowed)
            if isinstance(outcome, str):
                reasons.append(outcome)
            else:
                return outcome[0], outcome[1], ""
        return self._flat_offsets(facts), FORM_FLAT, "; ".join(reasons)

    # -- the shapes a tensor already has: reshapes are free to read around

    def _reshape_chain(self, name: str) -> list[tuple[str, tuple[int, ...]]]:
        """``name`` and each value it is a reshape of (through Reshape/Squeeze/Unsqueeze/Flatten/Identity
        nodes), nearest first, each with its static shape: every one holds the same elements in order."""
        chain, seen = [], set()
        while name not in seen:
            seen.add(name)
            shape = self._static(name)
            if shape is None:
                break
            chain.append((name, shape))
            if name in self.absorbed:  # a lowered node writes it now: what it reshaped is gone
                break
            producer = self.producers.get(name)
            if producer is None or producer.domain not in ONNX_DOMAINS or producer.op_type not in RESHAPES:
                break
            name = producer.input[0]
        return chain

    def _view(self, b: NodeBuilder, name: str, shape: tuple[int, ...], role: str) -> str:
        """``name``'s elements with ``shape``: a value of the reshape chain that has it, else one Reshape
        of the chain's first value (the reshapes in between may then go)."""
        chain = self._reshape_chain(name)
        for value, value_shape in chain:
            if value_shape == tuple(shape):
                return value
        return b.op("Reshape", [chain[-1][0] if chain else name, b.constant(list(shape), role + "_shape")], role)

    def _target(self, facts: _Node, flexible: bool) -> list[_Target]:
        """Where the result may go: the node's output; where the form can produce other shapes of the same
        elements (``flexible``) and the one node reading the output reshapes it, that node's output. With
        the float16 round trip, only the Cast back's output (the gathered values are float16)."""
        output = facts.node.output[0]
        targets = [_Target(output, facts.out)]
        reader = self._sole_reader(output)
        if reader is not None and reader.op_type in RESHAPES and reader.input[0] == output:
            shape = self._static(reader.output[0]) or self._reshaped(reader, facts.out)
            if shape is not None and len(shape) <= MAX_RANK:
                targets.append(_Target(reader.output[0], shape, (reader,)))
        if facts.narrow_cast is not None:
            cast = facts.narrow_cast
            targets = [_Target(cast.output[0], target.shape, (*target.absorbed, cast)) for target in targets
                       if cast.input[0] == target.name]
        if not flexible:
            targets = [target for target in targets if target.shape == facts.out] or targets[-1:]
        return targets

    def _sole_reader(self, name: str) -> NodeProto | None:
        """The one standard main-graph node that reads ``name``, once, where nothing else does (nor is it a
        graph output), or None."""
        readers = self.main_readers.get(name, [])
        if name in self.graph_outputs or len(readers) != 1 or self.read_count.get(name, 0) != 1:
            return None
        return readers[0] if readers[0].domain in ONNX_DOMAINS else None

    def _narrowed(self, facts: _Node) -> _Node:
        """``facts`` with the float16 round trip around the node noted, where there is one."""
        chain = self._reshape_chain(facts.node.input[0])
        cast = self.producers.get(chain[-1][0]) if chain else None
        if cast is None or not round_trip_cast(cast, TensorProto.FLOAT) or chain[-1][0] in self.absorbed:
            return facts
        source = cast.input[0]
        if self.infos.get(source) is None or self.infos[source].elem_type != TensorProto.FLOAT16:
            return facts
        back = self._sole_reader(facts.node.output[0])
        if back is not None and back.op_type in RESHAPES:
            back = self._sole_reader(back.output[0])
        if back is None or not round_trip_cast(back, TensorProto.FLOAT16):
            return facts
        narrowed = dataclasses.replace(facts, narrow_data=source, narrow_cast=back, elem_type=TensorProto.FLOAT16)
        return narrowed if self._target(narrowed, flexible=False) else facts  # (a reshape of unknown shape)

    def _reshaped(self, node: NodeProto, shape: tuple[int, ...]) -> tuple[int, ...] | None:
        """The output shape of the reshaping ``node`` given its input's ``shape``, where its axes or shape
        are constants (shape inference leaves a graph output's declared shape as it is: unknown, often)."""
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        operand = self.constants.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        if node.op_type == "Identity":
            return shape
        if node.op_type == "Flatten":
            axis = attributes.get("axis", 1) % (len(shape) + 1) if shape else 0
            return (prod(shape[:axis]), prod(shape[axis:]))
        if node.op_type == "Reshape":
            if operand is None:
                return None
            dims = [int(d) for d in operand.reshape(-1)]
            if not attributes.get("allowzero", 0):
                dims = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(dims)]
            if dims.count(-1) == 1:
                known = prod(d for d in dims if d != -1)
                dims[dims.index(-1)] = prod(shape) // known if known else 0
            return tuple(dims) if prod(dims) == prod(shape) and min(dims, default=0) >= 0 else None
        axes = attributes.get("axes") if operand is None else [int(a) for a in operand.reshape(-1)]
        if node.op_type == "Squeeze":
            if axes is None:
                return tuple(d for d in shape if d != 1)
            axes = {a % len(shape) for a in axes}
            return tuple(d for i, d in enumerate(shape) if i not in axes)
        if axes is None:  # Unsqueeze
            return None
        rank = len(shape) + len(axes)
        axes = {a % rank for a in axes}
        rest = iter(shape)
        return tuple(1 if i in axes else next(rest) for i in range(rank))

    def _choose(self, facts: _Node, canonical: tuple[int, ...], result_shape, index_shape_for
                ) -> tuple[tuple[int, ...], _Target]:
        """The indices' shape and the target, for a form that reads its indices in any shape of
        ``canonical``'s elements that ``index_shape_for`` gives back (``result_shape``: what it then
        writes): the fewest nodes (a Reshape of the indices, a Reshape of the result, less the nodes after
        the node that go)."""
        indices = facts.node.input[1]
        constant = indices in self.constants
        shapes = {canonical: 0 if constant or canonical in (s for _, s in self._reshape_chain(indices)) else 1}
        for _, shape in self._reshape_chain(indices):
            if index_shape_for(result_shape(shape)) == shape:  # a shape the form takes
                shapes.setdefault(shape, 0)
        best = None
        for target in self._target(facts, flexible=True):
            if constant:
                derived = index_shape_for(target.shape)
                if derived is not None:
                    shapes.setdefault(derived, 0)
            for shape, cost in shapes.items():
                if len(shape) > MAX_RANK or len(result_shape(shape)) > MAX_RANK:
                    continue
                total = cost + (result_shape(shape) != target.shape) - len(target.absorbed)
                if best is None or total < best[0]:
                    best = (total, shape, target)
        if best is None:
            raise _Unfit(f"its indices or result would have rank > {MAX_RANK} in every shape this form takes")
        return best[1], best[2]

    # -- the indices: clamped into range, int32, as the form reads them

    @staticmethod
    def _bounds(facts: _Node) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and highest valid index of each component, in the indices' type: scalars for one
        axis, else vectors along the last dimension (which holds one tuple)."""
        dims = np.array([facts.data_shape[axis] for axis in facts.axes], np.int64)
        if facts.k == 1:
            dims = dims.reshape(())
        return (-dims).astype(facts.index_dtype), (dims - 1).astype(facts.index_dtype)

    def _index_dtype(self, facts: _Node) -> np.dtype:
        """int32 (the index type every WebNN backend takes) wherever every index fits in it (in mode
        "zero", up to 2 dim: ``_zeroing``)."""
        largest = max(facts.data_shape) * (2 if self._zeroing(facts) else 1)
        return np.dtype(np.int32) if largest < INT32_LIMIT else facts.index_dtype

    def _zeroing(self, facts: _Node) -> bool:
        """Mode "zero" with indices that may be out of range: on each axis the data is read as [data, data,
        a zero slice], at ``min(index, dim) + dim`` brought up to -1 (the zero slice, counted from the end):
        an index in [-dim, dim - 1] reads its element, any other the zero slice (``_prepared_indices``)."""
        return facts.mode == Mode.ZERO and not self._in_range(facts)

    def _prepared_indices(self, b: NodeBuilder, facts: _Node, shape: tuple[int, ...], dtype: np.dtype):
        """The indices viewed as ``shape`` (one tuple on the last dimension when k > 1), clamped into
        range (to [-dim, dim - 1]: the gathers count negatives from the end) or, in mode "zero", moved to
        [data, data, zero slice] (``_zeroing``), cast to ``dtype``: a value, or an array where the
        indices are constants. Gathers at the same indices share one copy."""
        indices = facts.node.input[1]
        low, high = self._bounds(facts)
        zeroing = self._zeroing(facts)
        if indices in self.constants:
            raw = self.constants[indices].reshape(shape)
            if zeroing:
                moved = np.maximum(np.minimum(raw, high + 1) + (high + 1), -1)
                return np.asarray(moved).astype(dtype)  # (0-d: NumPy returns a scalar)
            return np.asarray(np.minimum(np.maximum(raw, low), high)).astype(dtype)
        source = self._reshape_chain(indices)[-1][0]  # (each gather's own alignment reshapes it)
        key = (source, tuple(shape), dtype.str, low.tobytes(), high.tobytes(), zeroing)
        if key in self.prepared:  # (several gathers at the same indices: hummingbird's trees)
            return self.prepared[key]
        value = self._view(b, indices, shape, "indices_view")
        if zeroing:  # (min first: the Add cannot overflow)
            dims = self._typed(b, high + 1, "dims")
            value = b.op("Add", [self._at_most(b, value, dims, "at_most_dim"), dims], "in_doubled_data")
            value = self._at_least(b, value, self._typed(b, np.array(-1, facts.index_dtype), "minus_one"),
                                   "zero_slice_from_end")
        elif not self._in_range(facts):
            value = self._at_least(b, self._at_most(b, value, self._typed(b, high, "highest_index"), "below_end"),
                                   self._typed(b, low, "lowest_index"), "clamped")
        if dtype != facts.index_dtype:  # exact: the values are within [-dim, 2 dim] by now
            value = b.cast(value, helper.np_dtype_to_tensor_dtype(dtype), f"indices_{dtype.name}")
        self.pending[key] = value
        return value

    def _data(self, b: NodeBuilder, facts: _Node, shape: tuple[int, ...], axes: list[int]) -> str:
        """The data the form reads, viewed as ``shape``: in mode "zero" as [data, data, zero slice] on each
        of ``axes`` (positions in ``shape``; ``_zeroing``), folded for a constant. (Not ``where`` on the
        result: ORT's Where writes +0.0 for -0.0, and has no kernel for int16, uint16, uint64, bool.)"""
        name = facts.narrow_data or facts.node.input[0]
        if not self._zeroing(facts):
            return self._view(b, name, shape, "data_view")
        dtype = helper.tensor_dtype_to_np_dtype(facts.elem_type)
        source = self._reshape_chain(name)[-1][0]
        if source in self.constants and (self.constants.size(source) or 0) <= FOLDED_LIMIT:  # (known: a constant)
            padded = self.constants[source].reshape(shape)
            for axis in axes:
                zeros = np.zeros(padded.shape[:axis] + (1,) + padded.shape[axis + 1:], padded.dtype)
                padded = np.concatenate([padded, padded, zeros], axis=axis)
            return self._typed(b, padded, "data_doubled_and_zero")
        data, padded_shape = self._view(b, name, shape, "data_view"), list(shape)
        for axis in axes:
            zeros = np.zeros(padded_shape[:axis] + [1] + padded_shape[axis + 1:], dtype)
            data = b.op("Concat", [data, data, self._typed(b, zeros, f"zero_slice{axis}")],
                        f"data_doubled_and_zero{axis}", axis=axis)
            padded_shape[axis] = 2 * padded_shape[axis] + 1
        return data

    def _in_range(self, facts: _Node) -> bool:
        """Whether every value the indices can hold is a valid index of every axis (``_value_range``)."""
        bounds = self._value_range(facts.node.input[1])
        smallest = min(facts.data_shape[axis] for axis in facts.axes)
        return bounds is not None and -smallest <= bounds[0] and bounds[1] <= smallest - 1

    def _value_range(self, name: str, depth: int = 0) -> tuple[int, int] | None:
        """The lowest and highest value the integer tensor ``name`` can hold, where the graph decides them
        whatever its inputs: constants, and what gathers, reshapes, Where, Concat, Add, Sub, Mul, Min, Max,
        ArgMax... make of them (a gather's output holds values of its data). None where not known."""
        if name in self.ranges:
            return self.ranges[name]
        self.ranges[name] = None  # (a cycle, in a malformed graph, stays unknown)
        bounds = self._computed_range(name, depth) if depth < 64 else None
        info = self.infos.get(name)
        if bounds is not None and info is not None and info.elem_type in INTEGER_LIMITS:
            low, high = INTEGER_LIMITS[info.elem_type]
            if not low <= bounds[0] <= bounds[1] <= high:  # it would wrap around at run time
                bounds = None
        elif bounds is not None:
            bounds = None  # not an integer tensor (a float's range is not its values' after a Cast)
        self.ranges[name] = bounds
        return bounds

    def _computed_range(self, name: str, depth: int) -> tuple[int, int] | None:
        if name in self.constants:
            dtype = self.constants.dtype(name)
            if dtype is None or dtype.kind not in "iub" or self.constants.size(name) == 0:
                return None  # (decided from the proto: a float table is never loaded here)
            array = self.constants[name]
            return int(array.min()), int(array.max())
        node = self.producers.get(name)
        if node is None:
            return None
        ranges = [self._value_range(i, depth + 1) if i else None for i in node.input]
        if node.op_type == OP_TYPE and node.domain == DOMAIN:  # the other GatherMultiaxis nodes
            mode = attribute(node, "mode")
            return None if ranges[0] is None else _union(ranges[0], (0, 0)) if mode == Mode.ZERO else ranges[0]
        if node.domain not in ONNX_DOMAINS:
            return None
        op = node.op_type
        if op in COMPARISONS:
            return 0, 1
        if op in RANGE_KEEPING or op == "Cast":  # (a Cast's output type is checked by the caller)
            return ranges[0]
        if op == "Where":
            return _union(ranges[1], ranges[2])
        if op in ("Concat", "Min", "Max") and (not ranges or None in ranges):
            return None
        if op == "Concat":
            return functools.reduce(_union, ranges)
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
            shape = self._static(node.input[0])
            if shape:
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                return 0, shape[axis % len(shape)] - 1
        return None

    def _at_most(self, b: NodeBuilder, x: str, high: str, role: str) -> str:
        """min(x, high) on integers: Min from opset 12 (not Clip: ORT's WebNN EP takes float bounds only)."""
        if self.opset >= 12:
            return b.op("Min", [x, high], role)
        return b.op("Where", [b.op("Less", [high, x], role + "_past"), high, x], role)

    def _at_least(self, b: NodeBuilder, x: str, low: str, role: str) -> str:
        """max(x, low) on integers."""
        if self.opset >= 12:
            return b.op("Max", [x, low], role)
        return b.op("Where", [b.op("Less", [x, low], role + "_before"), low, x], role)

    @staticmethod
    def _typed(b: NodeBuilder, array: np.ndarray, role: str) -> str:
        return b.op("Constant", [], role, value=numpy_helper.from_array(np.asarray(array), name=""))

    def _finish(self, b: NodeBuilder, result: str, result_shape: tuple[int, ...], target: _Target) -> None:
        """Reshape the form's result to the target's shape where it differs, and make the last node write
        the target."""
        if result_shape != target.shape:
            result = b.op("Reshape", [result, b.constant(list(target.shape), "result_shape")], "result")
        if not b.nodes or b.nodes[-1].output[0] != result:  # the result is a value read around: copy it
            b.op("Identity", [result], "result")
        b.rename_last_output(target.name)
        for node in target.absorbed:
            self.absorbed.add(node.output[0])
            self.freed.update(node.input)

    def _indices_value(self, b: NodeBuilder, clamped, role: str = "indices") -> str:
        return self._typed(b, clamped, role) if isinstance(clamped, np.ndarray) else clamped

    # -- the forms

    def _gather(self, facts: _Node):
        """One axis; the indices vary (size > 1) off the axis only on dims where the data has size 1, all
        in one contiguous block with the axis: Gather(data without those dims, indices of the block)."""
        if facts.k != 1:
            return "not one Gather: several axes"
        axis, data_shape, logical = facts.axes[0], facts.data_shape, facts.logical
        varying = [d for d in range(facts.rank) if d != axis and logical[d] != 1]
        start, end = min(varying + [axis]), max(varying + [axis]) + 1
        wide = [d for d in range(start, end) if d != axis and data_shape[d] != 1]
        if wide:
            return (f"not one Gather: the indices vary on dims {varying} and the data has size > 1 on dim(s) "
                    f"{wide} between them and the axis")
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

        try:
            shape, target = self._choose(facts, canonical, result_shape, index_shape_for)
        except _Unfit as reason:
            return f"not one Gather: {reason}"
        b = NodeBuilder(self.opset, self.names, facts.node.name or "gather_multiaxis")
        data = self._data(b, facts, data_view, [start])
        indices = self._prepared_indices(b, facts, shape, self._index_dtype(facts))
        result = b.op("Gather", [data, self._indices_value(b, indices)], "gathered", axis=start)
        self._finish(b, result, result_shape(shape), target)
        return b.nodes, FORM_GATHER

    def _gather_elements(self, facts: _Node):
        """One axis; off the axis the indices have the data's size or size 1 (then expanded to it):
        GatherElements."""
        if facts.k != 1:
            return "not one GatherElements: several axes"
        axis, data_shape, logical = facts.axes[0], facts.data_shape, facts.logical
        broadcast = [d for d in range(facts.rank) if d != axis and logical[d] not in (1, data_shape[d])]
        if broadcast:
            return f"not one GatherElements: the data has size 1 where the indices do not on dim(s) {broadcast}"
        b = NodeBuilder(self.opset, self.names, facts.node.name or "gather_multiaxis")
        clamped = self._prepared_indices(b, facts, facts.indices_shape, self._index_dtype(facts))
        full = tuple(data_shape[d] if d != axis else logical[d] for d in range(facts.rank))
        if tuple(facts.indices_shape) != full:
            if isinstance(clamped, np.ndarray) and prod(full) <= FOLDED_LIMIT:
                clamped = np.ascontiguousarray(np.broadcast_to(clamped, full))
            else:
                clamped = b.op("Expand", [self._indices_value(b, clamped), b.constant(list(full), "full_shape")],
                               "indices_expanded")
        data = self._data(b, facts, data_shape, [axis])
        result = b.op("GatherElements", [data, self._indices_value(b, clamped)], "gathered", axis=axis)
        self._finish(b, result, full, self._target(facts, flexible=False)[0])
        return b.nodes, FORM_GATHER_ELEMENTS

    def _gather_nd(self, facts: _Node):
        """Axes forming one contiguous block of dims after the leading (batch) dims, and after it the
        indices of size 1, or the data of size 1 (then dropped: the tuples take those dims too, as an
        aten.index export aligns them): GatherND of coordinate tuples [batch coordinates (constant), the
        node's components in the data's order]."""
        axes, rank, logical, data_shape = facts.axes, facts.rank, facts.logical, facts.data_shape
        start, k = min(axes), facts.k
        if sorted(axes) != list(range(start, start + k)):
            return f"not one GatherND: the axes {list(axes)} are not one block of adjacent dims"
        varying = [d for d in range(start + k, rank) if logical[d] != 1]
        wide = [d for d in range(start + k, rank) if data_shape[d] != 1]
        if varying and wide:
            return (f"not one GatherND: after the axes, the indices vary on dim(s) {varying} and the data has "
                    f"size > 1 on dim(s) {wide}")
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

        try:
            shape, target = self._choose(facts, canonical, result_shape, index_shape_for)
        except _Unfit as reason:
            return f"not one GatherND: {reason}"
        b = NodeBuilder(self.opset, self.names, facts.node.name or "gather_multiaxis")
        # int64: the one index type of ONNX's GatherND (ORT's WebNN EP runs int64 as int32 on a backend without it)
        clamped = self._prepared_indices(b, facts, shape, np.dtype(np.int64))
        order = sorted(range(k), key=lambda j: axes[j])  # the components in the data's order
        if order != list(range(k)):
            if isinstance(clamped, np.ndarray):
                clamped = clamped[..., order]
            else:
                clamped = b.op("Gather", [clamped, self._typed(b, np.array(order, np.int32), "data_order")],
                               "coordinates_in_data_order", axis=len(shape) - 1)
        if start:
            tuple_dims = facts.out[:start] + tuple(shape[start:-1])
            clamped = self._with_batch_coordinates(b, facts, clamped, tuple_dims)
            shape = tuple_dims + (start + k,)
        data = self._data(b, facts, data_view, list(range(start, start + k)))
        result = b.op("GatherND", [data, self._indices_value(b, clamped)], "gathered")
        self._finish(b, result, result_shape(shape), target)
        return b.nodes, FORM_GATHER_ND

    def _with_batch_coordinates(self, b: NodeBuilder, facts: _Node, components, tuple_dims: tuple[int, ...]):
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
            components = self._typed(b, components, "components")
        if tuple(facts.logical[:start]) != tuple(facts.out[:start]):
            components = b.op("Expand", [components, b.constant(list(tuple_dims) + [k], "tuple_shape")],
                              "components_expanded")
        if prod(full) <= FOLDED_LIMIT:
            batch_name = self._typed(b, np.ascontiguousarray(np.broadcast_to(batch, full)), "batch_coordinates")
        else:
            batch_name = b.op("Expand", [self._typed(b, batch, "batch_coordinates_grid"),
                                         b.constant(list(full), "batch_shape")], "batch_coordinates")
        return b.op("Concat", [batch_name, components], "coordinates", axis=len(tuple_dims))

    def _empty(self, node: NodeProto, empty: _EmptyOutput) -> NodeProto:
        """The output, empty, as a constant: not the standard lowering's Expand from size 1 to 0, which
        ORT's optimizer removes (ExpandElimination takes a target 0 for 1) and OpenVINO ignores or dies on."""
        value = helper.make_tensor("", empty.elem_type, list(empty.dims), [])
        return helper.make_node("Constant", [], [node.output[0]], name=self.names.fresh(f"{node.name or 'gather_multiaxis'}/empty"),
                                value=value)

    def _flat_offsets(self, facts: _Node) -> list[NodeProto]:
        """One gather of the data as 1-D at flat offsets (the module docstring)."""
        node, mode, elem_type = facts.node, facts.mode, facts.elem_type
        indices = node.input[1]
        data_shape, indices_shape, axes, out = facts.data_shape, facts.indices_shape, facts.axes, facts.out
        rank = facts.rank
        b = NodeBuilder(self.opset, self.names, node.name or "gather_multiaxis")
        strides = [prod(data_shape[d + 1:]) for d in range(rank)]
        terms: list[tuple[str, tuple[int, ...]]] = []  # offsets, and the shape they broadcast from
        valid: str | None = None
        k = len(axes)
        for j, axis in enumerate(axes):
            if k > 1:
                positions = numpy_helper.from_array(np.arange(j, indices_shape[-1], k, dtype=np.int32), name="")
                component = b.op("Gather", [indices, b.op("Constant", [], f"component{j}_positions", value=positions)],
                                 f"component{j}", axis=rank - 1)
            else:
                component = indices
            if self.infos[indices].elem_type != TensorProto.INT64:
                component = b.cast(component, TensorProto.INT64, f"component{j}_int64")
            dim = data_shape[axis]
            zero, dim_value = b.constant(0, f"zero{j}"), b.constant(dim, f"dim{j}")
            if mode == Mode.ZERO:
                above = b.op("Less", [component, dim_value], f"below_end{j}")
                below = b.op("Less", [component, b.constant(-dim, f"minus_dim{j}")], f"before_start{j}")
                in_range = b.op("And", [above, b.op("Not", [below], f"not_before_start{j}")], f"in_range{j}")
                valid = in_range if valid is None else b.op("And", [valid, in_range], f"in_range_all{j}")
            negative = b.op("Less", [component, zero], f"negative{j}")
            wrapped = b.op("Where", [negative, b.op("Add", [component, dim_value], f"from_end{j}"), component],
                           f"wrapped{j}")
            low = b.op("Less", [wrapped, zero], f"still_negative{j}")
            wrapped = b.op("Where", [low, zero, wrapped], f"at_least_zero{j}")
            last = b.constant(dim - 1, f"last{j}")
            high = b.op("Less", [last, wrapped], f"past_end{j}")
            coordinate = b.op("Where", [high, last, wrapped], f"coordinate{j}")
            terms.append((b.op("Mul", [coordinate, b.constant(strides[axis], f"stride{j}")], f"offset{j}"),
                          facts.logical))  # the indices' shape, each coordinate tuple folded to one element
        for d in range(rank):
            if d in axes or data_shape[d] == 1 or out[d] == 1:
                continue
            iota = (np.arange(out[d], dtype=np.int64) * strides[d]).reshape([out[d] if e == d else 1 for e in range(rank)])
            terms.append((b.constant(iota, f"iota{d}"), iota.shape))
        offsets, shape = (terms[0] if terms else (b.constant(np.zeros([1] * rank, np.int64), "origin"), (1,) * rank))
        for term, term_shape in terms[1:]:
            offsets, shape = b.op("Add", [offsets, term], "offsets"), np.broadcast_shapes(shape, term_shape)
        if tuple(shape) != tuple(out):
            offsets = b.op("Expand", [offsets, b.constant(list(out), "output_shape")], "offsets_expanded")
        size = prod(data_shape)
        # Mode "zero": out-of-range positions read a zero element appended to the data (not Where on the
        # result: ORT's Where writes +0.0 for -0.0, and has no int16, uint16, uint64 or bool kernel)
        if valid is not None:
            offsets = b.op("Where", [valid, offsets, b.constant(size, "zero_element_offset")], "offsets_zeroed")
        if size < INT32_LIMIT:
            offsets = b.cast(offsets, TensorProto.INT32, "offsets_int32")
        flat = b.op("Reshape", [node.input[0], b.constant([size], "flat_shape")], "flat_data")
        if valid is not None:
            zero_value = numpy_helper.from_array(np.zeros(1, helper.tensor_dtype_to_np_dtype(elem_type)), name="")
            flat = b.op("Concat", [flat, b.op("Constant", [], "zero_element", value=zero_value)], "flat_data_and_zero",
                        axis=0)
        b.op("Gather", [flat, offsets], "read", axis=0)
        b.rename_last_output(node.output[0])
        return list(b.nodes)


class _NotLowered(Exception):
    pass


class _EmptyOutput(Exception):
    """The node's static output shape has a size-0 dim: the result is that empty tensor, whatever the inputs."""

    def __init__(self, elem_type: int, dims: tuple[int, ...]):
        super().__init__(f"empty output {list(dims)}")
        self.elem_type, self.dims = elem_type, dims


def _union(first: tuple[int, int] | None, second: tuple[int, int] | None) -> tuple[int, int] | None:
    return None if first is None or second is None else (min(first[0], second[0]), max(first[1], second[1]))


class _Unfit(Exception):
    """A form does not fit the node; the message says why."""


@dataclass
class WebNNPass:
    """The WebNN lowering as a visit over ``graphs.passes.run_pass``: the copy gets its input shapes fixed
    and its static shape arithmetic folded before the walk (``prepare``); each main-graph GatherMultiaxis
    is lowered by ``_WebNNLowering``, and the reshapes and Casts around it that the form absorbs go."""

    input_shapes: dict[str, tuple[int, ...]] | None = None
    external_data_folder: str | os.PathLike | None = None  # the model's folder: where its external data is
    report: LowerReport = field(default_factory=LowerReport)
    lowering: "_WebNNLowering | None" = None
    drops_domain: ClassVar[bool] = True  # (the custom domain's import goes with its last node)

    def targets(self, node: NodeProto) -> bool:
        """Whether the pass visits ``node``.

        Args:
            node: a node of any graph.

        Returns:
            True for a GatherMultiaxis node.
        """
        return is_gather_multiaxis(node)

    def prepare(self, model: ModelProto) -> None:
        """Fixes the input shapes, folds the static shape arithmetic (up to FOLD_ROUNDS times), and makes
        the lowering.

        Args:
            model: the pass's copy of the model, changed in place.

        Raises:
            NotStatic: an input shape is not fixed (see ``fix_input_shapes``).
        """
        fix_input_shapes(model, self.input_shapes)
        for _ in range(FOLD_ROUNDS):  # a folded shape can make the next value's shape static: fold again
            if not fold_shape_arithmetic(model, self.external_data_folder):
                break
        self.lowering = _WebNNLowering(model, self.report, self.external_data_folder)

    def outcome(self, node: NodeProto, path: str, visit: Visit | None, reason: str) -> LoweredNode:
        """The report's row for a visited node.

        Args:
            node: the GatherMultiaxis node.
            path: the path of its graph in the model.
            visit: the visit's change, or None when the node was left.
            reason: why it was left (used when ``visit`` is None).

        Returns:
            The LoweredNode (source "semantics" when lowered).
        """
        if visit is None:
            return LoweredNode(node.name, path, False, reason)
        if visit.detail["form"] == FORM_EMPTY and visit.detail["reason"]:  # replaced, but outside WebNN's ranks
            return LoweredNode(node.name, path, False, visit.detail["reason"], FORM_EMPTY, "semantics")
        return LoweredNode(node.name, path, True, visit.detail["reason"], visit.detail["form"], "semantics")

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit:
        """The WebNN lowering of a main-graph GatherMultiaxis ``node``, with the reshapes and Casts it
        absorbs removed.

        Args:
            node: a GatherMultiaxis node.
            scope: its graph's scope.

        Returns:
            The Visit, with the form and reason in ``detail``.

        Raises:
            NotChanged: the node is in a subgraph, or has no WebNN form (the message is the reason).
        """
        if not scope.main:
            raise NotChanged("inside an If/Loop/Scan body (WebNN graphs have no control flow); lowered to standard "
                             "ONNX ops instead")
        assert self.lowering is not None  # made by prepare(), which run_pass calls first
        absorbed = set(self.lowering.absorbed)
        try:
            nodes, form, reason = self.lowering.node(node, scope)
        except _NotLowered as why:
            raise NotChanged(f"{why}; lowered to standard ONNX ops instead") from None
        # an absorbed reshape or Cast: the lowered node writes its output now
        removes = [scope.producers[name] for name in self.lowering.absorbed - absorbed]
        return Visit(nodes, removes=removes, freed=set(self.lowering.freed), detail={"form": form, "reason": reason})


def lower_for_webnn(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None,
                    external_data_folder: str | os.PathLike | None = None) -> tuple[ModelProto, LowerReport]:
    """A copy of ``model`` (rewritten: holding GatherMultiaxis nodes) with its input shapes fixed and
    every GatherMultiaxis node of the main graph lowered for WebNN (see the module docstring), and the
    report. Raises NotStatic when an input shape is not fixed. A constant kept in an external file is
    read, where its values are needed, from ``external_data_folder`` (the model's folder) only.

    Args:
        model: the rewritten model; it is not changed.
        input_shapes: input name to its static dims, for inputs with symbolic dims.
        external_data_folder: the model's folder; None when no external constant is needed.

    Returns:
        The lowered copy (nodes without a WebNN form get the standard lowering) and the LowerReport.

    Raises:
        NotStatic: an input shape is not fixed.
    """
    webnn = WebNNPass(input_shapes, external_data_folder)
    result = run_pass(model, webnn)
    unname_replaced_dims(model, result)
    report = webnn.report
    # What WebNN cannot take still runs anywhere: the standard lowering (it stays outside WebNN's subset,
    # as the report says, and webnn_check lists it). Only where a node is left: its inference of the
    # lowered model would cost memory and time for nothing.
    if any(is_gather_multiaxis(node) for holder in node_holders(result) for node in holder.node):
        result, standard = lower_model(result, external_data_folder)
        report.outcomes.extend(LoweredNode(o.node, o.graph, False, f"not lowered at all: {o.reason}")
                               for o in standard.outcomes if not o.lowered)
    _empty_expands_as_constants(result)
    return result, report


def _empty_expands_as_constants(model: ModelProto) -> None:
    """Each main-graph Expand whose static output has a size-0 dim becomes that empty tensor, a Constant.
    The rewrite's alignment and the standard lowering expand size 1 to 0 where a shape holds a 0; once
    shapes are folded to constants, ORT's optimizer removes such an Expand (ExpandElimination takes a target
    0 for 1: wrong shapes, or a later gather reading a non-empty tensor), onnxruntime-web refuses the
    session, and OpenVINO ignores the 0 or dies (SIGFPE). WebNN has no empty tensors anyway."""
    expands = [node for node in model.graph.node if node.op_type == "Expand" and node.domain in ONNX_DOMAINS]
    if not expands:
        return
    infos = _static_infos(model)
    producers = {name: node for node in model.graph.node for name in node.output}
    emptied: list[NodeProto] = []
    for node in expands:
        info = infos.get(node.output[0])
        if info is None or not info.elem_type or info.shape is None:
            continue
        dims = list(info.shape)
        if 0 in dims and all(isinstance(d, int) for d in dims):
            emptied.extend(producers[name] for name in node.input if name in producers)
            constant = helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                        value=helper.make_tensor("", info.elem_type, dims, []))
            node.CopyFrom(constant)
    if emptied:  # what only the Expands read (the alignment's reshapes)
        remove_dead(model.graph, emptied, cascade=True, initializers="freed")


def webnn_check(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None,
                external_data_folder: str | os.PathLike | None = None) -> list[Finding]:
    """Every node of ``model`` ORT's WebNN EP would not take, and why (see the module docstring). A
    constant whose values a check reads (a Reshape's shape) is read from ``external_data_folder``, the
    model's folder, if kept in a file.

    Args:
        model: the model; it is not changed (the check works on a copy with its input shapes fixed).
        input_shapes: input name to its static dims, for inputs with symbolic dims.
        external_data_folder: the model's folder; None when no external constant is needed.

    Returns:
        One Finding per node and reason (a graph input left symbolic is a finding too, not an error).
    """
    copy = ModelProto()
    copy.CopyFrom(model)
    findings: list[Finding] = []
    try:
        fix_input_shapes(copy, input_shapes)
    except NotStatic as error:
        findings.append(Finding("", "(graph inputs)", str(error)))
    infos = _static_infos(copy)
    constants = ConstantView(copy.graph, external_data_folder=external_data_folder)  # once, read on demand

    def shape(name: str) -> tuple | None:
        info = infos.get(name)
        return None if info is None or info.shape is None else tuple(info.shape)

    def rank(name: str) -> int | None:
        dims = shape(name)
        return None if dims is None else len(dims)

    for node in copy.graph.node:
        op_type = node.op_type if node.domain in ONNX_DOMAINS else f"{node.domain}.{node.op_type}"
        reasons = []
        if node.domain not in ONNX_DOMAINS or node.op_type not in WEBNN_OPS:
            reasons.append("not in the WebNN EP's op table")
        if holds_subgraph(node):
            reasons.append("holds a subgraph: WebNN graphs have no control flow")
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "GatherND" and attributes.get("batch_dims", 0):
            reasons.append(f"batch_dims {attributes['batch_dims']} (WebNN's gatherND has none)")
        if node.op_type == "GatherElements":
            data_shape, indices_shape = shape(node.input[0]), shape(node.input[1])
            axis = attributes.get("axis", 0)
            if data_shape is None or indices_shape is None:
                reasons.append("shapes not static (WebNN's gatherElements needs indices shaped like the input)")
            elif len(data_shape) == len(indices_shape) and any(
                    a != b for d, (a, b) in enumerate(zip(data_shape, indices_shape)) if d != axis % len(data_shape)):
                reasons.append(f"indices {list(indices_shape)} not shaped like the input {list(data_shape)} off the axis")
        if node.op_type == "Clip":
            info = infos.get(node.input[0])
            if info is not None and info.elem_type not in (TensorProto.FLOAT, TensorProto.FLOAT16, 0):
                reasons.append("Clip of a non-float tensor (ORT's WebNN EP reads its bounds as float or float16 only)")
        if node.op_type == "Gather" and rank(node.input[0]) == 0:
            reasons.append("rank-0 input (the EP refuses it)")
        if node.op_type in ("Gather", "GatherElements") and len(node.input) > 1:
            info = infos.get(node.input[1])
            if info is not None and info.elem_type not in (TensorProto.INT32, 0):
                reasons.append("indices not int32 (the index type every WebNN backend takes)")
        # (GatherND: ONNX's takes int64 indices only; ORT's WebNN EP runs int64 values as int32 on a backend
        # without int64, so there int64 is the form to take)
        for position in CONSTANT_INPUTS.get(node.op_type, ()):
            if position < len(node.input) and node.input[position] and node.input[position] not in constants:
                reasons.append(f"input {position} ({node.input[position]!r}) is not a constant")
        if node.op_type == "Reshape" and len(node.input) > 1 and node.input[1] in constants:
            if 0 in constants[node.input[1]].reshape(-1).tolist():
                reasons.append("a 0 in the shape input (the EP does not support it)")
        for name in (*node.input, *node.output):
            r = rank(name)
            if name and r is not None and r > MAX_RANK:
                reasons.append(f"{name!r} has rank {r} > {MAX_RANK}")
                break
        for name in (*node.input, *node.output):
            info = infos.get(name)
            if name and info is not None and info.elem_type in NO_WEBNN_TYPES:
                reasons.append(f"{name!r} is {NO_WEBNN_TYPES[info.elem_type]} ({_NO_SUCH_TENSORS})")
                break
        findings.extend(Finding(node.name, op_type, reason) for reason in reasons)
    return findings



def lowering_findings(lowered: ModelProto, report, input_shapes: dict[str, tuple[int, ...]] | None = None,
                      external_data_folder: str | os.PathLike | None = None) -> list[Finding]:
    """``webnn_check``'s findings on the nodes ``lower_for_webnn`` emitted (``report`` is its report; each
    emitted node is named after the node it replaces): what the lowering itself put outside WebNN's
    subset. A tensor type WebNN lacks (bfloat16, say) is the model's own, not the lowering's.

    Args:
        lowered: the model ``lower_for_webnn`` returned.
        report: the LowerReport it returned.
        input_shapes: the input shapes given to ``lower_for_webnn``.
        external_data_folder: the model's folder; None when no external constant is needed.

    Returns:
        The Findings of the emitted nodes.
    """
    prefixes = tuple(f"{o.node}/" for o in report.outcomes if o.lowered and o.node)
    return [f for f in webnn_check(lowered, input_shapes, external_data_folder)
            if f.node.startswith(prefixes) and _NO_SUCH_TENSORS not in f.reason]


__all__ = ["CONSTANT_INPUTS", "FORMS", "MAX_RANK", "MIN_OPSET", "WEBNN_OPS", "Finding", "NotStatic", "fix_input_shapes",
           "fold_shape_arithmetic", "lower_for_webnn", "lowering_findings", "webnn_check"]
