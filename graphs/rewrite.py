"""Rewrite of a whole ONNX model: every Gather, GatherElements and GatherND becomes GatherMultiaxis.

Ranks are found in four layers, each filling what the previous ones missed: ONNX shape inference, ORT's
symbolic shape inference, the rank rules of ``rank_rules``, and finally a run-time alignment
(``runtime_alignment``) whose shapes and axes the model computes itself. Inference runs on a *typing
copy* that holds only what ORT enforces (graph input shapes, initializers, Constant values): shapes
declared by value_info and outputs are dropped (ORT ignores them, so a size they declare must decide
nothing; their element types are kept),
and large initializers and Constant values become bare graph inputs (their dims are all inference
needs, and data propagation would materialise them). Subgraphs (If / Loop / Scan bodies) are rewritten
with the names of their enclosing scopes visible; model-local functions that hold a gather anywhere are
inlined first, their attribute defaults applied. A node is only ever replaced by an equivalent subgraph
or left as it is, with the reason in the report; every replaced output gets a value_info.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

import onnx
import onnx.inliner
import onnx.shape_inference
from onnx import AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, TypeProto, helper, numpy_helper

from ..ops.signature import DOMAIN
from . import ortopt
from .builder import NameScope, NodeBuilder
from .rank_rules import apply_rank_rule
from .rules import RULES, LeftUnchanged, TensorInfo, emit_replacement

GATHER_OPS = tuple(RULES)
_ONNX_DOMAINS = ("", "ai.onnx")
_STRIP_ABOVE_BYTES = 1 << 16


@dataclass
class NodeOutcome:
    op_type: str
    node: str
    graph: str
    rewritten: bool
    reason: str = ""


@dataclass
class RewriteReport:
    outcomes: list[NodeOutcome] = field(default_factory=list)

    @property
    def rewritten(self) -> int:
        return sum(o.rewritten for o in self.outcomes)

    @property
    def left(self) -> int:
        return sum(not o.rewritten for o in self.outcomes)

    def counts(self) -> dict[str, dict[str, int]]:
        table: dict[str, Counter] = {}
        for outcome in self.outcomes:
            table.setdefault(outcome.op_type, Counter())["rewritten" if outcome.rewritten else "left"] += 1
        return {op: {"rewritten": c["rewritten"], "left": c["left"]} for op, c in sorted(table.items())}

    def as_dict(self) -> dict:
        return {"rewritten": self.rewritten, "left": self.left, "by_op": self.counts(),
                "nodes": [vars(o) for o in self.outcomes]}

    def table(self) -> str:
        lines = [f"{'op type':<16}{'rewritten':>10}{'left':>6}"]
        for op, counts in self.counts().items():
            lines.append(f"{op:<16}{counts['rewritten']:>10}{counts['left']:>6}")
        lines.append(f"{'total':<16}{self.rewritten:>10}{self.left:>6}")
        for outcome in self.outcomes:
            if not outcome.rewritten:
                lines.append(f"  left {outcome.op_type} {outcome.node!r} in {outcome.graph}: {outcome.reason}")
        return "\n".join(lines)


def _tensor_info(type_proto: TypeProto) -> TensorInfo | None:
    if not type_proto.HasField("tensor_type"):
        return None
    tensor_type = type_proto.tensor_type
    if not tensor_type.HasField("shape"):
        return TensorInfo(tensor_type.elem_type, None)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim)
    return TensorInfo(tensor_type.elem_type, dims)


def _graph_infos(graph: GraphProto) -> dict[str, TensorInfo]:
    infos = {init.name: TensorInfo(init.data_type, tuple(init.dims)) for init in graph.initializer}
    for value in (*graph.input, *graph.value_info, *graph.output):
        info = _tensor_info(value.type)
        if info is not None:
            infos[value.name] = info
    for node in graph.node:  # Constant outputs: shape inference does not always record them
        if node.op_type == "Constant" and node.domain in _ONNX_DOMAINS and node.output[0] not in infos:
            for attribute in node.attribute:
                if attribute.name == "value":
                    infos[node.output[0]] = TensorInfo(attribute.t.data_type, tuple(attribute.t.dims))
    return infos


def _typing_copy(model: ModelProto) -> ModelProto:
    """A copy for shape inference holding only what ORT enforces (see the module docstring). Built piece
    by piece, so that no large payload is ever copied."""
    light = ModelProto()
    for field in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(light, field, getattr(model, field))
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    copier = _TypingCopier(NameScope(_all_names(model)))
    light.graph.CopyFrom(copier.graph(model.graph, main=True))
    declared = {value.name for value in light.graph.input}
    for value in copier.hoisted:
        if value.name not in declared:
            declared.add(value.name)
            light.graph.input.append(value)
    return light


@dataclass
class _TypingCopier:
    names: NameScope
    hoisted: list[onnx.ValueInfoProto] = field(default_factory=list)

    def graph(self, graph: GraphProto, main: bool) -> GraphProto:
        light = GraphProto(name=graph.name)
        light.input.extend(graph.input)
        light.output.extend(graph.output)
        light.value_info.extend(graph.value_info)
        # Declared element types are kept, declared sizes not: ORT does not enforce value_info, graph
        # outputs, or Loop and Scan body inputs (their types come from the node's inputs).
        for value in (*light.output, *light.value_info, *(light.input if not main else ())):
            if value.type.HasField("tensor_type"):
                value.type.tensor_type.ClearField("shape")
        for init in graph.initializer:
            if _is_large(init):
                self.hoisted.append(_bare_input(init.name, init))
            else:
                light.initializer.append(init)
        light.sparse_initializer.extend(graph.sparse_initializer)
        for node in graph.node:
            value = _constant_value(node)
            if value is not None and _is_large(value):
                stand_in = self.names.fresh(node.output[0] + "/stripped")
                self.hoisted.append(_bare_input(stand_in, value))
                light.node.append(helper.make_node("Identity", [stand_in], [node.output[0]], name=node.name))
                continue
            copy = light.node.add(op_type=node.op_type, domain=node.domain, name=node.name, overload=node.overload)
            copy.input.extend(node.input)
            copy.output.extend(node.output)
            for attribute in node.attribute:
                if attribute.type == AttributeProto.GRAPH:
                    copy.attribute.add(name=attribute.name, type=attribute.type).g.CopyFrom(
                        self.graph(attribute.g, main=False))
                elif attribute.type == AttributeProto.GRAPHS:
                    copy.attribute.add(name=attribute.name, type=attribute.type).graphs.extend(
                        self.graph(sub, main=False) for sub in attribute.graphs)
                else:
                    copy.attribute.append(attribute)
        return light


def _is_large(tensor: onnx.TensorProto) -> bool:
    """Estimated from dims and type: ByteSize() would encode the whole payload to count it."""
    try:
        item = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        item = 8
    return math.prod(tensor.dims) * max(item, 1) > _STRIP_ABOVE_BYTES


def _bare_input(name: str, tensor: onnx.TensorProto) -> onnx.ValueInfoProto:
    """A graph input standing for a large constant: its type and dims, no data. A 1-D integer one gets a
    symbolic length: data propagation makes a shape of one dimension per element of a static length."""
    dims: list = list(tensor.dims)
    if len(dims) == 1 and tensor.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        dims = [f"{name}/length"]
    return helper.make_tensor_value_info(name, tensor.data_type, dims)


def _constant_value(node: NodeProto) -> onnx.TensorProto | None:
    if node.op_type == "Constant" and node.domain in _ONNX_DOMAINS:
        for attribute in node.attribute:
            if attribute.name == "value":
                return attribute.t
    return None


def _inferred(light: ModelProto) -> ModelProto:
    """Layer 1: ONNX shape inference (with data propagation: shape arithmetic gives sizes)."""
    try:
        return onnx.shape_inference.infer_shapes(light, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - no inference: the other layers find the ranks
        return light


def _symbolic_infos(light: ModelProto) -> dict[str, TensorInfo]:
    """Layer 2: ORT's symbolic shape inference (knows Reshape/Flatten chains and com.microsoft ops).

    Names from every graph; a name defined in two sibling subgraphs is ambiguous and dropped."""
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference, get_opset

        if (get_opset(light) or 0) < 7:
            return {}
        # SymbolicShapeInference.infer_shapes' own steps: it raises when inference is incomplete, after
        # saving "sym_shape_infer_temp.onnx" into the working folder; the partial result is what we want.
        inference = SymbolicShapeInference(2**31 - 1, True, False, 0)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            inference._preprocess(light)
            while inference.run_:
                inference._infer_impl()
            inference._update_output_from_vi()
        inferred = inference.out_mp_
    except Exception:  # noqa: BLE001 - it gives up on some graphs as a whole: the next layers take over
        return {}
    infos: dict[str, TensorInfo] = {}
    seen: Counter = Counter()
    for holder in _node_holders(inferred):
        if isinstance(holder, GraphProto):
            for value in (*holder.value_info, *holder.output):
                info = _tensor_info(value.type)
                if info is not None and info.rank is not None:
                    seen[value.name] += 1
                    infos[value.name] = info
    return {name: info for name, info in infos.items() if seen[name] == 1}


def _node_holders(model: ModelProto) -> Iterator[GraphProto | FunctionProto]:
    """The main graph, every model-local function, and every subgraph nested in any of them."""
    pending: list[GraphProto | FunctionProto] = [model.graph, *model.functions]
    while pending:
        holder = pending.pop()
        yield holder
        pending.extend(sub for node in holder.node for attribute in node.attribute for sub in _subgraphs(attribute))


def _all_names(model: ModelProto) -> set[str]:
    """Every name the model uses anywhere (tensors, nodes, graphs, functions), so that a fresh name
    collides with none: sparse initializers count too, used or not (ORT turns them into initializers)."""
    names: set[str] = {model.graph.name}
    for holder in _node_holders(model):
        names.add(holder.name)
        if isinstance(holder, GraphProto):
            names.update(v.name for v in (*holder.input, *holder.output, *holder.value_info, *holder.initializer))
            names.update(sparse.values.name for sparse in holder.sparse_initializer)
        else:  # a function: its formal inputs and outputs, and its value_info (onnx >= 1.16)
            names.update((*holder.input, *holder.output))
            names.update(v.name for v in getattr(holder, "value_info", ()))
        for node in holder.node:
            names.update(node.input)
            names.update(node.output)
            names.add(node.name)
    return names


def _subgraphs(attribute: AttributeProto) -> list[GraphProto]:
    if attribute.type == AttributeProto.GRAPH:
        return [attribute.g]
    if attribute.type == AttributeProto.GRAPHS:
        return list(attribute.graphs)
    return []


def holds_gather(model: ModelProto, ops: tuple[str, ...] = GATHER_OPS) -> bool:
    """Whether any graph of the model (main graph, subgraphs, model-local functions) holds one of ``ops``."""
    return any(_is_target(node, ops) for holder in _node_holders(model) for node in holder.node)


def _is_target(node: NodeProto, ops: tuple[str, ...]) -> bool:
    return node.op_type in ops and node.domain in _ONNX_DOMAINS


def _default_opset(model: ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in _ONNX_DOMAINS:
            return opset.version
    return 1


def _known_rank(info: TensorInfo | None) -> bool:
    return info is not None and info.rank is not None


@dataclass
class _Rewriter:
    ops: tuple[str, ...]
    opset: int
    names: NameScope
    report: RewriteReport
    light: ModelProto
    runtime_alignment: bool = True
    _symbolic: dict[str, TensorInfo] | None = None

    @property
    def symbolic(self) -> dict[str, TensorInfo]:
        """Layer 2, run once and only when a gather of some graph needs it (it costs ~0.5 s)."""
        if self._symbolic is None:
            self._symbolic = _symbolic_infos(self.light)
        return self._symbolic

    def _lacking(self, graph: GraphProto, infos: dict[str, TensorInfo]) -> bool:
        """Whether a gather of ``graph`` lacks a rank after layer 1."""
        return any(_is_target(node, self.ops) and not all(_known_rank(infos.get(name)) for name in node.input[:2])
                   for node in graph.node)

    def graph(self, graph: GraphProto, inferred: GraphProto, scope: dict[str, TensorInfo],
              constants: dict[str, onnx.TensorProto], path: str) -> None:
        infos = {**scope, **_graph_infos(inferred)}
        if self._lacking(graph, infos):
            for name, info in self.symbolic.items():  # layer 2 where layer 1 has no rank
                if not _known_rank(infos.get(name)):
                    infos[name] = _with_elem_type(info, infos.get(name))
        inputs = {value.name for value in graph.input}  # an initializer that is an input may be fed: not constant
        constants = {**{k: v for k, v in constants.items() if k not in inputs},
                     **{init.name: init for init in graph.initializer if init.name not in inputs},
                     **{node.output[0]: value for node in graph.node if (value := _constant_value(node)) is not None}}
        replacements: dict[int, list[NodeProto]] = {}
        for position, (node, inferred_node) in enumerate(zip(graph.node, inferred.node)):
            for attribute, inferred_attribute in zip(node.attribute, inferred_node.attribute):
                for sub, inferred_sub in zip(_subgraphs(attribute), _subgraphs(inferred_attribute)):
                    self.graph(sub, inferred_sub, infos, constants, f"{path}/{node.name or node.op_type}.{attribute.name}")
            _apply_rank_rule(node, infos, constants)  # layer 3 where layers 1 and 2 have no rank
            if not _is_target(node, self.ops):
                continue
            replacement = self.node(node, infos, path)
            if replacement[-1] is not node:
                replacements[position] = replacement
                _declare_output(graph, node, infos, subgraph=path != "main graph")
        _splice(graph, replacements)

    def node(self, node: NodeProto, infos: dict[str, TensorInfo], path: str) -> list[NodeProto]:
        unknown = TensorInfo(0, None)
        builder = NodeBuilder(self.opset, self.names, node.name or self.names.fresh(f"{node.op_type}_{node.output[0]}"))
        try:
            emit_replacement(node, infos.get(node.input[0], unknown), infos.get(node.input[1], unknown), builder,
                             self.runtime_alignment)
        except LeftUnchanged as reason:
            self.report.outcomes.append(NodeOutcome(node.op_type, node.name, path, False, str(reason)))
            return [node]
        self.report.outcomes.append(NodeOutcome(node.op_type, node.name, path, True))
        return builder.nodes


def _node_key(node: NodeProto) -> tuple:
    return node.op_type, node.domain, node.name, tuple(node.output)


def _splice(graph: GraphProto, replacements: dict[int, list[NodeProto]]) -> None:
    """Put each replacement where its node was. Nodes are moved by an in-place sort, not copied: a graph
    may hold Constant nodes of gigabytes. (Keys are unique by SSA; if not, the graph is rebuilt.)"""
    if not replacements:
        return
    order = {}
    for position, node in enumerate(graph.node):
        order[_node_key(node)] = (position, 0) if position not in replacements else (len(graph.node), 0)
    for position, nodes in replacements.items():
        order.update({_node_key(node): (position, 1 + j) for j, node in enumerate(nodes)})
    if len(order) != len(graph.node) + sum(map(len, replacements.values())):  # a repeated key
        nodes = []
        for position, node in enumerate(graph.node):
            nodes.extend(replacements.get(position, [node]))
        del graph.node[:]
        graph.node.extend(nodes)
        return
    for nodes in replacements.values():
        graph.node.extend(nodes)
    graph.node.sort(key=lambda node: order[_node_key(node)])
    del graph.node[len(graph.node) - len(replacements):]  # the replaced nodes, sorted last


def _with_elem_type(info: TensorInfo, known: TensorInfo | None) -> TensorInfo:
    if info.elem_type or known is None:
        return info
    return TensorInfo(known.elem_type, info.shape)


def _apply_rank_rule(node: NodeProto, infos: dict[str, TensorInfo], constants: dict[str, onnx.TensorProto]) -> None:
    if all(_known_rank(infos.get(name)) for name in node.output if name):
        return

    def constant(name: str) -> np.ndarray | None:
        tensor = constants.get(name)
        return None if tensor is None or tensor.data_location == onnx.TensorProto.EXTERNAL else \
            numpy_helper.to_array(tensor)

    outputs = apply_rank_rule(node, [infos.get(name) if name else None for name in node.input], constant)
    for name, info in zip(node.output, outputs or ()):
        if name and info is not None and info.rank is not None and not _known_rank(infos.get(name)):
            infos[name] = _with_elem_type(info, infos.get(name))


def _declare_output(graph: GraphProto, node: NodeProto, infos: dict[str, TensorInfo], subgraph: bool) -> None:
    """Type a replaced node's output: a value_info with its element type (the data's) and what is known of
    its shape, unless the graph declares it already. A subgraph output declared without a shape gets its
    rank: ORT's Loop and Scan require a shape for every body output and infer none through a custom op."""
    output = node.output[0]
    elem_type = infos.get(node.input[0], TensorInfo(0, None)).elem_type
    shape = infos.get(output, TensorInfo(0, None)).shape
    for declared in graph.output:
        if declared.name == output:
            tensor_type = declared.type.tensor_type
            if subgraph and shape is not None and not tensor_type.HasField("shape"):
                # The rank only: a static size ORT took from here would fix the body output's allocation,
                # and a wrong one ends the process inside the PyOp bridge.
                typed = helper.make_tensor_value_info(output, tensor_type.elem_type or elem_type, [None] * len(shape))
                declared.type.CopyFrom(typed.type)
            return
    if any(value.name == output for value in (*graph.value_info, *graph.input)):
        return
    if elem_type:
        graph.value_info.append(helper.make_tensor_value_info(output, elem_type, None if shape is None else list(shape)))


def _nodes_within(nodes) -> Iterator[NodeProto]:
    """Nodes and, recursively, the nodes of their subgraphs."""
    for node in nodes:
        yield node
        for attribute in node.attribute:
            for sub in _subgraphs(attribute):
                yield from _nodes_within(sub.node)


def _functions_holding(model: ModelProto, is_target: Callable[[NodeProto], bool]) -> set[tuple[str, str]]:
    """Model-local functions holding a target node anywhere: in their body, its subgraphs, or a function
    they call."""
    bodies = {(f.domain, f.name): list(_nodes_within(f.node)) for f in model.functions}
    holding = {key for key, nodes in bodies.items() if any(is_target(n) for n in nodes)}
    grown = True
    while grown:
        grown = False
        for key, nodes in bodies.items():
            if key not in holding and any((n.domain, n.op_type) in holding for n in nodes):
                holding.add(key)
                grown = True
    return holding


def _apply_attribute_defaults(model: ModelProto) -> None:
    """Give every call of a model-local function the defaults of the attributes it does not set
    (``onnx.inliner`` drops FunctionProto.attribute_proto defaults)."""
    defaults = {(f.domain, f.name): list(f.attribute_proto) for f in model.functions if len(f.attribute_proto)}
    if not defaults:
        return
    nodes = list(_nodes_within(model.graph.node))
    for function in model.functions:
        nodes.extend(_nodes_within(function.node))
    for node in nodes:
        for default in defaults.get((node.domain, node.op_type), ()):
            if not any(attribute.name == default.name for attribute in node.attribute):
                node.attribute.append(default)


def inline_functions_holding(model: ModelProto, is_target: Callable[[NodeProto], bool]) -> tuple[ModelProto, str]:
    """``model`` with every model-local function that holds a target node (see _functions_holding)
    inlined, attribute defaults applied first (``model`` is changed for that); and "" or, when onnx's
    inliner fails, the reason (the model then comes back not inlined). Shared by rewrite and lower."""
    holding = _functions_holding(model, is_target)
    if not holding:
        return model, ""
    _apply_attribute_defaults(model)
    try:
        return onnx.inliner.inline_selected_functions(model, sorted(holding)), ""
    except Exception as error:  # noqa: BLE001
        return model, f"the function could not be inlined: {error}"


def _report_function_gathers(model: ModelProto, ops: tuple[str, ...], report: RewriteReport, reason: str) -> None:
    for function in model.functions:
        for node in _nodes_within(function.node):
            if _is_target(node, ops):
                report.outcomes.append(NodeOutcome(node.op_type, node.name, f"function {function.name}", False, reason))


def rewrite_model(model: ModelProto, ops: tuple[str, ...] | list[str] = GATHER_OPS,
                  ort_optimize: bool = False, runtime_alignment: bool = True) -> tuple[ModelProto, RewriteReport]:
    """Return a rewritten copy of ``model`` and the report of what happened to every gather node.

    The copy keeps the model's IR version, opset imports (plus ``ai.onnx.contrib`` 1 when a node was
    rewritten), graph inputs/outputs, initializers, value_info, metadata and doc strings; it adds a
    value_info for every replaced output. With ``ort_optimize``, ORT's offline optimizer runs first (see
    graphs.ortopt: the way to stay bit-identical to the original under ORT's default session options).
    With ``runtime_alignment=False``, a gather whose rank (or GatherND coordinate size) only the run
    time knows is left as it is instead of aligned at run time: for models to be lowered
    (``lower_model`` needs static axes), where the builtin gather is the portable form anyway.
    """
    if ort_optimize:
        model = ortopt.ort_optimize(model)
    ops = tuple(ops)
    unknown_ops = set(ops) - set(GATHER_OPS)
    if unknown_ops:
        raise ValueError(f"cannot rewrite {sorted(unknown_ops)}; the rewritable op types are {list(GATHER_OPS)}")
    report = RewriteReport()
    result = ModelProto()
    result.CopyFrom(model)
    ir_version = result.ir_version
    result, failure = inline_functions_holding(result, lambda node: _is_target(node, ops))
    if failure:
        _report_function_gathers(result, ops, report, failure)
    result.ir_version = ir_version
    if not report.outcomes:  # inlined: what a function still holds is in one that is never called
        _report_function_gathers(result, ops, report, "in a model-local function that no node calls")
    light = _typing_copy(result)
    rewriter = _Rewriter(ops, _default_opset(result), NameScope(_all_names(result)), report, light,
                         runtime_alignment)
    rewriter.graph(result.graph, _inferred(light).graph, {}, {}, "main graph")
    if report.rewritten and not any(o.domain == DOMAIN for o in result.opset_import):
        result.opset_import.add(domain=DOMAIN, version=1)
    return result, report


__all__ = ["GATHER_OPS", "NodeOutcome", "RewriteReport", "holds_gather", "rewrite_model"]
