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
from . import block_quantized, ortopt
from .builder import NameScope, NodeBuilder
from .rank_rules import apply_rank_rule
from .rules import RULES, LeftUnchanged, TensorInfo, emit_replacement

GATHER_OPS = tuple(RULES)

# Ops of other domains that gather inside their kernel: each is a row of the report. A rewrite for one of
# them (a rule that replaces the node) reports a "rewritten" row instead, under the same op name.
_ATTENTION_ROTARY = ("gathers rows of its cos/sin caches by position inside ORT's attention kernel, which "
                     "reads the KV cache too; no standard form of the rest exists to keep it")
INTERNAL_GATHERS: dict[tuple[str, str], str] = {
    ("com.microsoft", "EmbedLayerNormalization"): (
        "its word, position and segment embedding gathers are fused with their sum and LayerNormalization in "
        "one ORT kernel (rewrite the model before ORT's transformers optimizer fuses them)"),
    ("com.microsoft", "QEmbedLayerNormalization"): "its embedding gathers are fused with quantized LayerNormalization",
    ("com.microsoft", "GatherBlockQuantized"): (
        "it gathers blocks of 4/8-bit quantized data and dequantizes them with their scales in one kernel; "
        "rewritten only when asked for (ops including GatherBlockQuantized: graphs/block_quantized.py)"),
    ("com.microsoft", "RotaryEmbedding"): "it gathers cos/sin cache rows by position ids inside the rotation kernel",
    ("com.microsoft", "MRotaryEmbedding"): "it gathers cos/sin cache rows by position ids inside the rotation kernel",
    ("com.microsoft", "GemmaRotaryEmbedding"): "it gathers cos/sin cache rows by position inside the rotation kernel",
    ("com.microsoft", "GroupQueryAttention"): "it " + _ATTENTION_ROTARY,
    ("com.microsoft", "SparseAttention"): "it " + _ATTENTION_ROTARY,
    ("com.microsoft", "TorchEmbedding"): "ORT's kernel of torch's embedding (padding_idx, scale_grad_by_freq)",
    ("com.microsoft", "WordConvEmbedding"): "its embedding gather is fused with a convolution in one ORT kernel",
    ("com.microsoft", "GatherND"): "ORT's own (training) GatherND, not the ONNX op: its semantics are not ONNX's",
}

OPT_IN_OPS = (block_quantized.OP_TYPE,)  # rewritten only when asked for (ops=...): see graphs/block_quantized.py
_ONNX_DOMAINS = ("", "ai.onnx")
_STRIP_ABOVE_BYTES = 1 << 16


@dataclass
class NodeOutcome:
    op_type: str
    node: str
    graph: str
    rewritten: bool
    reason: str = ""              # why it was left, or why it was aligned at run time
    runtime_aligned: bool = False  # rewritten with the run-time alignment (the last resort)


@dataclass
class RewriteReport:
    outcomes: list[NodeOutcome] = field(default_factory=list)

    @property
    def rewritten(self) -> int:
        return sum(o.rewritten for o in self.outcomes)

    @property
    def left(self) -> int:
        return sum(not o.rewritten for o in self.outcomes)

    @property
    def runtime_aligned(self) -> int:
        return sum(o.runtime_aligned for o in self.outcomes)

    def counts(self) -> dict[str, dict[str, int]]:
        table: dict[str, Counter] = {}
        for outcome in self.outcomes:
            table.setdefault(outcome.op_type, Counter())["rewritten" if outcome.rewritten else "left"] += 1
        return {op: {"rewritten": c["rewritten"], "left": c["left"]} for op, c in sorted(table.items())}

    def as_dict(self) -> dict:
        return {"rewritten": self.rewritten, "left": self.left, "runtime_aligned": self.runtime_aligned,
                "by_op": self.counts(),
                "nodes": [vars(o) for o in self.outcomes]}

    def table(self) -> str:
        counts = self.counts()
        width = max([16, *(len(op) + 2 for op in counts)])
        lines = [f"{'op type':<{width}}{'rewritten':>10}{'left':>6}"]
        for op, row in counts.items():
            lines.append(f"{op:<{width}}{row['rewritten']:>10}{row['left']:>6}")
        lines.append(f"{'total':<{width}}{self.rewritten:>10}{self.left:>6}")
        for outcome in self.outcomes:
            if not outcome.rewritten:
                lines.append(f"  left {outcome.op_type} {outcome.node!r} in {outcome.graph}: {outcome.reason}")
            elif outcome.runtime_aligned:
                lines.append(f"  aligned at run time: {outcome.op_type} {outcome.node!r} in {outcome.graph}: "
                             f"{outcome.reason}")
        return "\n".join(lines)


def _tensor_info(type_proto: TypeProto) -> TensorInfo | None:
    if not type_proto.HasField("tensor_type"):
        return None
    tensor_type = type_proto.tensor_type
    if not tensor_type.HasField("shape"):
        return TensorInfo(tensor_type.elem_type, None)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim)
    return TensorInfo(tensor_type.elem_type, dims)


def _graph_infos(graph: GraphProto, main: bool = False) -> dict[str, TensorInfo]:
    """What inference wrote into ``graph`` (of the typing copy), with the facts ORT enforces last so that
    nothing hides them: initializer dims, Constant values and the main graph's input shapes."""
    infos: dict[str, TensorInfo] = {}
    for value in (*graph.value_info, *graph.output, *(graph.input if not main else ())):
        _learn(infos, value.name, _tensor_info(value.type))
    facts = {init.name: TensorInfo(init.data_type, tuple(init.dims)) for init in graph.initializer}
    if main:
        facts.update({value.name: info for value in graph.input if (info := _tensor_info(value.type)) is not None})
    for node in graph.node:
        value = _constant_value(node)
        if value is not None:
            facts[node.output[0]] = TensorInfo(value.data_type, tuple(value.dims))
    for name, info in facts.items():
        if info.rank is not None or not _known_rank(infos.get(name)):
            infos[name] = _with_elem_type(info, infos.get(name))
    return infos


def _learn(infos: dict[str, TensorInfo], name: str, info: TensorInfo | None) -> None:
    """Record ``info`` for ``name`` unless it knows less than what is recorded: an entry without a shape
    never replaces a known rank (it keeps only its element type when the known one has none)."""
    if info is None:
        return
    known = infos.get(name)
    if _known_rank(known) and info.rank is None:
        if not known.elem_type and info.elem_type:
            infos[name] = TensorInfo(info.elem_type, known.shape)
        return
    infos[name] = _with_elem_type(info, known)


def _declared_ranks(graph: GraphProto) -> dict[str, TensorInfo]:
    """The ranks (never the sizes: ORT does not enforce them) that ``graph`` of the original model
    declares for values no fact covers: value_info, outputs and subgraph inputs. Used only where
    inference says nothing."""
    ranks = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        info = _tensor_info(value.type)
        if info is not None and info.rank is not None:
            ranks[value.name] = TensorInfo(info.elem_type, (None,) * info.rank)
    return ranks


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
        # A value_info entry for a fact (an initializer, a Constant output, an input) is left out: its
        # cleared shape would hide the fact (the dynamo exporter writes one for every initializer).
        facts = {init.name for init in graph.initializer} | {value.name for value in graph.input} | {
            node.output[0] for node in graph.node if _constant_value(node) is not None}
        light.value_info.extend(value for value in graph.value_info if value.name not in facts)
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
            stand_in = ortopt.typing_stand_in(node)
            if stand_in is not None:  # an ORT fused op: a standard op of the same output type and shape
                light.node.append(stand_in)
                continue
            copy = light.node.add(op_type=node.op_type, domain=node.domain, name=node.name, overload=node.overload)
            copy.input.extend(node.input)
            copy.output.extend(node.output)
            for attribute in node.attribute:
                if attribute.type == AttributeProto.GRAPH:
                    body = copy.attribute.add(name=attribute.name, type=attribute.type).g
                    body.CopyFrom(self.graph(attribute.g, main=False))
                    if node.op_type == "Loop" and node.domain in _ONNX_DOMAINS:
                        _type_loop_counters(body)
                elif attribute.type == AttributeProto.GRAPHS:
                    copy.attribute.add(name=attribute.name, type=attribute.type).graphs.extend(
                        self.graph(sub, main=False) for sub in attribute.graphs)
                else:
                    copy.attribute.append(attribute)
        return light


def _type_loop_counters(body: GraphProto) -> None:
    """A Loop body's first two inputs are facts of the Loop spec: the iteration number (an int64 scalar)
    and the condition (a bool scalar)."""
    for value, elem_type in zip(body.input, (onnx.TensorProto.INT64, onnx.TensorProto.BOOL)):
        value.type.CopyFrom(helper.make_tensor_type_proto(elem_type, []))


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
                   or block_quantized.is_target(node, self.ops)
                   and not all(_known_rank(infos.get(name)) for name in node.input if name)
                   for node in graph.node)

    def graph(self, graph: GraphProto, inferred: GraphProto, scope: dict[str, TensorInfo],
              constants: dict[str, onnx.TensorProto], path: str) -> None:
        main = path == "main graph"
        infos = dict(scope)
        for name, info in _graph_infos(inferred, main).items():
            _learn(infos, name, info)
        if self._lacking(graph, infos):
            for name, info in self.symbolic.items():  # layer 2 where layer 1 has no rank
                if not _known_rank(infos.get(name)):
                    infos[name] = _with_elem_type(info, infos.get(name))
        declared = _declared_ranks(graph)
        for value in graph.input:  # a body input's declared rank, where inference says nothing
            if not _known_rank(infos.get(value.name)) and value.name in declared:
                infos[value.name] = _with_elem_type(declared[value.name], infos.get(value.name))
        inputs = {value.name for value in graph.input}  # an initializer that is an input may be fed: not constant
        constants = {**{k: v for k, v in constants.items() if k not in inputs},
                     **{init.name: init for init in graph.initializer if init.name not in inputs},
                     **{node.output[0]: value for node in graph.node if (value := _constant_value(node)) is not None}}
        replacements: dict[int, list[NodeProto]] = {}
        declarations = _Declared.of(graph)
        for position, (node, inferred_node) in enumerate(zip(graph.node, inferred.node)):
            for attribute, inferred_attribute in zip(node.attribute, inferred_node.attribute):
                for sub, inferred_sub in zip(_subgraphs(attribute), _subgraphs(inferred_attribute)):
                    self.graph(sub, inferred_sub, infos, constants, f"{path}/{node.name or node.op_type}.{attribute.name}")
            if (node.domain, node.op_type) in INTERNAL_GATHERS and not block_quantized.is_target(node, self.ops):
                self.report.outcomes.append(_internal_gather_outcome(node, path))
            _apply_rank_rule(node, infos, constants)  # layer 3 where layers 1 and 2 have no rank
            for name in node.output:  # then a declared rank, where no inference layer says anything
                if name in declared and not _known_rank(infos.get(name)):
                    infos[name] = _with_elem_type(declared[name], infos.get(name))
            if block_quantized.is_target(node, self.ops):
                replacement = self.block_quantized(node, infos, constants, path)
            elif _is_target(node, self.ops):
                replacement = self.node(node, infos, path, graph)
            else:
                continue
            if replacement[-1] is not node:
                replacements[position] = replacement
                _declare_output(graph, node, infos, path != "main graph", declarations)
        _splice(graph, replacements)

    def node(self, node: NodeProto, infos: dict[str, TensorInfo], path: str, graph: GraphProto) -> list[NodeProto]:
        unknown = TensorInfo(0, None)
        builder = NodeBuilder(self.opset, self.names, node.name or self.names.fresh(f"{node.op_type}_{node.output[0]}"))
        try:
            missing = emit_replacement(node, infos.get(node.input[0], unknown), infos.get(node.input[1], unknown),
                                       builder, self.runtime_alignment)
        except LeftUnchanged as reason:
            self.report.outcomes.append(NodeOutcome(node.op_type, node.name, path, False, str(reason)))
            return [node]
        if missing is None:
            self.report.outcomes.append(NodeOutcome(node.op_type, node.name, path, True))
        else:
            why = "; ".join(_why_rank_unknown(name, graph, infos) for name in node.input[:2]
                            if not _known_rank(infos.get(name)))
            self.report.outcomes.append(NodeOutcome(node.op_type, node.name, path, True,
                                                    f"{missing}: {why}" if why else missing, runtime_aligned=True))
        return builder.nodes

    def block_quantized(self, node: NodeProto, infos: dict[str, TensorInfo], constants: dict[str, onnx.TensorProto],
                        path: str) -> list[NodeProto]:
        builder = NodeBuilder(self.opset, self.names, node.name or self.names.fresh(f"{node.op_type}_{node.output[0]}"))
        # An initializer's own dims where a shapeless value_info (onnxruntime-genai writes one per initializer) hid them
        tables = {name: TensorInfo(constants[name].data_type, tuple(constants[name].dims))
                  for name in node.input if name in constants and not _known_rank(infos.get(name))}
        try:
            output = block_quantized.emit_gather_block_quantized(node, {**infos, **tables}, builder)
        except LeftUnchanged as reason:
            self.report.outcomes.append(NodeOutcome(node.op_type, node.name, path, False, str(reason)))
            return [node]
        infos[node.output[0]] = output  # typed by the scales (the data are quantized)
        self.report.outcomes.append(NodeOutcome(node.op_type, node.name, path, True))
        return builder.nodes


def _internal_gather_outcome(node: NodeProto, path: str) -> NodeOutcome:
    op = f"{node.domain}.{node.op_type}"
    why = INTERNAL_GATHERS[node.domain, node.op_type]
    return NodeOutcome(op, node.name, path, False, f"inside {op}: not rewritten, {why}")


def _why_rank_unknown(name: str, graph: GraphProto, infos: dict[str, TensorInfo]) -> str:
    """Where the unknown rank of ``name`` starts: follow the producers whose inputs' ranks are unknown
    too, up to the first value no layer could type (a node whose inputs are known, or a graph input)."""
    producers = {output: node for node in graph.node for output in node.output if output}
    inputs = {value.name for value in graph.input}
    seen = set()
    current = name
    while current not in seen:
        seen.add(current)
        node = producers.get(current)
        if node is None:
            if current in inputs:
                return f"{current!r} is an input of {graph.name or 'the graph'} declared without a shape"
            return f"{current!r} comes from an enclosing graph, which knows no rank for it"
        unknown = [i for i in node.input if i and not _known_rank(infos.get(i))]
        if unknown:
            current = unknown[0]
            continue
        op = f"{node.domain}.{node.op_type}" if node.domain not in _ONNX_DOMAINS else node.op_type
        where = "" if current == name else f" (via {name!r})"
        return (f"{current!r}{where} is an output of {op} node {node.name!r}, whose output rank neither ONNX's "
                f"nor ORT's shape inference, nor a rank rule, nor a declared value_info gives")
    return f"{name!r} is computed in a cycle of unknown ranks"


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
    replaced = len(replacements)
    for position in list(replacements):  # each list freed once copied in: the peak holds one copy, not two
        graph.node.extend(replacements.pop(position))
    graph.node.sort(key=lambda node: order[_node_key(node)])
    del graph.node[len(graph.node) - replaced:]  # the replaced nodes, sorted last


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

    inputs = [infos.get(name) if name else None for name in node.input]
    outputs = apply_rank_rule(node, inputs, constant)
    for name, info in zip(node.output, outputs or ()):
        if name and info is not None and info.rank is not None and not _known_rank(infos.get(name)):
            infos[name] = _with_elem_type(info, infos.get(name))
    if node.domain not in _ONNX_DOMAINS and any(name and not (infos.get(name) and infos[name].elem_type)
                                                 for name in node.output):
        types = ortopt.schema_output_types(node, [info.elem_type if info else 0 for info in inputs])
        for name, elem_type in zip(node.output, types or ()):  # element types by ORT's op schema
            known = infos.get(name)
            if name and elem_type and not (known and known.elem_type):
                infos[name] = TensorInfo(elem_type, known.shape if known else None)


@dataclass
class _Declared:
    """What a graph declares, as the rewrite needs it per replaced node: its outputs by name (the first
    of a repeated name) and the names typed by value_info or inputs, kept up to date as value_info grows.
    Built once per graph, so that declaring is linear in the graph, not in graph x replaced nodes."""

    outputs: dict[str, onnx.ValueInfoProto]
    typed: set[str]

    @classmethod
    def of(cls, graph: GraphProto) -> "_Declared":
        outputs: dict[str, onnx.ValueInfoProto] = {}
        for value in graph.output:
            outputs.setdefault(value.name, value)
        return cls(outputs, {value.name for value in (*graph.value_info, *graph.input)})


def _declare_output(graph: GraphProto, node: NodeProto, infos: dict[str, TensorInfo], subgraph: bool,
                    declared: _Declared) -> None:
    """Type a replaced node's output: a value_info with its element type (the data's) and what is known of
    its shape, unless the graph declares it already. A subgraph output declared without a shape gets its
    rank: ORT's Loop and Scan require a shape for every body output and infer none through a custom op."""
    output = node.output[0]
    elem_type = infos.get(node.input[0], TensorInfo(0, None)).elem_type
    if block_quantized.is_target(node, (node.op_type,)):
        elem_type = infos.get(output, TensorInfo(0, None)).elem_type
    shape = infos.get(output, TensorInfo(0, None)).shape
    graph_output = declared.outputs.get(output)
    if graph_output is not None:
        tensor_type = graph_output.type.tensor_type
        if subgraph and shape is not None and not tensor_type.HasField("shape"):
            # The rank only: a static size ORT took from here would fix the body output's allocation,
            # and a wrong one ends the process inside the PyOp bridge.
            typed = helper.make_tensor_value_info(output, tensor_type.elem_type or elem_type, [None] * len(shape))
            graph_output.type.CopyFrom(typed.type)
        return
    if output in declared.typed:
        return
    if elem_type:
        graph.value_info.append(helper.make_tensor_value_info(output, elem_type, None if shape is None else list(shape)))
        declared.typed.add(output)


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
    unknown_ops = set(ops) - set(GATHER_OPS) - set(OPT_IN_OPS)
    if unknown_ops:
        raise ValueError(f"cannot rewrite {sorted(unknown_ops)}; the rewritable op types are "
                         f"{list(GATHER_OPS + OPT_IN_OPS)}")
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


__all__ = ["GATHER_OPS", "INTERNAL_GATHERS", "OPT_IN_OPS", "NodeOutcome", "RewriteReport", "holds_gather", "rewrite_model"]
