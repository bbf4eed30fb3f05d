"""The graph walker every pass uses: the graphs a model holds (main graph, If/Loop/Scan bodies at any
depth, model-local functions), the nodes within them, every name a model uses, Constant values and the
model's default opset. Plain functions over onnx's protobuf (issue 19: onnx-ir measured slower and
lossier on our models; see the README's "Layout")."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import onnx
from onnx import AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, TensorProto, numpy_helper

ONNX_DOMAINS = ("", "ai.onnx")


def node_holders(model: ModelProto) -> Iterator[GraphProto | FunctionProto]:
    """The main graph, every model-local function, and every subgraph nested in any of them."""
    pending: list[GraphProto | FunctionProto] = [model.graph, *model.functions]
    while pending:
        holder = pending.pop()
        yield holder
        pending.extend(sub for node in holder.node for attribute in node.attribute for sub in subgraphs(attribute))


def all_names(model: ModelProto) -> set[str]:
    """Every name the model uses anywhere (tensors, nodes, graphs, functions), so that a fresh name
    collides with none: sparse initializers count too, used or not (ORT turns them into initializers)."""
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
            names.update(node.input)
            names.update(node.output)
            names.add(node.name)
    return names


def subgraphs(attribute: AttributeProto) -> list[GraphProto]:
    if attribute.type == AttributeProto.GRAPH:
        return [attribute.g]
    if attribute.type == AttributeProto.GRAPHS:
        return list(attribute.graphs)
    return []


def holds_subgraph(node: NodeProto) -> bool:
    """Whether a node has a graph attribute (If, Loop, Scan, ...). A plain loop: called for every node."""
    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH or attribute.type == AttributeProto.GRAPHS:
            return True
    return False


def default_opset(model: ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in ONNX_DOMAINS:
            return opset.version
    return 1


def nodes_within(nodes) -> Iterator[NodeProto]:
    """Nodes and, recursively, the nodes of their subgraphs."""
    for node in nodes:
        yield node
        for attribute in node.attribute:
            for sub in subgraphs(attribute):
                yield from nodes_within(sub.node)


def attribute(node: NodeProto, name: str, default=None):
    """The value of ``node``'s attribute ``name`` (strings decoded), or ``default`` when it has none: the one
    attribute reader of the passes."""
    for proto in node.attribute:
        if proto.name == name:
            value = onnx.helper.get_attribute_value(proto)
            return value.decode() if isinstance(value, bytes) else value
    return default


def round_trip_cast(node: NodeProto | None, to: int = TensorProto.FLOAT) -> bool:
    """Whether ``node`` is a Cast of the float16/bfloat16 round trip that ``rules.emit_replacement`` writes:
    to float32 before GatherMultiaxis (``to`` FLOAT), or back after it (``to`` the narrow type). The one
    recogniser of that round trip (the bind step and the lowering fold it; here, so that the bind step
    needs no rewriter)."""
    if node is None or node.op_type != "Cast" or node.domain not in ONNX_DOMAINS:
        return False
    return any(a.name == "to" and a.i == to for a in node.attribute)


def constant_value(node: NodeProto) -> onnx.TensorProto | None:
    if node.op_type == "Constant" and node.domain in ONNX_DOMAINS:
        for attribute in node.attribute:
            if attribute.name == "value":
                return attribute.t
    return None




def constant_arrays(graph: GraphProto) -> dict[str, np.ndarray]:
    """The values of ``graph`` that cannot change at run time, as arrays: its initializers (not one that
    is also a graph input: that is only a default the caller may override), its Constant nodes' values
    (``value`` and ``value_ints``), and the int64 constants of opsets 7 and 8 (builder.NodeBuilder.constant:
    a double Constant, then Cast)."""
    inputs = {value.name for value in graph.input}
    values = {init.name: numpy_helper.to_array(init) for init in graph.initializer if init.name not in inputs}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ONNX_DOMAINS:
            for attribute in node.attribute:
                if attribute.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(attribute.t)
                elif attribute.name == "value_ints":
                    values[node.output[0]] = np.array(attribute.ints, dtype=np.int64)
        elif (node.op_type == "Cast" and node.domain in ONNX_DOMAINS and node.input[0] in values
              and next((a.i for a in node.attribute if a.name == "to"), 0) == TensorProto.INT64
              and values[node.input[0]].dtype.kind == "f"):
            values[node.output[0]] = values[node.input[0]].astype(np.int64)
    return values


def names_read(graph: GraphProto) -> Iterator[str]:
    """Every name the nodes of ``graph`` and of its subgraphs read (a subgraph may read outer names)."""
    for node in nodes_within(graph.node):
        yield from node.input


def drop_unused(graph: GraphProto, candidates: list[NodeProto], names: set[str] = frozenset(),
                cascade: bool = False, all_initializers: bool = True) -> frozenset[str]:
    """Remove each of ``candidates`` (nodes of ``graph``) whose outputs nothing reads, then the producers
    of what it read that nothing reads any more: among the candidates, or any node with ``cascade``.
    Then the initializers nothing reads: all of them, or (not ``all_initializers``) only those in
    ``names`` or read by a removed node. Graph outputs, and initializers that are graph inputs, stay.
    A worklist, and the node list rebuilt once: removing nodes one by one, or repeated passes, is
    quadratic (50k bound gathers took over 15 minutes). Returns ``names`` and the names the removed
    nodes read (which another graph may now produce for nothing), or nothing when nothing was removed."""
    uses: dict[str, int] = {}
    for name in names_read(graph):
        uses[name] = uses.get(name, 0) + 1
    for value in graph.output:
        uses[value.name] = uses.get(value.name, 0) + 1
    producer = {name: node for node in (graph.node if cascade else candidates) for name in node.output}
    work, dropped, freed = list(candidates), set(), set(names)
    while work:
        node = work.pop()
        if id(node) in dropped or not node.output or any(uses.get(name, 0) for name in node.output):
            continue
        dropped.add(id(node))
        for name in node.input:
            uses[name] -= 1
            freed.add(name)
            if name in producer:
                work.append(producer[name])
    if dropped:
        kept_nodes = [node for node in graph.node if id(node) not in dropped]
        del graph.node[:]
        graph.node.extend(kept_nodes)
    inputs = {value.name for value in graph.input}
    kept = [t for t in graph.initializer if uses.get(t.name, 0) or t.name in inputs
            or not (all_initializers or t.name in freed)]
    removed_initializers = len(kept) != len(graph.initializer)
    if removed_initializers:
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return frozenset(freed) if dropped or removed_initializers else frozenset()


__all__ = ["ONNX_DOMAINS", "all_names", "attribute", "constant_arrays", "constant_value", "default_opset", "drop_unused", "holds_subgraph", "names_read",
           "node_holders", "nodes_within", "round_trip_cast", "subgraphs"]
