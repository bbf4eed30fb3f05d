"""The one remover of dead nodes: what produces values nothing reads, and then what only those read."""

from __future__ import annotations

from collections.abc import Iterable, MutableSequence, Set as AbstractSet
from typing import Literal

from onnx import GraphProto, ModelProto, NodeProto

from .walk import names_read, node_holders, nodes_within


def remove_dead(where: GraphProto | MutableSequence[NodeProto], candidates: Iterable[NodeProto],
                names: AbstractSet[str] = frozenset(), *, cascade: bool = False,
                initializers: Literal["all", "freed"] = "all", keep: Iterable[str] = ()) -> frozenset[str]:
    """Remove each of ``candidates`` whose outputs nothing reads, then the producers of what it read that nothing
    reads any more: among the candidates, or any node with ``cascade``. In a graph, then the initializers nothing
    reads: all of them, or (``initializers="freed"``) only those in ``names`` or read by a removed node; graph
    outputs and initializers that are graph inputs stay. A worklist, and the node list rebuilt once, in order:
    removing nodes one by one, or repeated passes, is quadratic (50k bound gathers took over 15 minutes).
    """
    graph = where if isinstance(where, GraphProto) else None
    nodes = where.node if isinstance(where, GraphProto) else where
    candidates = list(candidates)
    uses: dict[str, int] = {}
    for name in (names_read(graph) if graph is not None else (n for node in nodes_within(nodes) for n in node.input)):
        uses[name] = uses.get(name, 0) + 1
    for name in (*(value.name for value in graph.output), *keep) if graph is not None else keep:
        uses[name] = uses.get(name, 0) + 1
    producer = {name: node for node in (nodes if cascade else candidates) for name in node.output}
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
        kept_nodes = [node for node in nodes if id(node) not in dropped]
        if isinstance(nodes, list):
            nodes[:] = kept_nodes
        else:  # a repeated field: rebuilt once
            del nodes[:]
            nodes.extend(kept_nodes)
    if graph is None:
        return frozenset(freed) if dropped else frozenset()
    inputs = {value.name for value in graph.input}
    kept = [t for t in graph.initializer if uses.get(t.name, 0) or t.name in inputs
            or not (initializers == "all" or t.name in freed)]
    removed_initializers = len(kept) != len(graph.initializer)
    if removed_initializers:
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return frozenset(freed) if dropped or removed_initializers else frozenset()


def remove_dead_in_model(model: ModelProto, names: set[str]) -> None:
    """Remove what produces ``names`` when nothing reads it any more, and then what only that read, graph by
    graph until nothing changes (a subgraph may hold the last reader of an outer name). Graph inputs and outputs
    stay; initializers go only where a removed node was their last reader.
    """
    changed = bool(names)  # nothing freed: no graph to scan (the session's bind step frees nothing here)
    while changed:
        changed = False
        # holders found afresh after each change: removing rebuilds a node list, which detaches the subgraphs
        # found before
        for graph in (holder for holder in node_holders(model) if isinstance(holder, GraphProto)):
            candidates = [node for node in graph.node if any(name in names for name in node.output)]
            freed = remove_dead(graph, candidates, names, cascade=True, initializers="freed")
            if freed:
                changed, names = True, names | freed
                break


__all__ = ["remove_dead", "remove_dead_in_model"]
