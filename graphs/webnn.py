"""The WebNN target: GatherMultiaxis lowered to ops that map one-to-one onto WebNN, and a check of which
nodes of a model fall outside what ONNX Runtime's WebNN execution provider runs.

WebNN graphs have static shapes, so the lowering needs every input shape fixed (the model's own static
dims, or ``input_shapes``). With the shapes known, each GatherMultiaxis node becomes one WebNN
``gather`` of the data reshaped to 1-D, at flat offsets the graph computes from constants and the
indices:

    offset = sum over axes j of  c_j * stride(axes[j])   +   sum over the other dims d of  iota_d * stride(d)

where ``c_j`` is component j of the index tuples (the indices themselves for one axis; for several, a
``gather`` of the last indices dimension at the constant positions j, j + k, ...), made non-negative
(``where(lesser(c, 0), c + dim, c)``) and kept in range (``where``), and ``iota_d`` a constant
``[0, 1, ..., out_d - 1]`` shaped to broadcast along d (stride 0 where the data has size 1 there). The
offsets are cast to int32 (the index type every WebNN backend takes) when the data has fewer than 2**31
elements. Every tensor has the rank of the output or less, and the data is read by exactly one
``gather``, so a ranks <= 5 model stays within WebNN's guaranteed ranks.

Modes: WebNN cannot raise. ``clamp`` is exact (Chromium's backends clamp, then wrap: the same map).
``zero`` reads a clamped offset and writes 0 where any component was out of range (``where``).
``error`` and ``error_nonempty`` are lowered as ``clamp``: bit-identical to ORT wherever every index is
in range; where one is not, ORT raises and the WebNN model returns the clamped read, as Chromium's
backends do (the README's table "Out-of-range indices").

``webnn_check`` lists each node that ORT's WebNN EP would not take (its op table, onnxruntime-web 1.22's
js/web/docs/webnn-operators.md, and the constraints stated there), and each value whose rank or type
WebNN does not guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from ..ops.contract import DOMAIN, OP_TYPE, GatherShapeError, Mode, normalize_axes, output_dims
from ..ops.kernel import gather_multiaxis
from .builder import NameScope, NodeBuilder
from .inference import graph_infos, inferred, typing_copy
from .lower import LoweredNode, LowerReport, lower_model
from .passes import pass_copy
from .walk import ONNX_DOMAINS, all_names, constant_arrays, default_opset, drop_unused, holds_subgraph, node_holders

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
                   "Tile": (1,), "Split": (1,), "CumSum": (1,), "Trilu": (1,),
                   **{op: (1,) for op in WEBNN_OPS if op.startswith("Reduce")}}
NO_WEBNN_TYPES = {TensorProto.STRING: "string", TensorProto.DOUBLE: "double", TensorProto.COMPLEX64: "complex64",
                  TensorProto.COMPLEX128: "complex128", TensorProto.BFLOAT16: "bfloat16"}
_NO_SUCH_TENSORS = "WebNN has no such tensors"  # the finding on a value of one of NO_WEBNN_TYPES
INT32_LIMIT = 2 ** 31


class NotStatic(ValueError):
    """The model's input shapes are not all fixed: WebNN graphs have static shapes."""


@dataclass
class Finding:
    node: str
    op_type: str
    reason: str


def fix_input_shapes(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None) -> None:
    """Give every graph input of ``model`` (changed in place) a static shape: ``input_shapes[name]``, or
    its own static dims. Raises NotStatic naming the inputs that still have symbolic dims."""
    input_shapes = input_shapes or {}
    initializers = {init.name for init in model.graph.initializer}
    symbolic = []
    for value in model.graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        tensor_type = value.type.tensor_type
        if value.name in input_shapes:
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
FOLD_LIMIT = 1 << 16  # elements: shape arithmetic, not data
FOLD_ROUNDS = 4


def _exact_kind(array: np.ndarray) -> bool:
    return array.dtype.kind in "iub"


def fold_shape_arithmetic(model: ModelProto) -> int:
    """Replace, in the main graph of ``model`` (changed in place, input shapes fixed), every node whose
    value its static shapes and constants decide (Shape of a static value, and integer arithmetic on
    such values and constants) by a Constant: WebNN needs Reshape/Expand/Slice shapes constant, and the
    lowering needs static shapes. Integer and bool values only, so folding is exact. Returns how many."""
    from onnx.reference import ReferenceEvaluator

    infos = _static_infos(model)
    known = constant_arrays(model.graph)
    opset = default_opset(model)
    folded = {}
    for position, node in enumerate(model.graph.node):
        value = None
        if node.op_type == OP_TYPE and node.domain == DOMAIN:  # the shape gathers the rewrite made
            if all(name in known and _exact_kind(known[name]) for name in node.input):
                mode = next((a.s.decode() for a in node.attribute if a.name == "mode"), None)
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
        elif all(name in known and _exact_kind(known[name]) for name in node.input if name):
            inputs = [name for name in node.input if name]
            single = helper.make_model(
                helper.make_graph([node], "fold", [helper.make_tensor_value_info(
                    name, helper.np_dtype_to_tensor_dtype(known[name].dtype), known[name].shape) for name in inputs],
                    [helper.make_empty_tensor_value_info(node.output[0])]),
                opset_imports=[helper.make_opsetid("", opset)])
            try:
                value = np.asarray(ReferenceEvaluator(single).run(None, {name: known[name] for name in inputs})[0])
            except Exception:  # noqa: BLE001 - not foldable here: ORT computes it at run time
                continue
        if value is None or not _exact_kind(value) or value.size > FOLD_LIMIT:
            continue
        known[node.output[0]] = value
        folded[position] = helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                            value=numpy_helper.from_array(value, name=""))
    if folded:
        nodes = [folded.get(position, node) for position, node in enumerate(model.graph.node)]
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        constants = [node for node in model.graph.node if node.op_type == "Constant"]
        drop_unused(model.graph, constants, all_initializers=False)
    return len(folded)


class _WebNNLowering:
    def __init__(self, model: ModelProto, report: LowerReport):
        self.opset = default_opset(model)
        self.names = NameScope(all_names(model))
        self.infos = _static_infos(model)
        self.constants = constant_arrays(model.graph)
        self.report = report
        self.freed: set[str] = set()

    def node(self, node: NodeProto) -> list[NodeProto] | None:
        """The replacement of one main-graph GatherMultiaxis node, or None (reason in the report)."""
        try:
            nodes = self._lower(node)
        except _NotLowered as reason:
            self.report.outcomes.append(LoweredNode(node.name, "main graph", False,
                                                    f"{reason}; lowered to standard ONNX ops instead"))
            return None
        self.report.outcomes.append(LoweredNode(node.name, "main graph", True))
        self.freed.add(node.input[2])
        return nodes

    def _shape(self, name: str, what: str) -> tuple[int, ...]:
        info = self.infos.get(name)
        if info is None or info.shape is None or not all(isinstance(d, int) for d in info.shape):
            raise _NotLowered(f"the {what}'s shape is not static (WebNN graphs have static shapes)")
        return tuple(info.shape)

    def _lower(self, node: NodeProto) -> list[NodeProto]:
        if self.opset < MIN_OPSET:
            raise _NotLowered(f"the WebNN target needs opset {MIN_OPSET} (the model has {self.opset})")
        mode_attribute = next((a for a in node.attribute if a.name == "mode"), None)
        if mode_attribute is None:
            raise _NotLowered("the node has no mode")
        mode = Mode.from_any(mode_attribute.s.decode())
        data, indices = node.input[0], node.input[1]
        data_shape, indices_shape = self._shape(data, "data"), self._shape(indices, "indices")
        if node.input[2] not in self.constants:
            raise _NotLowered("its axes are not a constant")
        elem_type = self.infos[data].elem_type
        if elem_type in NO_WEBNN_TYPES:
            raise _NotLowered(f"WebNN has no {NO_WEBNN_TYPES[elem_type]} tensors")
        raw_axes = [int(a) for a in self.constants[node.input[2]].reshape(-1)]
        try:
            out = output_dims(data_shape, indices_shape, raw_axes)
            axes = normalize_axes(raw_axes, len(data_shape))
        except GatherShapeError as error:
            raise _NotLowered(f"its shapes break the operator's rule: {error}") from None
        rank = len(data_shape)
        if rank > MAX_RANK:
            raise _NotLowered(f"rank {rank} > {MAX_RANK}, the ranks every WebNN backend supports")
        if 0 in data_shape or 0 in indices_shape or 0 in out:
            raise _NotLowered("a size-0 dimension (WebNN tensors have none)")
        b = NodeBuilder(self.opset, self.names, node.name or "gather_multiaxis")
        strides = [prod(data_shape[d + 1:]) for d in range(rank)]
        terms, valid = [], None
        k = len(axes)
        logical_last = indices_shape[-1] // k if rank and k > 1 else None
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
            zero, size = b.constant(0, f"zero{j}"), b.constant(dim, f"dim{j}")
            if mode == Mode.ZERO:
                above = b.op("Less", [component, size], f"below_end{j}")
                below = b.op("Less", [component, b.constant(-dim, f"minus_dim{j}")], f"before_start{j}")
                in_range = b.op("And", [above, b.op("Not", [below], f"not_before_start{j}")], f"in_range{j}")
                valid = in_range if valid is None else b.op("And", [valid, in_range], f"in_range_all{j}")
            negative = b.op("Less", [component, zero], f"negative{j}")
            wrapped = b.op("Where", [negative, b.op("Add", [component, size], f"from_end{j}"), component], f"wrapped{j}")
            low = b.op("Less", [wrapped, zero], f"still_negative{j}")
            wrapped = b.op("Where", [low, zero, wrapped], f"at_least_zero{j}")
            last = b.constant(dim - 1, f"last{j}")
            high = b.op("Less", [last, wrapped], f"past_end{j}")
            coordinate = b.op("Where", [high, last, wrapped], f"coordinate{j}")
            terms.append((b.op("Mul", [coordinate, b.constant(strides[axis], f"stride{j}")], f"offset{j}"),
                          indices_shape[:-1] + (logical_last,) if k > 1 else indices_shape))
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
        if prod(data_shape) < INT32_LIMIT:
            offsets = b.cast(offsets, TensorProto.INT32, "offsets_int32")
        flat = b.op("Reshape", [data, b.constant([prod(data_shape)], "flat_shape")], "flat_data")
        result = b.op("Gather", [flat, offsets], "read", axis=0)
        if valid is not None:
            zero_value = numpy_helper.from_array(np.zeros((), helper.tensor_dtype_to_np_dtype(elem_type)), name="")
            zero = b.op("Constant", [], "zero_value", value=zero_value)
            result = b.op("Where", [valid, result, zero], "zeroed")
        b.rename_last_output(node.output[0])
        return b.nodes


class _NotLowered(Exception):
    pass


def lower_for_webnn(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None
                    ) -> tuple[ModelProto, LowerReport]:
    """A copy of ``model`` (rewritten: holding GatherMultiaxis nodes) with its input shapes fixed and
    every GatherMultiaxis node of the main graph lowered for WebNN (see the module docstring), and the
    report. Raises NotStatic when an input shape is not fixed."""
    report = LowerReport()
    is_target = lambda node: node.op_type == OP_TYPE and node.domain == DOMAIN  # noqa: E731
    result, failure = pass_copy(model, is_target)
    fix_input_shapes(result, input_shapes)
    for _ in range(FOLD_ROUNDS):  # a folded shape can make the next value's shape static: fold again
        if not fold_shape_arithmetic(result):
            break
    lowering = _WebNNLowering(result, report)
    replaced = []
    for node in result.graph.node:
        replaced.extend(lowering.node(node) or [node] if is_target(node) else [node])
    del result.graph.node[:]
    result.graph.node.extend(replaced)
    for holder in node_holders(result):
        if holder is not result.graph:
            for node in holder.node:
                if is_target(node):
                    report.outcomes.append(LoweredNode(node.name, "a subgraph", False,
                                                       "inside an If/Loop/Scan body (WebNN graphs have no control flow); "
                                                       "lowered to standard ONNX ops instead"))
    if failure:
        report.outcomes.append(LoweredNode("", "model-local functions", False, failure))
    candidates = [node for node in result.graph.node if any(name in lowering.freed for name in node.output)]
    drop_unused(result.graph, candidates, lowering.freed, cascade=True, all_initializers=False)
    # What WebNN cannot take still runs anywhere: the standard lowering (it stays outside WebNN's subset,
    # as the report says, and webnn_check lists it)
    result, standard = lower_model(result)
    report.outcomes.extend(LoweredNode(o.node, o.graph, False, f"not lowered at all: {o.reason}")
                           for o in standard.outcomes if not o.lowered)
    return result, report


def webnn_check(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None) -> list[Finding]:
    """Every node of ``model`` ORT's WebNN EP would not take, and why (see the module docstring)."""
    copy = ModelProto()
    copy.CopyFrom(model)
    findings: list[Finding] = []
    try:
        fix_input_shapes(copy, input_shapes)
    except NotStatic as error:
        findings.append(Finding("", "(graph inputs)", str(error)))
    infos = _static_infos(copy)
    constants = constant_arrays(copy.graph)  # once: read for every node below

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
        if node.op_type == "Gather" and rank(node.input[0]) == 0:
            reasons.append("rank-0 input (the EP refuses it)")
        if node.op_type in ("Gather", "GatherElements", "GatherND") and len(node.input) > 1:
            info = infos.get(node.input[1])
            if info is not None and info.elem_type not in (TensorProto.INT32, 0):
                reasons.append("indices not int32 (the index type every WebNN backend takes)")
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



def lowering_findings(lowered: ModelProto, report, input_shapes: dict[str, tuple[int, ...]] | None = None
                      ) -> list[Finding]:
    """``webnn_check``'s findings on the nodes ``lower_for_webnn`` emitted (``report`` is its report; each
    emitted node is named after the node it replaces): what the lowering itself put outside WebNN's
    subset. A tensor type WebNN lacks (bfloat16, say) is the model's own, not the lowering's."""
    prefixes = tuple(f"{o.node}/" for o in report.outcomes if o.lowered and o.node)
    return [f for f in webnn_check(lowered, input_shapes)
            if f.node.startswith(prefixes) and _NO_SUCH_TENSORS not in f.reason]


__all__ = ["CONSTANT_INPUTS", "MAX_RANK", "MIN_OPSET", "WEBNN_OPS", "Finding", "NotStatic", "fix_input_shapes",
           "fold_shape_arithmetic", "lower_for_webnn", "lowering_findings", "webnn_check"]
