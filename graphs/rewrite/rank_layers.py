"""Layers 2 and 3 of the types a pass reads (``graphs.rewrite``'s module docstring lists the four), for
any pass whose nodes need ranks: the rewrite, which aligns by them, and the lowering, which proves the
rewrite's records by them (``graphs.lower.recorded_form``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import onnx
from onnx import GraphProto, ModelProto, NodeProto, numpy_helper

from ..ranks.symbolic_ranks import SymbolicInference, symbolic_inference
from ..ranks.tensor_info import TensorInfo, declared_ranks, known_rank, learn, with_elem_type
from ..modelfile import ModelFileError
from ..passes import ConstantView, GraphScope, InferredGraph
from ..ranks.element_types import output_elem_types
from ..ir.folding import RANK_FOLDING, fold
from ..ranks.rank_rules import RANK_RULES as GENERIC_RANK_RULES, RankRule, apply_rank_rule, holder_output_ranks
from ..sources.registry import SOURCE_RANK_RULES
from ..ir.walk import ONNX_DOMAINS


# (domain, op type) -> rank rule: the generic rules and the source gathers' own
RANK_RULES: dict[tuple[str, str], RankRule] = {**GENERIC_RANK_RULES, **SOURCE_RANK_RULES}


@dataclass
class RankLayers:
    """Layer 2 (ORT's symbolic inference of the typing copy, run once and only for a graph one of whose
    nodes lacks a rank after layer 1), layer 3 (the rank rules, as the driver shows each node) and declared
    ranks. ``lacks_rank(graph, infos)`` says whether a node of ``graph`` needs a rank layer 1 did not give;
    None: layer 2 is never run."""

    lacks_rank: Callable[[GraphProto, dict[str, TensorInfo]], bool] | None
    light: bytes = b""  # the typing copy, serialized until layer 2 needs it (a tenth of its parsed size)
    _symbolic: SymbolicInference | None = None
    # id(subgraph) -> (the subgraph, its scope's types, filled by its walk): kept alive, so that protobuf gives
    # the holder's attribute the same wrapper and the id stays the subgraph's
    _subgraph_scopes: dict[int, tuple[GraphProto, dict[str, TensorInfo]]] = field(default_factory=dict)

    def begin(self, light: ModelProto | None) -> None:
        """Keeps the typing copy (``graphs.ranks.typing_copy``) for layer 2."""
        self.light = light.SerializeToString() if light is not None else b""
        self._symbolic = None

    @property
    def symbolic(self) -> SymbolicInference:
        """Layer 2, run once and only when a graph needs it (it costs ~0.5 s)."""
        if self._symbolic is None:
            self._symbolic = (symbolic_inference(ModelProto.FromString(self.light)) if self.light
                              else SymbolicInference({}, "no typing copy"))
        return self._symbolic

    @property
    def symbolic_failure(self) -> str:
        """Why layer 2 gave up on the model, if it ran and did ("" otherwise)."""
        return self._symbolic.failure if self._symbolic is not None else ""

    def scope_infos(self, graph: GraphProto, twin: InferredGraph, outer: dict[str, TensorInfo],
                    main: bool) -> dict[str, TensorInfo]:
        """Layer 1 of ``graph`` over ``outer``, then layer 2 and declared input ranks where a rank lacks; a
        subgraph's types are kept for its holder's output rule (``observe``)."""
        infos = dict(outer)
        for name, info in twin.infos.items():
            learn(infos, name, info)
        if self.lacks_rank is not None and self.lacks_rank(graph, infos):
            for name, info in self.symbolic.infos.items():  # layer 2 where layer 1 has no rank
                if not known_rank(infos.get(name)):
                    infos[name] = with_elem_type(info, infos.get(name))
        declared = declared_ranks(graph)
        for value in graph.input:  # a body input's declared rank, where inference says nothing
            if not known_rank(infos.get(value.name)) and value.name in declared:
                infos[value.name] = with_elem_type(declared[value.name], infos.get(value.name))
        if not main:
            self._subgraph_scopes[id(graph)] = (graph, infos)
        return infos

    def observe(self, node: NodeProto, scope: GraphScope) -> None:
        """Types ``node``'s outputs by its rank rule (layer 3), then by declared ranks, where nothing else did."""
        if node.op_type in ("If", "Loop", "Scan") and not all(known_rank(scope.infos.get(n)) for n in node.output if n):
            self._type_holder_outputs(node, scope)
        type_by_rank_rule(node, scope)
        declared = scope.cache.get("declared")
        if declared is None:
            declared = scope.cache["declared"] = declared_ranks(scope.graph)
        for name in node.output:
            if name in declared and not known_rank(scope.infos.get(name)):
                scope.infos[name] = with_elem_type(declared[name], scope.infos.get(name))

    def _type_holder_outputs(self, node: NodeProto, scope: GraphScope) -> None:
        """An If's, Loop's or Scan's outputs by ``holder_output_ranks``, from every layer's types of its
        subgraphs (their walks are done: the driver walks a node's subgraphs before it observes the node)."""
        bodies = {}
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH and id(attribute.g) in self._subgraph_scopes:
                bodies[attribute.name] = self._subgraph_scopes.pop(id(attribute.g))
        for name, info in zip(node.output, holder_output_ranks(node, bodies, scope.infos)):
            if name and info is not None and not known_rank(scope.infos.get(name)):
                scope.infos[name] = with_elem_type(info, scope.infos.get(name))


def _shape_vector(info: TensorInfo | None) -> bool:
    """A 1-D integer vector whose length is not known: a rank rule may tell it (a Slice of a Shape with
    constant bounds, a Concat of such pieces), and a Reshape's rank is that length."""
    return (known_rank(info) and info.rank == 1 and not isinstance(info.shape[0], int)
            and info.elem_type in (0, onnx.TensorProto.INT64, onnx.TensorProto.INT32))


def type_by_rank_rule(node: NodeProto, scope: GraphScope) -> None:
    """Layer 3 for one node: its rank rule where no layer knows an output's rank (or a shape vector's
    length), the values of small integer constants it computes (``rank_inference.fold``: the bounds and
    shapes later rules read), and its outputs' element types by its schema."""
    infos, constants = scope.infos, scope.constants
    folded = scope.cache.setdefault("folded", {})
    if all(known_rank(infos.get(name)) and infos[name].elem_type and not _shape_vector(infos[name])
           for name in node.output if name):
        # every output typed: only a fold is left to do, and it needs every input's value
        if not _foldable(node) or not all(not name or name in folded or constants.size(name) is not None
                                          for name in node.input):
            return

    def constant(name: str) -> np.ndarray | None:
        if name in folded:
            return folded[name]
        tensor = constants.tensor(name)
        return None if tensor is None or tensor.data_location == onnx.TensorProto.EXTERNAL else \
            numpy_helper.to_array(tensor)

    inputs = [infos.get(name) if name else None for name in node.input]
    outputs = apply_rank_rule(node, inputs, constant, RANK_RULES)
    for name, info in zip(node.output, outputs or ()):
        if not name or info is None or info.shape is None:
            continue
        known = infos.get(name)
        if not known_rank(known) or (_shape_vector(known) and info.rank == 1 and isinstance(info.shape[0], int)):
            infos[name] = with_elem_type(info, known)
    if _foldable(node):
        values = [_small_constant(name, folded, constants) if name else None for name in node.input]
        if all(value is not None for name, value in zip(node.input, values) if name):
            value = fold(node, values, RANK_FOLDING.min_opset, RANK_FOLDING)  # (its NumPy engine reads no opset)
            if value is not None:
                folded[node.output[0]] = value
    if any(name and not (infos.get(name) and infos[name].elem_type) for name in node.output):
        types = output_elem_types(node, [info.elem_type if info else 0 for info in inputs], scope.opset)
        for name, elem_type in zip(node.output, types or ()):  # element types by the op's schema
            known = infos.get(name)
            if name and elem_type and not (known and known.elem_type):
                infos[name] = TensorInfo(elem_type, known.shape if known else None)


def _foldable(node: NodeProto) -> bool:
    return node.domain in ONNX_DOMAINS and node.op_type in RANK_FOLDING.ops


def _small_constant(name: str, folded: dict[str, np.ndarray], constants: ConstantView) -> np.ndarray | None:
    """The value of ``name`` when it is a folded value or a constant of at most RANK_FOLDING.max_elements integers (its
    size and type read from the proto first: no larger payload is read)."""
    if name in folded:
        return folded[name]
    size, dtype = constants.size(name), constants.dtype(name)
    if size is None or size > RANK_FOLDING.max_elements or dtype not in (np.dtype(np.int64), np.dtype(np.int32)):
        return None
    try:
        return constants[name]
    except ModelFileError:  # external data that cannot be read here: no value, the rank stays unknown
        return None


def why_rank_unknown(name: str, graph: GraphProto, original: int, infos: dict[str, TensorInfo]) -> str:
    """Where the unknown rank of ``name`` starts: follow the producers whose inputs' ranks are unknown
    too, up to the first value no layer could type (a node whose inputs are known, or a graph input)."""
    producers = {output: node for node in itertools.islice(graph.node, original) for output in node.output if output}
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
        unknown = [i for i in node.input if i and not known_rank(infos.get(i))]
        if unknown:
            current = unknown[0]
            continue
        op = f"{node.domain}.{node.op_type}" if node.domain not in ONNX_DOMAINS else node.op_type
        where = "" if current == name else f" (via {name!r})"
        return (f"{current!r}{where} is an output of {op} node {node.name!r}, whose output rank neither ONNX's "
                f"nor ORT's shape inference, nor a rank rule, nor a declared value_info gives")
    return f"{name!r} is computed in a cycle of unknown ranks"


__all__ = ["RANK_RULES", "RankLayers", "type_by_rank_rule", "why_rank_unknown"]
