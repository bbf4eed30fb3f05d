"""The session's lowering at start-up (``lower_single_gathers``): first without the whole-model inference, each
recorded node proven from the ranks its own inputs' ancestors give (the rank rules, run on demand); the full
analysis (``LowerPass``) where one node needs more. Both give the same model and report.

Why the same: the record-first pass knows of each value at most what the full analysis knows (facts' ranks,
declared element types, the rank rules on fewer nodes: never a size), so every form of the recorded gather it
tries, the full analysis tries too, and the first one proven gives the same gather and tail whichever it is
(``recorded_form``); its ORT guards decide what they do not know as refusing (``GraphScope.partial_types``).
A node it cannot decide so (a record not proven, constant axes without a record) stops it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

from onnx import GraphProto, ModelProto, NodeProto, TensorProto

from ...ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ...ops.contract import is_gather_multiaxis
from ..ir.builder import NameScope
from ..ir.constant_view import ConstantView
from ..ir.walk import constant_value, default_opset, model_nodes
from ..passes import GraphScope, InferredGraph, NodePass, Visit
from ..provenance import ReplacedGather, replaced_gather
from ..ranks.tensor_info import TensorInfo, known_rank, tensor_info
from ..ranks.typing_copy import is_large
from ..rewrite.rank_layers import type_by_rank_rule
from .lower_pass import LowerDetail, LowerPass, lower_model, replaced_form, unname_replaced_dims
from .lower_report import LowerReport


# Records proven here: the alignment of Gather reads ranks only, GatherND's ranks and the indices' last size
# (a fact or unknown here), GatherElements' is tried on ranks only (its sizes forgotten, as the analysis tries too).
_PROVEN_HERE = frozenset({GATHER, GATHER_ND, GATHER_ELEMENTS})


class NeedsAnalysis(Exception):
    """A node the record-first pass cannot decide as the full analysis would."""


def _constant_info(tensor: TensorProto) -> TensorInfo:
    """A constant's type as the typing copy gives it: a large 1-D integer one (``bare_input``) has no length."""
    if is_large(tensor) and len(tensor.dims) == 1 and tensor.data_type in (TensorProto.INT64, TensorProto.INT32):
        return TensorInfo(tensor.data_type, (None,))
    return TensorInfo(tensor.data_type, tuple(tensor.dims))


def fact_infos(graph: GraphProto, outer: dict[str, TensorInfo], main: bool) -> tuple[dict[str, TensorInfo], dict]:
    """What ``graph``'s scope knows without inference, and its facts: declared element types, and the shapes
    ORT enforces (initializers, Constant values, the main graph's inputs) as the typing copy gives them."""
    infos = dict(outer)
    for value in graph.input:
        infos.pop(value.name, None)  # a subgraph input hides an outer name
    for value in (*graph.value_info, *graph.output, *(graph.input if not main else ())):
        info = tensor_info(value.type)
        if info is not None and info.elem_type:
            infos[value.name] = TensorInfo(info.elem_type, None)
    facts = {init.name: _constant_info(init) for init in graph.initializer}
    if main:
        facts.update((value.name, info) for value in graph.input if (info := tensor_info(value.type)) is not None)
    for node in graph.node:
        tensor = constant_value(node)
        if tensor is not None:
            facts[node.output[0]] = _constant_info(tensor)
    infos.update(facts)
    return infos, facts


def derive_ranks(names: list[str], scope: GraphScope, elem_type_only: bool = False) -> None:
    """The rank rules (``type_by_rank_rule``) over the producers in ``scope`` of ``names``, and of their
    inputs back to what is known (``elem_type_only``: to where the element type is), in graph order; each node
    once per scope."""
    cache = scope.cache
    if "positions" not in cache:
        # (the nodes kept alive: protobuf then hands out the same objects, so that an id stays a node's)
        cache["own_nodes"] = own = list(scope.own_nodes())
        cache["positions"] = {id(node): position for position, node in enumerate(own)}
        cache["ranked"] = set()
    positions, ranked = cache["positions"], cache["ranked"]
    needed: dict[int, NodeProto] = {}
    pending = [name for name in names if name]
    while pending:
        name = pending.pop()
        info = scope.infos.get(name)
        if info is not None and info.elem_type and (elem_type_only or known_rank(info)):
            continue
        node = scope.producers.get(name)
        if node is None or id(node) in ranked or id(node) in needed:
            continue
        needed[id(node)] = node
        pending.extend(name for name in node.input if name)
    for node in sorted(needed.values(), key=lambda node: positions[id(node)]):
        ranked.add(id(node))
        if is_gather_multiaxis(node):  # the schema's rule: the output has its input's (or indices') rank
            info = next((i for i in map(scope.infos.get, node.input[:2]) if known_rank(i)), None)
            elem_type = scope.info(node.input[0]).elem_type
            if node.output and info is not None and elem_type and not known_rank(scope.infos.get(node.output[0])):
                scope.infos[node.output[0]] = TensorInfo(elem_type, (None,) * info.rank)
        else:
            type_by_rank_rule(node, scope)


def proof_infos(node: NodeProto, record: ReplacedGather, scope: GraphScope, facts: dict[str, TensorInfo]
                ) -> dict[str, TensorInfo]:
    """What the proof of ``record`` may read of its inputs (sizes only where the analysis has the same: a fact,
    or for GatherElements both facts); ``NeedsAnalysis`` where the record-first pass cannot prove it."""
    if record.op_type not in _PROVEN_HERE:
        raise NeedsAnalysis(f"{node.name!r}: a record of {record.op_type}")
    static = node.input[2] in scope.constants
    if static:  # a static alignment: the proof needs both ranks
        derive_ranks([record.data, record.indices], scope)
    else:  # aligned at run time: right for every rank, only the data's element type matters
        derive_ranks([record.data], scope, elem_type_only=True)
    known = {name: scope.infos[name] for name in (record.data, record.indices) if name in scope.infos}
    are_facts = [facts.get(name) == info for name, info in known.items()]
    infos = {}
    for (name, info), fact in zip(known.items(), are_facts):
        keep = fact and (record.op_type != GATHER_ELEMENTS or (len(are_facts) == 2 and all(are_facts)))
        infos[name] = info if keep or info.shape is None else TensorInfo(info.elem_type, (None,) * len(info.shape))
    data, indices = (infos.get(name, GraphScope.UNKNOWN) for name in (record.data, record.indices))
    if not data.elem_type:
        raise NeedsAnalysis(f"{node.name!r}: the element type of {record.data!r} is not known without the analysis")
    if static and not (known_rank(data) and known_rank(indices)):
        raise NeedsAnalysis(f"{node.name!r}: the ranks its alignment needs are not known without the analysis")
    if static and record.op_type == GATHER_ND and not (indices.shape and isinstance(indices.shape[-1], int)):
        raise NeedsAnalysis(f"{node.name!r}: the coordinate size is not known without the analysis")
    return infos


def main_graph_scope(model: ModelProto, external_data_folder: str | os.PathLike | None
                     ) -> tuple[GraphScope, dict[str, TensorInfo]]:
    """The main graph's scope as the record-first pass sees it (``fact_infos``), on ``model`` itself, and its facts."""
    infos, facts = fact_infos(model.graph, {}, True)
    return GraphScope(model.graph, "main graph", default_opset(model), NameScope(set()), infos,
                      ConstantView(model.graph, None, external_data_folder), len(model.graph.node), True,
                      partial_types=True), facts


def undecided(model: ModelProto, scope: GraphScope, facts: dict[str, TensorInfo]) -> str:
    """Why the record-first pass could not decide some node of ``model`` ("": it may decide every one), found
    before it copies anything: a node in a subgraph or function, or one whose proof lacks what it reads."""
    targets = [node for node in model.graph.node if is_gather_multiaxis(node) and len(node.input) == 3
               and len(node.output) == 1]
    if sum(1 for node in model_nodes(model) if is_gather_multiaxis(node)) != len(targets):
        return "a GatherMultiaxis node in a subgraph or function (or of another arity)"
    records = [replaced_gather(node) for node in targets]
    for node, record in zip(targets, records):  # what needs no rank first
        if record is not None and record.op_type not in _PROVEN_HERE:
            return f"{node.name!r}: a record of {record.op_type}"
        if record is not None and record.op_type == GATHER_ND and node.input[2] in scope.constants and (
                record.indices not in facts):  # (its coordinate size is read only from a fact)
            return f"{node.name!r}: the coordinate size is not known without the analysis"
        if record is None and node.input[2] in scope.constants:
            return f"{node.name!r}: constant axes and no record"
    for node, record in zip(targets, records):
        try:
            if record is not None:
                proof_infos(node, record, scope, facts)
            else:
                _check_kept(node, scope)
        except NeedsAnalysis as reason:
            return str(reason)
    return ""


def _check_kept(node: NodeProto, scope: GraphScope) -> None:
    """A node without a record is decided only where the analysis keeps it too: axes of run-time, of a known type."""
    if node.input[2] in scope.constants:
        raise NeedsAnalysis(f"{node.name!r}: constant axes and no record")
    derive_ranks([node.input[2]], scope, elem_type_only=True)
    if not scope.info(node.input[2]).elem_type:
        raise NeedsAnalysis(f"{node.name!r}: the axes' element type is not known")


@dataclass
class RecordFirstPass(LowerPass):
    """``LowerPass`` for the session without the whole-model inference, on the main graph: recorded nodes by
    their records, nodes of run-time axes kept; ``NeedsAnalysis`` for any other node. ``main_infos`` and
    ``facts``: what ``main_graph_scope`` found (and ``derive_ranks`` added) on the model before its copy."""

    main_infos: dict[str, TensorInfo] = field(default_factory=dict)
    facts: dict[str, TensorInfo] = field(default_factory=dict)
    infers_types: ClassVar[bool] = False
    partial_types: ClassVar[bool] = True
    observe = NodePass.observe  # (no rank layers as the walk goes: ``derive_ranks`` on demand)

    def scope_infos(self, graph: GraphProto, twin: InferredGraph, outer: dict[str, TensorInfo],
                    main: bool) -> dict[str, TensorInfo]:
        """``main_infos`` for the main graph (a subgraph holds no target)."""
        return self.main_infos if main else {}

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit[LowerDetail]:
        """The recorded gather where proven, a node of run-time axes kept; else ``NeedsAnalysis``."""
        if len(node.input) != 3 or len(node.output) != 1:
            return super().visit(node, scope)  # (NotChanged whatever the types)
        if not scope.main:
            raise NeedsAnalysis(f"{node.name!r}: in a subgraph")
        record = replaced_gather(node)
        if record is None:
            _check_kept(node, scope)
            return super().visit(node, scope)  # (kept: run-time axes, as the full analysis keeps it)
        infos = proof_infos(node, record, scope, self.facts)
        known = {name: scope.infos[name] for name in infos}
        scope.infos.update(infos)
        try:
            replaced = replaced_form(node, scope)
        finally:
            scope.infos.update(known)
        if replaced is None:
            raise NeedsAnalysis(f"{node.name!r}: its record is not proven without the analysis")
        return replaced


def lower_single_gathers(model: ModelProto, external_data_folder: str | os.PathLike | None = None
                         ) -> tuple[ModelProto, LowerReport]:
    """``lower_model`` restricted to the nodes one standard gather computes (steps 1 and 2), as the session
    runs them on ORT's builtin kernels; the others are left for the kernel (``KEPT_FOR_KERNEL``). Record-first
    where that decides every node (the module docstring), else the full analysis: the same result.

    Args:
        model: the rewritten model; it is not changed.
        external_data_folder: the model's folder, where external constant indices are read.

    Returns:
        The lowered copy and the LowerReport."""
    in_main_graph = sum(1 for node in model.graph.node if is_gather_multiaxis(node))
    if in_main_graph == sum(1 for node in model_nodes(model) if is_gather_multiaxis(node)):  # (cheap: first)
        scope, facts = main_graph_scope(model, external_data_folder)
        if undecided(model, scope, facts):
            return lower_model(model, external_data_folder, single_gather_only=True)
        quick = RecordFirstPass(external_data_folder=external_data_folder, single_gather_only=True,
                                main_infos=scope.infos, facts=facts)
        try:
            result = quick(model).model
        except NeedsAnalysis:
            pass
        else:
            unname_replaced_dims(model, result)
            return result, quick.report
    return lower_model(model, external_data_folder, single_gather_only=True)


__all__ = ["NeedsAnalysis", "RecordFirstPass", "derive_ranks", "fact_infos", "lower_single_gathers",
           "main_graph_scope", "proof_infos", "undecided"]
