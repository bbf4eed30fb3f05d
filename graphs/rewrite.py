"""Rewrite of a whole ONNX model: every Gather, GatherElements and GatherND becomes GatherMultiaxis.

Ranks are found in four layers, each filling what the previous ones missed: ONNX shape inference, ORT's
symbolic shape inference, the rank rules of ``rank_inference``, and finally a run-time alignment
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

import itertools
from collections import Counter
from collections.abc import Set as AbstractSet
from pathlib import Path
from dataclasses import dataclass, field
from typing import ClassVar

import onnx
from onnx import GraphProto, ModelProto, NodeProto, helper

from ..ops.contract import DOMAIN
from . import ort_optimizer, ort_types
from .ir.builder import NodeBuilder
from .modelfile import SessionOptionsFactory
from .passes import GraphScope, InferredGraph, NotChanged, Visit, run_pass
from .rank_layers import RankLayers
from .provenance import mark_rewritten
from .passes.pass_report import PassReport
from .inference import known_rank
from .inference import TensorInfo
from .rules import RULES, LeftUnchanged, OptInRule, emit_replacement
from .ir.walk import ONNX_DOMAINS, node_holders, nodes_within

GATHER_OPS = tuple(op for op, rule in RULES.items() if not isinstance(rule, OptInRule))  # rewritten by default

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

OPT_IN_OPS = tuple(op for op, rule in RULES.items() if isinstance(rule, OptInRule))  # only when asked for (ops=...)


@dataclass
class NodeOutcome:
    """What the rewrite did to one gather node: rewritten or left (with the reason), and whether it was aligned at
    run time."""

    op_type: str
    node: str
    graph: str
    rewritten: bool
    reason: str = ""              # why it was left, or why it was aligned at run time
    runtime_aligned: bool = False  # rewritten with the run-time alignment (the last resort)


@dataclass
class RewriteReport(PassReport):
    """The rewrite's report: one NodeOutcome per gather node."""

    outcomes: list[NodeOutcome] = field(default_factory=list)
    # How the value_info of replaced main-graph outputs is typed: ORT's types of the original, or why not
    value_types: str = ""
    DONE: ClassVar[str] = "rewritten"

    @property
    def rewritten(self) -> int:
        """How many gathers were rewritten."""
        return self.done()

    @property
    def runtime_aligned(self) -> int:
        """How many of the rewritten gathers were aligned at run time."""
        return sum(o.runtime_aligned for o in self.outcomes)

    def counts(self) -> dict[str, dict[str, int]]:
        """The rewritten and left gathers counted per op type.

        Returns:
            ``{op_type: {"rewritten": n, "left": m}}``, op types sorted.
        """
        table: dict[str, Counter] = {}
        for outcome in self.outcomes:
            table.setdefault(outcome.op_type, Counter())["rewritten" if outcome.rewritten else "left"] += 1
        return {op: {"rewritten": c["rewritten"], "left": c["left"]} for op, c in sorted(table.items())}

    def as_dict(self) -> dict:
        """The report as JSON-ready data (the commands' ``--json``).

        Returns:
            ``rewritten``, ``left``, ``runtime_aligned``, ``by_op`` (``counts()``), ``value_types`` and
            ``nodes`` (one dict per outcome).
        """
        return {"rewritten": self.rewritten, "left": self.left, "runtime_aligned": self.runtime_aligned,
                "by_op": self.counts(), "value_types": self.value_types,
                "nodes": [vars(o) for o in self.outcomes]}

    def table(self) -> str:
        """The report as text: one row per op type, the total, then each left or run-time-aligned node
        with its reason.

        Returns:
            The lines, joined by newlines.
        """
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


def holds_gather(model: ModelProto, ops: tuple[str, ...] = GATHER_OPS) -> bool:
    """Whether any graph of the model (main graph, subgraphs, model-local functions) holds one of ``ops``.

    Args:
        model: the model to search.
        ops: the op types that count (ONNX domain only); by default ``GATHER_OPS``.

    Returns:
        True when at least one node of those op types is found.
    """
    return any(_is_target(node, ops) for holder in node_holders(model) for node in holder.node)


def _is_target(node: NodeProto, ops: tuple[str, ...]) -> bool:
    return node.op_type in ops and node.domain in ONNX_DOMAINS


def _rule(node: NodeProto, ops: tuple[str, ...]):
    """The entry of ``RULES`` that rewrites ``node`` when ``ops`` asks for its op type, or None."""
    rule = RULES.get(node.op_type) if node.op_type in ops else None
    if rule is None or node.domain not in ((rule.domain,) if isinstance(rule, OptInRule) else ONNX_DOMAINS):
        return None
    return rule


@dataclass
class RewritePass:
    """The rewrite as a visit over ``graphs.passes.run_pass``: each gather of ``ops`` becomes its rule's
    replacement, built in the graph's own node field. Types come in four layers (the module docstring):
    layer 1 from the driver, layer 2 here for a graph one of whose gathers lacks a rank after layer 1,
    layer 3 (the rank rules) and declared ranks as the driver shows each node in order."""

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
        """Whether the pass rewrites ``node`` (a rule exists for its op type and ``ops`` asks for it).

        Args:
            node: a node of any graph.

        Returns:
            True for a node to visit.
        """
        return _rule(node, self.ops) is not None

    def copy_targets(self, node: NodeProto) -> bool:
        """What the copy inlines functions for (the ONNX gathers; an opt-in op in a function stays there).

        Args:
            node: a node of a model-local function.

        Returns:
            True when ``node`` is one of ``ops`` in an ONNX domain.
        """
        return _is_target(node, self.ops)

    def begin(self, model: ModelProto, light: ModelProto) -> None:
        """Records the gathers left in model-local functions and keeps the typing copy for layer 2.

        Args:
            model: the pass's copy of the model (functions holding gathers already inlined).
            light: the typing copy (graphs.inference.typing_copy), kept serialized.
        """
        if not self.report.outcomes:  # inlined: what a function still holds is in one that is never called
            _report_function_gathers(model, self.ops, self.report, "in a model-local function that no node calls")
        self.layers.begin(light)

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
        """The types of the names visible in ``graph``: layer 1, then layer 2 and declared ranks where
        those lack a rank.

        Args:
            graph: the graph about to be walked.
            twin: what inference of the typing copy says of ``graph``.
            outer: the enclosing scopes' types.
            main: whether ``graph`` is the main graph.

        Returns:
            A new dict, name to TensorInfo.
        """
        if twin.induced:
            self._induced[id(graph)] = twin.induced
        return self.layers.scope_infos(graph, twin, outer, main)

    def observe(self, node: NodeProto, scope: GraphScope) -> None:
        """Types ``node``'s outputs by the rank rules (layer 3) and declared ranks where nothing else did,
        and records an internal gather it leaves.

        Args:
            node: the node the driver is at, in graph order.
            scope: its graph's scope (``scope.infos`` is updated in place).
        """
        if (node.domain, node.op_type) in INTERNAL_GATHERS and _rule(node, self.ops) is None:
            scope.outcomes.append(_internal_gather_outcome(node, scope.path))
        self.layers.observe(node, scope)  # layer 3, then declared ranks, where layers 1 and 2 have no rank

    def outcome(self, node: NodeProto, path: str, visit: Visit | None, reason: str) -> NodeOutcome:
        """The report's row for a visited gather.

        Args:
            node: the gather node.
            path: the path of its graph in the model.
            visit: the visit's change, or None when the node was left.
            reason: why it was left (used when ``visit`` is None).

        Returns:
            The NodeOutcome.
        """
        if visit is None:
            return NodeOutcome(node.op_type, node.name, path, False, reason)
        return NodeOutcome(node.op_type, node.name, path, True, visit.detail.get("reason", ""),
                           runtime_aligned=visit.detail.get("runtime_aligned", False))

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit:
        """The replacement of a gather ``node``, appended to ``scope.graph.node`` (one protobuf arena: see
        NodeBuilder); raises NotChanged with the reason.

        Args:
            node: a gather node ``targets`` accepts.
            scope: its graph's scope.

        Returns:
            The Visit, with ``detail`` saying when the node was aligned at run time and why.

        Raises:
            NotChanged: the rule leaves the node as it is (the message is the reason).
        """
        rule, infos = _rule(node, self.ops), scope.infos
        builder = NodeBuilder(scope.opset, scope.names,
                              node.name or scope.names.fresh(f"{node.op_type}_{node.output[0]}"), scope.graph.node)
        detail = {}
        try:
            if isinstance(rule, OptInRule):
                # An initializer's own dims where a shapeless value_info (onnxruntime-genai writes one per
                # initializer) hid them
                tables = {name: TensorInfo(tensor.data_type, tuple(tensor.dims)) for name in node.input
                          if (tensor := scope.constants.tensor(name)) is not None and not known_rank(infos.get(name))}
                # typed by the rule (GatherBlockQuantized: by the scales, the data are quantized)
                infos[node.output[0]] = rule.emit(node, {**infos, **tables}, builder)
            else:
                missing = emit_replacement(node, scope.info(node.input[0]), scope.info(node.input[1]), builder,
                                           self.runtime_alignment)
                if missing is not None:
                    why = "; ".join(_why_rank_unknown(name, scope.graph, scope.original, infos)
                                    for name in node.input[:2] if not known_rank(infos.get(name)))
                    if self.layers.symbolic_failure:
                        why += f" (ORT's symbolic shape inference gave up on the model: {self.layers.symbolic_failure})"
                    detail = {"reason": f"{missing}: {why}" if why else missing, "runtime_aligned": True}
        except LeftUnchanged as reason:
            raise NotChanged(str(reason)) from None
        declarations = scope.cache.get("declarations")
        if declarations is None:
            declarations = scope.cache["declarations"] = _Declared.of(scope.graph)
        ort_type = self.ort_types.get(node.output[0]) if scope.main else None
        if (_declare_output(scope.graph, node, infos, not scope.main, declarations,
                            self._induced.get(id(scope.graph), set()), ort_type)
                and scope.main and ort_type is None):
            self.own_typed += 1
        return Visit(None, detail=detail)


def _internal_gather_outcome(node: NodeProto, path: str) -> NodeOutcome:
    op = f"{node.domain}.{node.op_type}"
    why = INTERNAL_GATHERS[node.domain, node.op_type]
    return NodeOutcome(op, node.name, path, False, f"inside {op}: not rewritten, {why}")


def _why_rank_unknown(name: str, graph: GraphProto, original: int, infos: dict[str, TensorInfo]) -> str:
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
                    declared: _Declared, induced: AbstractSet[str] = frozenset(),
                    ort_type: onnx.TypeProto | None = None) -> bool:
    """Type a replaced node's output: a value_info with its element type (the data's) and what is known of
    its shape, unless the graph declares it already. A subgraph output declared without a shape gets its
    rank: ORT's Loop and Scan require a shape for every body output and infer none through a custom op.
    No shape for an output whose rank only the Loop induction gives (``induced``): ORT knows no such rank
    in the original, and what it infers from a declared one reaches a Loop's scan outputs, which come back
    as [0] after zero iterations where nothing is known of them, as [0, 0, ...] where a rank is. ``ort_type``:
    ORT's own type of the value in the original, declared as it is. Returns whether a value_info was added."""
    output = node.output[0]
    elem_type = infos.get(node.input[0], TensorInfo(0, None)).elem_type
    if isinstance(_rule(node, (node.op_type,)), OptInRule):  # typed by the rule, not by its data
        elem_type = infos.get(output, TensorInfo(0, None)).elem_type
    shape = infos.get(output, TensorInfo(0, None)).shape if output not in induced else None
    graph_output = declared.outputs.get(output)
    if graph_output is not None:
        tensor_type = graph_output.type.tensor_type
        if subgraph and shape is not None and not tensor_type.HasField("shape"):
            # The rank only: a static size ORT took from here would fix the body output's allocation,
            # and a wrong one ends the process inside the PyOp bridge.
            typed = helper.make_tensor_value_info(output, tensor_type.elem_type or elem_type, [None] * len(shape))
            graph_output.type.CopyFrom(typed.type)
        return False
    if output in declared.typed:
        return False
    if ort_type is not None:
        graph.value_info.add(name=output).type.CopyFrom(ort_type)
    elif elem_type:
        graph.value_info.append(helper.make_tensor_value_info(output, elem_type, None if shape is None else list(shape)))
    else:
        return False
    declared.typed.add(output)
    return True


def _report_function_gathers(model: ModelProto, ops: tuple[str, ...], report: RewriteReport, reason: str) -> None:
    for function in model.functions:
        for node in nodes_within(function.node):
            if _is_target(node, ops):
                report.outcomes.append(NodeOutcome(node.op_type, node.name, f"function {function.name}", False, reason))


def rewrite_model(model: ModelProto, ops: tuple[str, ...] | list[str] = GATHER_OPS,
                  ort_optimize: bool = False, runtime_alignment: bool = True, *,
                  session_options: SessionOptionsFactory | None = None, ort_value_types: bool = True,
                  external_data_folder: str | Path | None = None) -> tuple[ModelProto, RewriteReport]:
    """Return a rewritten copy of ``model`` and the report of what happened to every gather node.

    The copy keeps the model's IR version, opset imports (plus ``ai.onnx.contrib`` 1 when a node was
    rewritten), producer, graph inputs/outputs, initializers, value_info, metadata and doc strings; it adds a
    value_info for every replaced output and, when a node was rewritten, a model-level ``metadata_props``
    entry ``"gathermultiaxis"`` naming the package, its version and how to run or lower the file
    (``graphs.provenance.mark_rewritten``). A model with nothing rewritten is returned unchanged. With
    ``ort_value_types`` (the default), replaced main-graph outputs get the type ORT's own load-time inference
    gives the value in ``model`` (``graphs.ort_types``: a type ORT did not know could enable a fusion the
    original does not meet); where ORT cannot say (it cannot load the model, or a value from an inlined
    function), what the rewrite's inference knows, and the report's ``value_types`` says so. With
    ``ort_optimize``, ORT's offline optimizer runs first (see
    graphs.ort_optimizer: the way to stay bit-identical to the original under ORT's default session options),
    on options ``session_options`` gives (by default ``gathermultiaxis.session_options``).
    With ``runtime_alignment=False``, a gather whose rank (or GatherND coordinate size) only the run
    time knows is left as it is instead of aligned at run time: for models to be lowered
    (``lower_model`` needs static axes), where the builtin gather is the portable form anyway.

    Args:
        model: the model; it is not changed.
        ops: the op types to rewrite, from ``GATHER_OPS`` and ``OPT_IN_OPS``.
        ort_optimize: run ORT's offline optimizer on the model first.
        runtime_alignment: align at run time a gather whose rank only the run time knows (else leave it).
        session_options: the factory of ORT session options (``gathermultiaxis.session_options``); None: the
            package's own with ``ort_optimize``, else plain options for reading ORT's types (a model that holds
            GatherMultiaxis nodes then falls back to the rewrite's own types).
        ort_value_types: declare replaced main-graph outputs with ORT's types of the original.
        external_data_folder: the folder ``model``'s external data locations are relative to (ORT reads
            the model for its types).

    Returns:
        The rewritten copy and the RewriteReport.

    Raises:
        ValueError: an op type that cannot be rewritten.
        OrtOptimizeError: ORT cannot load or optimize the model (with ``ort_optimize``).
    """
    if ort_optimize:
        if session_options is None:
            # Imported here, on the one call that loads the model in ORT: the rewriter itself runs without
            # ORT's runtime (tests/project/test_imports.py allows this one import in graphs/).
            from ..ops.runtime.registration import session_options as package_session_options
            session_options = package_session_options
        model = ort_optimizer.ort_optimize(model, external_data_folder, session_options=session_options)
    ops = tuple(ops)
    unknown_ops = set(ops) - set(GATHER_OPS) - set(OPT_IN_OPS)
    if unknown_ops:
        raise ValueError(f"cannot rewrite {sorted(unknown_ops)}; the rewritable op types are "
                         f"{list(GATHER_OPS + OPT_IN_OPS)}")
    rewrite = RewritePass(ops, runtime_alignment)
    value_types = "the rewrite's inference (ORT's types not asked for)"
    if ort_value_types:
        value_types = _read_ort_types(model, rewrite, session_options, external_data_folder)
    result = run_pass(model, rewrite)
    report = rewrite.report
    report.value_types = value_types + (f" (the rewrite's inference for {rewrite.own_typed} values ORT cannot "
                                        "see)" if rewrite.ort_types and rewrite.own_typed else "")
    if report.rewritten and not any(o.domain == DOMAIN for o in result.opset_import):
        result.opset_import.add(domain=DOMAIN, version=1)
    if report.rewritten:  # a model nothing was rewritten in stays as it was, metadata included
        mark_rewritten(result)
    return result, report


def _read_ort_types(model: ModelProto, rewrite: RewritePass, session_options: SessionOptionsFactory | None,
                    external_data_folder: str | Path | None) -> str:
    """Give ``rewrite`` ORT's types of the outputs of ``model``'s main-graph gathers that the model does not
    declare (before the pass: ORT's session is gone before the pass's memory peaks); returns the report's
    ``value_types``."""
    declared = {value.name for value in (*model.graph.value_info, *model.graph.output)}
    names = [node.output[0] for node in model.graph.node
             if node.output and rewrite.targets(node) and node.output[0] not in declared]
    if not names:
        return "ONNX Runtime's load-time types"
    try:
        rewrite.ort_types = ort_types.ort_value_types(
            model, names, session_options=session_options or ort_types.plain_session_options,
            external_data_folder=external_data_folder)
    except ImportError as error:
        return f"the rewrite's inference (onnxruntime cannot be imported: {error})"
    except ort_types.OrtTypesError as error:
        return f"the rewrite's inference (ONNX Runtime cannot load the model for its types: {error})"
    return "ONNX Runtime's load-time types"


__all__ = ["GATHER_OPS", "INTERNAL_GATHERS", "OPT_IN_OPS", "NodeOutcome", "RewriteReport", "holds_gather", "rewrite_model"]
