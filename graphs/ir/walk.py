"""The graph walker of every pass: the graphs a model holds (main graph, If/Loop/Scan bodies at any depth,
model-local functions), the nodes within them, every name a model uses, attributes, Constant values and the
model's default opset. Plain functions over onnx's protobuf."""

from __future__ import annotations

from collections.abc import Callable
from typing import Iterator, TypeGuard

import onnx
from onnx import AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, TensorProto

ONNX_DOMAINS = ("", "ai.onnx")


def node_holders(model: ModelProto) -> Iterator[GraphProto | FunctionProto]:
    """The main graph, every model-local function, and every subgraph nested in any of them."""
    pending: list[GraphProto | FunctionProto] = [model.graph, *model.functions]
    while pending:
        holder = pending.pop()
        yield holder
        pending.extend(sub for node in holder.node if holds_subgraph(node)
                       for attribute in node.attribute for sub in subgraphs(attribute))


def all_names(model: ModelProto) -> set[str]:
    """Every name the model uses anywhere (tensors, nodes, graphs, functions), so that a fresh name
    collides with none: sparse initializers count too, used or not (ORT turns them into initializers).
    """
    names: set[str] = {model.graph.name}
    for holder in node_holders(model):
        names.add(holder.name)
        if isinstance(holder, GraphProto):
            names.update(v.name for v in (*holder.input, *holder.output, *holder.value_info, *holder.initializer))
            names.update(sparse.values.name for sparse in holder.sparse_initializer)
        else:  # a function: its formal inputs and outputs, and its value_info (onnx >= 1.16)
            names.update((*holder.input, *holder.output))
            names.update(v.name for v in getattr(holder, "value_info", ()))
        for node in holder.node:
            names.update(node.input, node.output)
            names.add(node.name)
    return names


def subgraphs(attribute: AttributeProto) -> list[GraphProto]:
    """The graphs an attribute holds."""
    if attribute.type == AttributeProto.GRAPH:
        return [attribute.g]
    if attribute.type == AttributeProto.GRAPHS:
        return list(attribute.graphs)
    return []


# The standard ops with graph attributes: no other op of the ONNX domain holds a graph.
SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def holds_subgraph(node: NodeProto) -> bool:
    """Whether a node has a graph attribute (If, Loop, Scan, ...). A plain loop: called for every node."""
    if node.op_type not in SUBGRAPH_OPS and node.domain in ONNX_DOMAINS:
        return False
    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH or attribute.type == AttributeProto.GRAPHS:
            return True
    return False


def default_opset(model: ModelProto) -> int:
    """The version of the ONNX domain that ``model`` imports."""
    for opset in model.opset_import:
        if opset.domain in ONNX_DOMAINS:
            return opset.version
    return 1


def nodes_within(nodes) -> Iterator[NodeProto]:
    """Nodes and, recursively, the nodes of their subgraphs."""
    for node in nodes:
        yield node
        if holds_subgraph(node):
            for attribute in node.attribute:
                for sub in subgraphs(attribute):
                    yield from nodes_within(sub.node)


def attribute(node: NodeProto, name: str, default=None):
    """The value of ``node``'s attribute ``name`` (strings decoded), or ``default`` when it has none: the one
    attribute reader of the passes.
    """
    for proto in node.attribute:
        if proto.name == name:
            value = onnx.helper.get_attribute_value(proto)
            return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value
    return default


def round_trip_cast(node: NodeProto | None, to: int = TensorProto.FLOAT) -> TypeGuard[NodeProto]:
    """Whether ``node`` is a Cast of the float16/bfloat16 round trip ``rules.emit_replacement`` writes (``to``
    FLOAT before GatherMultiaxis, the narrow type after); the one recogniser of it."""
    if node is None or node.op_type != "Cast" or node.domain not in ONNX_DOMAINS:
        return False
    return any(a.name == "to" and a.i == to for a in node.attribute)


# Ops that move a tensor's elements without computing them: a float16 or bfloat16 value passes through them
# exactly as its float32 widening does, so the round trip's Cast back may go after them (ORT 1.32 has each
# for both types but Expand, which it has for float16 only).
MOVING_OPS = ("Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Expand")


def moves_elements(node: NodeProto | None, elem_type: int) -> TypeGuard[NodeProto]:
    """Whether ``node`` is one of ``MOVING_OPS`` that ORT runs on ``elem_type`` (float16 or bfloat16)."""
    if node is None or node.domain not in ONNX_DOMAINS or node.op_type not in MOVING_OPS:
        return False
    return node.op_type != "Expand" or elem_type == TensorProto.FLOAT16


def constant_value(node: NodeProto) -> onnx.TensorProto | None:
    """The tensor of a Constant node given by its ``value`` attribute."""
    if node.op_type == "Constant" and node.domain in ONNX_DOMAINS:
        for attribute in node.attribute:
            if attribute.name == "value":
                return attribute.t
    return None


def names_read(graph: GraphProto) -> Iterator[str]:
    """Every name the nodes of ``graph`` and of its subgraphs read (a subgraph may read outer names)."""
    for node in nodes_within(graph.node):
        yield from node.input


def model_nodes(model: ModelProto) -> Iterator[NodeProto]:
    """Every node of ``model``: of its main graph, its model-local functions and every subgraph in them."""
    for holder in node_holders(model):
        yield from holder.node


def any_node(model: ModelProto, predicate: Callable[[NodeProto], bool]) -> bool:
    """Whether some node of ``model`` (``model_nodes``) satisfies ``predicate``; stops at the first."""
    return any(predicate(node) for node in model_nodes(model))


__all__ = ["MOVING_OPS", "ONNX_DOMAINS", "SUBGRAPH_OPS", "all_names", "any_node", "attribute", "constant_value", "default_opset",
           "holds_subgraph", "model_nodes", "moves_elements", "names_read", "node_holders", "nodes_within",
           "round_trip_cast", "subgraphs"]
