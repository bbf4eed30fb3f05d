"""Rewrite of a whole ONNX model: every Gather, GatherElements and GatherND becomes GatherMultiaxis.

Ranks come from ONNX shape inference, run on a copy whose large initializers are stripped of their
data (their dims are all it needs), so models of any size work. Subgraphs (If / Loop / Scan bodies) are
rewritten with the names of their enclosing scopes visible; model-local functions that hold a gather
are inlined first. A node is only ever replaced by an equivalent subgraph or left as it is, with the
reason in the report.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

import onnx
import onnx.inliner
import onnx.shape_inference
from onnx import AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, TypeProto

from ..ops.signature import DOMAIN
from .builder import NameScope, NodeBuilder
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
    """A copy for shape inference: large initializer payloads dropped (dims and types are kept)."""
    light = ModelProto()
    light.CopyFrom(model)
    for init in light.graph.initializer:
        if init.ByteSize() > _STRIP_ABOVE_BYTES:
            stub = onnx.TensorProto(name=init.name, data_type=init.data_type, dims=init.dims)
            stub.data_location = onnx.TensorProto.EXTERNAL
            stub.external_data.add(key="location", value="stripped-for-shape-inference")
            init.CopyFrom(stub)
    return light


def _inferred(model: ModelProto) -> ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(_typing_copy(model), strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - no inference: ranks come from what the model itself declares
        return model


def _node_holders(model: ModelProto) -> Iterator[GraphProto | FunctionProto]:
    """The main graph, every model-local function, and every subgraph nested in any of them."""
    pending: list[GraphProto | FunctionProto] = [model.graph, *model.functions]
    while pending:
        holder = pending.pop()
        yield holder
        pending.extend(sub for node in holder.node for attribute in node.attribute for sub in _subgraphs(attribute))


def _all_names(model: ModelProto) -> set[str]:
    names: set[str] = set()
    for holder in _node_holders(model):
        if isinstance(holder, GraphProto):
            names.update(v.name for v in (*holder.input, *holder.output, *holder.value_info, *holder.initializer))
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


@dataclass
class _Rewriter:
    ops: tuple[str, ...]
    opset: int
    names: NameScope
    report: RewriteReport

    def graph(self, graph: GraphProto, inferred: GraphProto, scope: dict[str, TensorInfo], path: str) -> None:
        infos = {**scope, **_graph_infos(inferred)}
        new_nodes: list[NodeProto] = []
        for node, inferred_node in zip(graph.node, inferred.node):
            for attribute, inferred_attribute in zip(node.attribute, inferred_node.attribute):
                for sub, inferred_sub in zip(_subgraphs(attribute), _subgraphs(inferred_attribute)):
                    self.graph(sub, inferred_sub, infos, f"{path}/{node.name or node.op_type}.{attribute.name}")
            if not _is_target(node, self.ops):
                new_nodes.append(node)
                continue
            new_nodes.extend(self.node(node, infos, path))
        del graph.node[:]
        graph.node.extend(new_nodes)

    def node(self, node: NodeProto, infos: dict[str, TensorInfo], path: str) -> list[NodeProto]:
        unknown = TensorInfo(0, None)
        builder = NodeBuilder(self.opset, self.names, node.name or self.names.fresh(f"{node.op_type}_{node.output[0]}"))
        try:
            emit_replacement(node, infos.get(node.input[0], unknown), infos.get(node.input[1], unknown), builder)
        except LeftUnchanged as reason:
            self.report.outcomes.append(NodeOutcome(node.op_type, node.name, path, False, str(reason)))
            return [node]
        self.report.outcomes.append(NodeOutcome(node.op_type, node.name, path, True))
        return builder.nodes


def _inline_gather_functions(model: ModelProto, ops: tuple[str, ...], report: RewriteReport) -> ModelProto:
    holding = [(f.domain, f.name) for f in model.functions if any(_is_target(n, ops) for n in f.node)]
    if not holding:
        return model
    try:
        return onnx.inliner.inline_selected_functions(model, holding)
    except Exception as error:  # noqa: BLE001
        for function in model.functions:
            for node in function.node:
                if _is_target(node, ops):
                    report.outcomes.append(NodeOutcome(node.op_type, node.name, f"function {function.name}", False,
                                                       f"the function could not be inlined: {error}"))
        return model


def rewrite_model(model: ModelProto, ops: tuple[str, ...] | list[str] = GATHER_OPS,
                  ort_optimize: bool = False) -> tuple[ModelProto, RewriteReport]:
    """Return a rewritten copy of ``model`` and the report of what happened to every gather node.

    The copy keeps the model's IR version, opset imports (plus ``ai.onnx.contrib`` 1 when a node was
    rewritten), graph inputs/outputs, initializers, value_info, metadata and doc strings. With
    ``ort_optimize``, ORT's offline optimizer runs first (see graphs.ortopt: the way to stay
    bit-identical to the original under ORT's default session options).
    """
    if ort_optimize:
        from .ortopt import ort_optimize as optimize

        model = optimize(model)
    ops = tuple(ops)
    unknown_ops = set(ops) - set(GATHER_OPS)
    if unknown_ops:
        raise ValueError(f"cannot rewrite {sorted(unknown_ops)}; the rewritable op types are {list(GATHER_OPS)}")
    report = RewriteReport()
    result = ModelProto()
    result.CopyFrom(model)
    ir_version = result.ir_version
    result = _inline_gather_functions(result, ops, report)
    result.ir_version = ir_version
    inferred = _inferred(result)
    rewriter = _Rewriter(ops, _default_opset(result), NameScope(_all_names(result)), report)
    rewriter.graph(result.graph, inferred.graph, {}, "main graph")
    if report.rewritten and not any(o.domain == DOMAIN for o in result.opset_import):
        result.opset_import.add(domain=DOMAIN, version=1)
    return result, report


__all__ = ["GATHER_OPS", "NodeOutcome", "RewriteReport", "holds_gather", "rewrite_model"]
