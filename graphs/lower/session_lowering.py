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
from ..ir.walk import constant_value, nodes_within
from ..passes import GraphScope, InferredGraph, NodePass, Visit
from ..provenance import replaced_gather
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


def _ranks_only(info: TensorInfo | None) -> TensorInfo | None:
    return None if info is None else TensorInfo(info.elem_type, None if info.shape is None else (None,) * len(info.shape))


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


@dataclass
class RecordFirstPass(LowerPass):
    """``LowerPass`` for the session without the whole-model inference: recorded nodes by their records, nodes
    of run-time axes kept; ``NeedsAnalysis`` for any other node."""

    infers_types: ClassVar[bool] = False
    partial_types: ClassVar[bool] = True
    observe = NodePass.observe  # (no rank layers as the walk goes: ``derive_ranks`` on demand)
    facts: dict[str, TensorInfo] = field(default_factory=dict)  # every scope's, by name

    def scope_infos(self, graph: GraphProto, twin: InferredGraph, outer: dict[str, TensorInfo],
                    main: bool) -> dict[str, TensorInfo]:
        """``fact_infos``."""
        infos, facts = fact_infos(graph, outer, main)
        self.facts.update(facts)
        return infos

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit[LowerDetail]:
        """The recorded gather where proven, a node of run-time axes kept; else ``NeedsAnalysis``."""
        if len(node.input) != 3 or len(node.output) != 1:
            return super().visit(node, scope)  # (NotChanged whatever the types)
        record = replaced_gather(node)
        if record is not None:
            if record.op_type not in _PROVEN_HERE:
                raise NeedsAnalysis(f"{node.name!r}: a record of {record.op_type}")
            if scope.constants.get(node.input[2]) is not None:  # a static alignment: the proof needs both ranks
                derive_ranks([record.data, record.indices], scope)
            else:  # aligned at run time: right for every rank, only the data's element type matters
                derive_ranks([record.data], scope, elem_type_only=True)
            known = {name: scope.infos[name] for name in (record.data, record.indices) if name in scope.infos}
            facts = [self.facts.get(name) == info for name, info in known.items()]
            for (name, info), fact in zip(known.items(), facts):  # sizes where the analysis has the same
                if not fact or (record.op_type == GATHER_ELEMENTS and not (len(facts) == 2 and all(facts))):
                    scope.infos[name] = _ranks_only(info)  # type: ignore[assignment]  # (not None: info is not)
            try:
                replaced = replaced_form(node, scope)
            finally:
                scope.infos.update(known)
            if replaced is None:
                raise NeedsAnalysis(f"{node.name!r}: its record is not proven without the analysis")
            return replaced
        if scope.constants.get(node.input[2]) is not None:
            raise NeedsAnalysis(f"{node.name!r}: constant axes and no record")
        derive_ranks([node.input[2]], scope)
        if not scope.info(node.input[2]).elem_type:
            raise NeedsAnalysis(f"{node.name!r}: the axes' element type is not known")
        return super().visit(node, scope)  # (kept: run-time axes, as the full analysis keeps it)


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
    if not any(is_gather_multiaxis(node) for function in model.functions for node in nodes_within(function.node)):
        quick = RecordFirstPass(external_data_folder=external_data_folder, single_gather_only=True)
        try:
            result = quick(model).model
        except NeedsAnalysis:
            pass
        else:
            unname_replaced_dims(model, result)
            return result, quick.report
    return lower_model(model, external_data_folder, single_gather_only=True)


__all__ = ["NeedsAnalysis", "RecordFirstPass", "derive_ranks", "fact_infos", "lower_single_gathers"]
