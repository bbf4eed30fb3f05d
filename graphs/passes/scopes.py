"""What a node pass's visit sees of one graph: its scope (types, constants, producers and readers) and what
ONNX's inference said of it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator

from onnx import GraphProto, NodeProto

from ..ranks.tensor_info import TensorInfo, graph_infos
from ..ranks.shape_inference import induced_names
from ..ir.builder import NameScope
from ..ir.constant_view import ConstantView
from ..ir.walk import holds_subgraph, nodes_within, subgraphs


@dataclass
class InferredGraph:
    """What ONNX's inference of the typing copy says of one graph: the type of each name, and the inferred
    copy of each node holding subgraphs (by position), for their own walk. Kept instead of the inferred
    model, which is as large as the model."""

    infos: dict[str, TensorInfo]
    holders: dict[int, NodeProto]
    typed: bool = True  # False: no inference (a pass without ``infers_types``); subgraphs are walked as they are
    induced: set[str] = field(default_factory=set)  # names ranked only by the Loop induction (inference.induced_names)

    @classmethod
    def untyped(cls) -> "InferredGraph":
        """The stand-in for a pass without inference: no types, no inferred holders."""
        return cls({}, {}, False)

    @classmethod
    def of(cls, inferred_graph: GraphProto, main: bool) -> "InferredGraph":
        """What inference says of one graph of the inferred typing copy."""
        holders = {}
        for position, node in enumerate(inferred_graph.node):
            if holds_subgraph(node):
                holders[position] = NodeProto()
                holders[position].CopyFrom(node)
        return cls(graph_infos(inferred_graph, main), holders, induced=induced_names(inferred_graph))

    def sub(self, position: int, node: NodeProto) -> Iterator[tuple[str, GraphProto, "InferredGraph"]]:
        """(attribute name, subgraph, its twin) for each subgraph of ``node``, the node at ``position``."""
        if not self.typed:
            for attribute in node.attribute:
                for graph in subgraphs(attribute):
                    yield attribute.name, graph, self
            return
        twin = self.holders.get(position)
        for attribute, twin_attribute in zip(node.attribute, twin.attribute if twin is not None else ()):
            for graph, twin_graph in zip(subgraphs(attribute), subgraphs(twin_attribute)):
                yield attribute.name, graph, InferredGraph.of(twin_graph, False)


@dataclass
class GraphScope:
    """One graph as a visit sees it; ``original``: how many of ``graph.node`` are its own (replacements
    follow until the splice). ``readers`` counts a name's reading nodes (a subgraph's once) plus its outputs."""

    graph: GraphProto
    path: str
    opset: int
    names: NameScope
    infos: dict[str, TensorInfo]
    constants: ConstantView
    original: int
    main: bool
    outcomes: list = field(default_factory=list)  # the report's rows, in walk order (``observe`` may add)
    cache: dict = field(default_factory=dict)     # a pass's own per-graph memo
    partial_types: bool = False  # ``infos`` know less than the whole-model inference (``NodePass.partial_types``)

    UNKNOWN = TensorInfo(0, None)

    def info(self, name: str) -> TensorInfo:
        """What the scope knows of ``name``."""
        return self.infos.get(name, self.UNKNOWN)

    def own_nodes(self) -> Iterator[NodeProto]:
        """The graph's own nodes (the first ``original``; not the replacements appended after them)."""
        return itertools.islice(self.graph.node, self.original)

    @cached_property
    def producers(self) -> dict[str, NodeProto]:
        """The graph's own node that writes each name."""
        return {output: node for node in self.own_nodes() for output in node.output if output}

    @cached_property
    def consumers(self) -> dict[str, list[NodeProto]]:
        """The nodes that take a name as a direct input."""
        return self._direct_reads[0]

    @cached_property
    def _direct_reads(self) -> tuple[dict[str, list[NodeProto]], list[NodeProto]]:
        """``consumers``, and the nodes holding subgraphs (one walk for both: the session's start-up)."""
        consumers: dict[str, list[NodeProto]] = {}
        holders = []
        for node in self.own_nodes():
            inputs = node.input
            for name in (dict.fromkeys(inputs) if len(inputs) > 1 else inputs):
                if name in consumers:
                    consumers[name].append(node)
                else:
                    consumers[name] = [node]
            if node.attribute and holds_subgraph(node):
                holders.append(node)
        return consumers, holders

    @cached_property
    def readers(self) -> dict[str, int]:
        """Per name, how many nodes read it (see the class docstring)."""
        consumers, holders = self._direct_reads
        readers = {name: len(nodes) for name, nodes in consumers.items()}
        for node in holders:  # a name its subgraphs read and it does not read itself: one more reader
            direct = set(node.input)
            for name in {n for a in node.attribute for sub in subgraphs(a) for inner in nodes_within(sub.node)
                         for n in inner.input}:
                if name not in direct:
                    readers[name] = readers.get(name, 0) + 1
        for value in self.graph.output:
            readers[value.name] = readers.get(value.name, 0) + 1
        return readers


__all__ = ["GraphScope", "InferredGraph"]
