"""Rewrite of a whole ONNX model: every source gather the caller asks for becomes GatherMultiaxis."""

# Ranks are found in four layers, each filling what the previous ones missed: ONNX shape inference, ORT's
# symbolic shape inference, the rank rules (``ranks.rank_rules`` and each source record's), and finally a
# run-time alignment (each source record's ``align_at_run_time``) whose shapes and axes the model computes
# itself. Inference runs on a *typing copy* that holds only what ORT enforces (graph input shapes,
# initializers, Constant values): shapes declared by value_info and outputs are dropped (ORT ignores them, so a
# size they declare must decide nothing; their element types are kept), and large initializers and Constant
# values become bare graph inputs (their dims are all inference needs, and data propagation would materialise
# them). Subgraphs (If / Loop / Scan bodies) are rewritten with the names of their enclosing scopes visible;
# model-local functions that hold a gather anywhere are inlined first, their attribute defaults applied. A node
# is only ever replaced by an equivalent subgraph or left as it is, with the reason in the report; every
# replaced output gets a value_info.

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import onnx
from onnx import GraphProto, ModelProto, NodeProto

from ...ops.contract import DOMAIN
from .. import ort_types
from . import ort_optimizer
from ..ir.builder import NodeBuilder
from ..modelfile import SessionOptionsFactory
from ..passes import GraphScope, InferredGraph, NodePass, NotChanged, Visit
from .output_types import Declared, declare_output
from .rank_layers import RankLayers, why_rank_unknown
from .replacement import LeftUnchanged, emit_replacement
from .rewrite_report import NodeOutcome, RewriteReport, is_target
from ..provenance import mark_rewritten
from ..ranks.tensor_info import known_rank
from ..ranks.tensor_info import TensorInfo
from ..sources.registry import GATHER_OPS, INTERNAL_GATHERS, OPT_IN_OPS, RULES
from ..sources.source_gather import OptInRule
from ..ir.walk import ONNX_DOMAINS, nodes_within


def _rule(node: NodeProto, ops: tuple[str, ...]):
    """The entry of ``RULES`` that rewrites ``node`` when ``ops`` asks for its op type, or None."""
    rule = RULES.get(node.op_type) if node.op_type in ops else None
    if rule is None or node.domain not in ((rule.domain,) if isinstance(rule, OptInRule) else ONNX_DOMAINS):
        return None
    return rule


class RewriteDetail(NamedTuple):
    """What the visit says of a rewritten gather: aligned at run time, and why."""

    reason: str = ""
    runtime_aligned: bool = False


@dataclass
class RewritePass(NodePass[RewriteDetail]):
    """Each gather of ``ops`` becomes its rule's replacement, typed by the module comment's four layers."""

    ops: tuple[str, ...]
    runtime_alignment: bool = True
    report: RewriteReport = field(default_factory=RewriteReport)
    keeps_types: ClassVar[bool] = True  # the load check of the written model reads layer 1 (graphs.load_check)
    layers: RankLayers = field(init=False)
    _induced: dict[int, set[str]] = field(default_factory=dict)  # id(graph) -> names ranked by the Loop induction
    # ORT's load-time types of main-graph gather outputs (graphs.ort_types), declared for them as they are
    ort_types: dict[str, onnx.TypeProto] = field(default_factory=dict)
    own_typed: int = 0  # main-graph outputs declared with the rewrite's own types (ORT's were not known)

    def __post_init__(self) -> None:
        self.layers = RankLayers(self._lacking)

    def targets(self, node: NodeProto) -> bool:
        return _rule(node, self.ops) is not None

    def copy_targets(self, node: NodeProto) -> bool:
        """The ONNX gathers of ``ops`` (functions are inlined for them; an opt-in op in a function stays there)."""
        return is_target(node, self.ops)

    def begin(self, model: ModelProto, typing_copy: ModelProto | None) -> None:
        """Reports the gathers left in model-local functions and keeps the typing copy for layer 2."""
        if not self.report.outcomes:  # inlined: what a function still holds is in one that is never called
            _report_function_gathers(model, self.ops, self.report, "in a model-local function that no node calls")
        self.layers.begin(typing_copy)

    def _lacking(self, graph: GraphProto, infos: dict[str, TensorInfo]) -> bool:
        """Whether a gather of ``graph`` lacks a rank after layer 1."""
        for node in graph.node:
            rule = _rule(node, self.ops)
            if rule is None:
                continue
            typed = [name for name in node.input if name] if isinstance(rule, OptInRule) else node.input[:2]
            if not all(known_rank(infos.get(name)) for name in typed):
                return True
        return False

    def scope_infos(self, graph: GraphProto, twin: InferredGraph, outer: dict[str, TensorInfo],
                    main: bool) -> dict[str, TensorInfo]:
        """Layer 1, then layer 2 and declared ranks where those lack a rank."""
        if twin.induced:
            self._induced[id(graph)] = twin.induced
        return self.layers.scope_infos(graph, twin, outer, main)

    def observe(self, node: NodeProto, scope: GraphScope) -> None:
        """Layer 3 and declared ranks for ``node``'s outputs; records an internal gather it leaves."""
        if (node.domain, node.op_type) in INTERNAL_GATHERS and _rule(node, self.ops) is None:
            scope.outcomes.append(_internal_gather_outcome(node, scope.path))
        self.layers.observe(node, scope)  # layer 3, then declared ranks, where layers 1 and 2 have no rank

    def outcome(self, node: NodeProto, path: str, detail: RewriteDetail | None, reason: str) -> NodeOutcome:
        if detail is None:
            return NodeOutcome(node.op_type, node.name, path, False, reason)
        return NodeOutcome(node.op_type, node.name, path, True, detail.reason, runtime_aligned=detail.runtime_aligned)

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit[RewriteDetail]:
        """The replacement of ``node``, appended to ``scope.graph.node`` (one protobuf arena: see NodeBuilder)."""
        rule, infos = _rule(node, self.ops), scope.infos
        builder = NodeBuilder(scope.opset, scope.names,
                              node.name or scope.names.fresh(f"{node.op_type}_{node.output[0]}"), scope.graph.node)
        detail = RewriteDetail()
        try:
            if isinstance(rule, OptInRule):
                # An initializer's own dims where a shapeless value_info (onnxruntime-genai writes one per
                # initializer) hid them
                tables = {name: TensorInfo(tensor.data_type, tuple(tensor.dims)) for name in node.input
                          if (tensor := scope.constants.tensor(name)) is not None and not known_rank(infos.get(name))}
                # typed by the rule (GatherBlockQuantized: by the scales, the data are quantized)
                infos[node.output[0]] = rule.emit(node, {**infos, **tables}, builder, emit_replacement)
            else:
                missing = emit_replacement(node, scope.info(node.input[0]), scope.info(node.input[1]), builder,
                                           self.runtime_alignment)
                if missing is not None:
                    why = "; ".join(why_rank_unknown(name, scope.graph, scope.original, infos)
                                    for name in node.input[:2] if not known_rank(infos.get(name)))
                    if self.layers.symbolic_failure:
                        why += f" (ORT's symbolic shape inference gave up on the model: {self.layers.symbolic_failure})"
                    detail = RewriteDetail(f"{missing}: {why}" if why else missing, runtime_aligned=True)
        except LeftUnchanged as reason:
            raise NotChanged(str(reason)) from None
        declarations = scope.cache.get("declarations")
        if declarations is None:
            declarations = scope.cache["declarations"] = Declared.of(scope.graph)
        ort_type = self.ort_types.get(node.output[0]) if scope.main else None
        if (declare_output(scope.graph, node, infos, not scope.main, declarations,
                           self._induced.get(id(scope.graph), set()), ort_type, isinstance(rule, OptInRule))
                and scope.main and ort_type is None):
            self.own_typed += 1
        return Visit(None, detail=detail)


def _internal_gather_outcome(node: NodeProto, path: str) -> NodeOutcome:
    op = f"{node.domain}.{node.op_type}"
    why = INTERNAL_GATHERS[node.domain, node.op_type]
    return NodeOutcome(op, node.name, path, False, f"inside {op}: not rewritten, {why}")


def _report_function_gathers(model: ModelProto, ops: tuple[str, ...], report: RewriteReport, reason: str) -> None:
    for function in model.functions:
        for node in nodes_within(function.node):
            if is_target(node, ops):
                report.outcomes.append(NodeOutcome(node.op_type, node.name, f"function {function.name}", False, reason))


def rewrite_model(model: ModelProto, ops: tuple[str, ...] | list[str] = GATHER_OPS,
                  ort_optimize: bool = False, runtime_alignment: bool = True, *,
                  session_options: SessionOptionsFactory | None = None, ort_value_types: bool = True,
                  external_data_folder: str | Path | None = None,
                  ort_types_read: Mapping[str, onnx.TypeProto] | None = None) -> tuple[ModelProto, RewriteReport]:
    """Return a rewritten copy of ``model`` and the report of what happened to every gather node.

    The copy keeps everything but the replaced nodes, and adds ``ai.onnx.contrib`` 1, a value_info per replaced
    output and ``graphs.provenance``'s model entry when a node was rewritten (else it comes back unchanged).
    Replaced main-graph outputs get ORT's load-time type (``graphs.ort_types``), else the rewrite's (the report's
    ``value_types``). ``ort_optimize`` stays bit-identical to the original under ORT's default session options
    (``graphs.rewrite.ort_optimizer``); ``runtime_alignment=False`` suits models to be lowered.

    Args:
        model: the model; it is not changed.
        ops: the op types to rewrite, from ``GATHER_OPS`` and ``OPT_IN_OPS``.
        ort_optimize: run ORT's offline optimizer on the model first.
        runtime_alignment: align at run time a gather whose rank only the run time knows (else leave it).
        session_options: the factory of ORT session options; None: the package's own with ``ort_optimize``,
            else plain ones for ORT's types (a model holding GatherMultiaxis then gets the rewrite's types).
        ort_value_types: declare replaced main-graph outputs with ORT's types of the original.
        external_data_folder: the folder of ``model``'s external data (ORT reads the model for its types).
        ort_types_read: ORT's types of ``ort_type_names(model, ops)``, read already; None: read here.

    Returns:
        The rewritten copy and the RewriteReport.

    Raises:
        ValueError: an op type that cannot be rewritten; ``ort_types_read`` with ``ort_optimize``.
        OrtOptimizeError: ORT cannot load or optimize the model (with ``ort_optimize``).
    """
    if ort_optimize:
        if ort_types_read is not None:
            raise ValueError("ort_types_read are the given model's types, and ort_optimize changes the model")
        if session_options is None:
            # Imported here, on the one call that loads the model in ORT: the rewriter itself runs without
            # ORT's runtime (tests/project/test_imports.py allows this one import in graphs/).
            from ...ops.runtime.registration import session_options as package_session_options
            session_options = package_session_options
        model = ort_optimizer.ort_optimize(model, external_data_folder, session_options=session_options)
    ops = tuple(ops)
    unknown_ops = set(ops) - set(GATHER_OPS) - set(OPT_IN_OPS)
    if unknown_ops:
        raise ValueError(f"cannot rewrite {sorted(unknown_ops)}; the rewritable op types are "
                         f"{list(GATHER_OPS + OPT_IN_OPS)}")
    rewrite = RewritePass(ops, runtime_alignment)
    value_types = "the rewrite's inference (ORT's types not asked for)"
    if ort_value_types and ort_types_read is not None:
        rewrite.ort_types, value_types = dict(ort_types_read), ORT_TYPES
    elif ort_value_types:
        value_types = _read_ort_types(model, rewrite, session_options, external_data_folder)
    result = rewrite(model).model
    report = rewrite.report
    report.value_types = value_types + (f" (the rewrite's inference for {rewrite.own_typed} values ORT cannot "
                                        "see)" if rewrite.ort_types and rewrite.own_typed else "")
    if report.rewritten and not any(o.domain == DOMAIN for o in result.opset_import):
        result.opset_import.add(domain=DOMAIN, version=1)
    if report.rewritten:  # a model nothing was rewritten in stays as it was, metadata included
        mark_rewritten(result)
    return result, report


ORT_TYPES = "ONNX Runtime's load-time types"  # the report's value_types where ORT gave them


def ort_type_names(model: ModelProto, ops: tuple[str, ...] | list[str] = GATHER_OPS) -> list[str]:
    """The values ``rewrite_model(model, ops)`` types by ORT: its main-graph gathers' undeclared outputs."""
    declared = {value.name for value in (*model.graph.value_info, *model.graph.output)}
    ops = tuple(ops)
    return [node.output[0] for node in model.graph.node
            if node.output and _rule(node, ops) is not None and node.output[0] not in declared]


def _read_ort_types(model: ModelProto, rewrite: RewritePass, session_options: SessionOptionsFactory | None,
                    external_data_folder: str | Path | None) -> str:
    """Give ``rewrite`` ORT's types of the undeclared main-graph gather outputs; returns the report's ``value_types``."""
    # (before the pass: ORT's session is gone before the pass's memory peaks)
    names = ort_type_names(model, rewrite.ops)
    if not names:
        return ORT_TYPES
    try:
        rewrite.ort_types = ort_types.ort_value_types(
            model, names, session_options=session_options or ort_types.plain_session_options,
            external_data_folder=external_data_folder)
    except ImportError as error:
        return f"the rewrite's inference (onnxruntime cannot be imported: {error})"
    except ort_types.OrtTypesError as error:
        return f"the rewrite's inference (ONNX Runtime cannot load the model for its types: {error})"
    return ORT_TYPES


__all__ = ["ORT_TYPES", "RewriteDetail", "RewritePass", "ort_type_names", "rewrite_model"]
