"""Lowering: every GatherMultiaxis node becomes standard ONNX ops, each in the cheapest exact form.

A visit over the pass driver (``graphs.passes.run_pass``) takes each node through three steps, the first
that applies deciding:

1. **The gather it replaced.** A node the rewrite wrote records the one standard gather it stands for
   (``graphs.provenance``); where the graph proves it (``graphs.form_check.recorded_form``: between the
   record's names and the node, exactly what the rewrite writes for that gather), that gather comes back
   and the alignment around it goes. This is what lowers nodes the rewrite aligned at run time (unknown
   ranks) to one gather too.
2. **One standard gather from the node's semantics** (``graphs.lower_forms``): Gather, GatherElements
   or GatherND, chosen from the axes, ranks, mode and the statically known sizes.
3. **The general decomposition** (``graphs.lower_general``): flat offsets computed from the run-time
   shapes, for the nodes no single gather computes; the report says why for each.

Every form's nodes pass ``graphs.form_check.check_emitted`` (ORT's GatherToSliceFusion) before they are
used; one that fails gives way to the next. The float16/bfloat16 round trip of the rewrite is folded: the
narrow input is gathered, and where the output only goes back to the narrow type through moving ops, the
narrow values go there directly (no Cast from float32 quiets a NaN payload).

In every step the model's own default opset decides what may be emitted. Models keep their IR version,
opset imports (``ai.onnx.contrib`` is dropped when nothing uses it), inputs, outputs, initializers and
value_info; functions holding a GatherMultiaxis are inlined first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from onnx import GraphProto, ModelProto, NodeProto, TensorProto

from ..ops.contract import DOMAIN, OP_TYPE, Mode
from .inference import TensorInfo
from .form_check import check_emitted, recorded_form
from .lower_forms import (FORM_NAMES, ElementsPlan, FormEmitter, GatherPlan, NDPlan, Semantics, emit_form,
                          plan_forms)
from .lower_general import (MIN_OPSET, LoweringBuilder, NotLowered, lower_gather_multiaxis,
                            lower_gather_multiaxis_at_run_time, lowerable)
from .passes import GraphScope, InferredGraph, NotChanged, Visit, run_pass
from .rewrite.rank_layers import RankLayers
from .passes.pass_report import PassReport
from .provenance import MODEL_KEY, unmark_rewritten
from .ir.walk import MOVING_OPS, ONNX_DOMAINS, moves_elements, node_holders, round_trip_cast

GENERAL = "general"  # the form name of the general decomposition
KEPT_FOR_KERNEL = "kept for the GatherMultiaxis kernel"  # lower_single_gathers' reason for a node it leaves


@dataclass
class LoweredNode:
    """What the lowering did to one GatherMultiaxis node: lowered or left (with the reason), its form and where the
    form came from."""

    node: str
    graph: str
    lowered: bool
    reason: str = ""  # why it was left; for the general form, why no single gather computes it
    form: str = ""    # Gather, GatherElements, GatherND, Identity or general
    source: str = ""  # "rewrite record" (step 1) or "semantics" (steps 2-3)


@dataclass
class LowerReport(PassReport):
    """The lowering's report: one LoweredNode per GatherMultiaxis node."""

    outcomes: list[LoweredNode] = field(default_factory=list)
    DONE: ClassVar[str] = "lowered"

    @property
    def lowered(self) -> int:
        """How many nodes were lowered."""
        return self.done()

    def forms(self) -> dict[str, int]:
        """How many nodes were lowered to each form.

        Returns:
            ``{form: count}`` over the lowered nodes, forms sorted.
        """
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            if outcome.lowered:
                counts[outcome.form] = counts.get(outcome.form, 0) + 1
        return dict(sorted(counts.items()))

    def as_dict(self) -> dict:
        """The report as JSON-ready data (the commands' ``--json``).

        Returns:
            PassReport's dict plus ``forms`` (``forms()``).
        """
        return {**super().as_dict(), "forms": self.forms()}

    def table(self) -> str:
        """The report as text: the counts, the forms, then each general-form or left node with its reason.

        Returns:
            The lines, joined by newlines.
        """
        lines = [f"GatherMultiaxis lowered: {self.lowered}, left: {self.left}"]
        if self.forms():
            lines.append("  forms: " + ", ".join(f"{form} {count}" for form, count in self.forms().items()))
        lines += [f"  general form for {o.node!r} in {o.graph}: {o.reason}" for o in self.outcomes
                  if o.lowered and o.form == GENERAL]
        lines += [f"  left {o.node!r} in {o.graph}: {o.reason}" for o in self.left_outcomes()]
        return "\n".join(lines)


def is_gather_multiaxis(node: NodeProto) -> bool:
    """Whether ``node`` is a GatherMultiaxis node (its op type in the op's domain).

    Args:
        node: any node.

    Returns:
        True for a GatherMultiaxis node.
    """
    return node.op_type == OP_TYPE and node.domain == DOMAIN


# -- step 1: the gather the rewrite replaced ------------------------------------------------------------


def _replaced_form(node: NodeProto, scope: GraphScope) -> Visit | None:
    """Step 1: the recorded gather, where ``graphs.form_check.recorded_form`` finds the graph proves it."""
    form = recorded_form(node, scope)
    if form is None:
        return None
    return Visit([form.gather], removes=form.tail, freed={*node.input, *(i for n in form.tail for i in n.input)},
                 detail={"form": form.gather.op_type, "source": "rewrite record"})


def _narrow_tail(scope: GraphScope, name: str, elem_type: int) -> list[NodeProto] | None:
    """The nodes from ``name`` to the Cast back to ``elem_type`` (the rewriter's float16/bfloat16 round trip):
    moving ops (``graphs.walk.MOVING_OPS``), then the Cast, each the only reader of the value before it; None
    when the graph does not have that shape."""
    chain, current = list[NodeProto](), name
    while len(chain) <= len(MOVING_OPS):
        readers = scope.consumers.get(current, [])
        if len(readers) != 1 or scope.readers.get(current, 0) != 1:
            return None
        reader = readers[0]
        if reader.domain not in ONNX_DOMAINS or reader.input[0] != current or list(reader.input).count(current) != 1:
            return None
        if round_trip_cast(reader, elem_type):
            return chain + [reader]
        if not moves_elements(reader, elem_type):
            return None
        chain.append(reader)
        current = reader.output[0]
    return None


def _narrow_finish(builder: LoweringBuilder, values: str, tail: list[NodeProto]) -> None:
    """The moving ops of ``tail`` again on the narrow gathered ``values``, the last writing the output of the
    Cast back that ends ``tail`` (so that no Cast from float32 narrows them: ORT's drops NaN payloads)."""
    for node in tail[:-1]:
        copy = NodeProto()
        copy.CopyFrom(node)
        copy.input[0] = values
        copy.output[0] = copy.name = values = builder.names.fresh(f"{builder.prefix}/narrow_{node.op_type.lower()}")
        builder.nodes.append(copy)
    producer = next(node for node in reversed(builder.nodes) if values in node.output)
    producer.output[list(producer.output).index(values)] = tail[-1].output[0]


# -- the visit --------------------------------------------------------------------------------------------


@dataclass
class LowerPass:
    """The lowering as a visit over ``graphs.passes.run_pass``."""

    report: LowerReport = field(default_factory=LowerReport)
    external_data_folder: str | os.PathLike | None = None  # where the scope's constants read external data
    single_gather_only: bool = False  # leave the nodes that only the general decomposition computes
    drops_domain: ClassVar[bool] = True
    layers: RankLayers = field(init=False)

    def __post_init__(self) -> None:
        # No layer 2: ORT's symbolic inference imports sympy (0.5-3 s), and the session lowers at start-up.
        self.layers = RankLayers(None)

    def scope_infos(self, graph: GraphProto, twin: InferredGraph, outer: dict[str, TensorInfo],
                    main: bool) -> dict[str, TensorInfo]:
        """Layer 1, then declared input ranks where it gives none."""
        return self.layers.scope_infos(graph, twin, outer, main)

    def observe(self, node: NodeProto, scope: GraphScope) -> None:
        """Layer 3 and declared ranks, as the rewrite types ``node``'s outputs."""
        self.layers.observe(node, scope)

    def targets(self, node: NodeProto) -> bool:
        """Whether the pass visits ``node``.

        Args:
            node: a node of any graph.

        Returns:
            True for a GatherMultiaxis node.
        """
        return is_gather_multiaxis(node)

    def outcome(self, node: NodeProto, path: str, visit: Visit | None, reason: str) -> LoweredNode:
        """The report's row for a visited node.

        Args:
            node: the GatherMultiaxis node.
            path: the path of its graph in the model.
            visit: the visit's change, or None when the node was left.
            reason: why it was left (used when ``visit`` is None).

        Returns:
            The LoweredNode, with the form and source when lowered.
        """
        if visit is None:
            return LoweredNode(node.name, path, False, reason)
        return LoweredNode(node.name, path, True, visit.detail.get("reason", ""), visit.detail["form"],
                           visit.detail["source"])

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit:
        """The standard ONNX replacement of a GatherMultiaxis ``node``.

        Args:
            node: a GatherMultiaxis node.
            scope: its graph's scope.

        Returns:
            The Visit, with the form and source in ``detail``.

        Raises:
            NotChanged: the node is left as it is (wrong arity, axes not 1-D int64, or not lowerable; the
                message is the reason).
        """
        if len(node.input) != 3 or len(node.output) != 1:
            raise NotChanged("a GatherMultiaxis node takes 3 inputs and gives 1 output")
        replaced = _replaced_form(node, scope)
        if replaced is not None:
            return replaced
        data, indices = scope.info(node.input[0]), scope.info(node.input[1])
        axes = scope.constants.get(node.input[2])
        axes_type = scope.info(node.input[2]).elem_type
        if (axes is not None and (axes.ndim != 1 or axes.dtype != np.int64)) or axes_type not in (0, TensorProto.INT64):
            kind = f"{axes.ndim}-D {axes.dtype}" if axes is not None else TensorProto.DataType.Name(axes_type)
            raise NotChanged(f"axes {node.input[2]!r} are not a 1-D int64 tensor ({kind}; the op takes 1-D int64)")
        builder = self._builder(node, scope)
        freed = {node.input[2]}
        try:
            ranks = (data.rank, indices.rank)
            if axes is None or ranks == (None, None) or (0 in ranks and None in ranks):  # (rank 0: no general form
                # to check the other rank in)
                if self.single_gather_only:
                    raise NotChanged(f"{KEPT_FOR_KERNEL}: axes or ranks known only at run time")
                # axes computed by the model (an axes initializer that is also a graph input, whose value may be
                # fed at run time) or no rank known
                narrow = self._narrow(node, data, Mode.ERROR, scope, builder, freed)
                lower_gather_multiaxis_at_run_time(node, data.elem_type, builder, narrow)
                return self._general(node, scope, builder, narrow, freed, "axes or ranks known only at run time")
            mode, rank, axes = lowerable(node, data, indices, [int(a) for a in axes], scope.opset)
            if rank == 0:
                lower_gather_multiaxis(node, data, indices, axes, builder)
                return Visit(builder.nodes, freed=freed, detail={"form": "Identity", "source": "semantics"})
            semantics = Semantics(rank, tuple(axes), mode, data, indices)
            plans, reasons = plan_forms(semantics, scope.opset)
            if plans and mode in (Mode.CLAMP, Mode.ZERO) and not indices.elem_type:
                plans = []
                reasons.append("the indices' element type is not known (the bounds of 'clamp' and 'zero' need it)")
            for number, plan in enumerate(plans):
                builder = builder if number == 0 else self._builder(node, scope)
                visit = self._single_gather(node, scope, semantics, plan, builder, set(freed))
                why = check_emitted(visit.nodes or (), scope)
                if why is None:
                    return visit
                reasons.append(f"{FORM_NAMES[type(plan)]}: {why}")
            general_reason = "no single gather computes it: " + "; ".join(reasons)
            if self.single_gather_only:
                raise NotChanged(f"{KEPT_FOR_KERNEL}: {general_reason}")
            builder = builder if not plans else self._builder(node, scope)
            narrow = self._narrow(node, data, mode, scope, builder, freed)
            lower_gather_multiaxis(node, data, indices, axes, builder, narrow)
            return self._general(node, scope, builder, narrow, freed, general_reason)
        except NotLowered as reason:
            raise NotChanged(str(reason)) from None

    def _general(self, node: NodeProto, scope: GraphScope, builder: LoweringBuilder, narrow: tuple[str, int] | None,
                 freed: set[str], reason: str) -> Visit:
        """Step 3's Visit, its nodes checked as every form's are (``form_check.check_emitted``)."""
        removes = self._narrow_output(node, scope, builder, narrow)
        unfit = check_emitted(builder.nodes, scope)
        if unfit is not None:
            raise NotLowered(f"the general form: {unfit}")
        return Visit(builder.nodes, removes=removes, freed=freed, detail={"form": GENERAL, "source": "semantics",
                                                                          "reason": reason})

    @staticmethod
    def _builder(node: NodeProto, scope: GraphScope) -> LoweringBuilder:
        return LoweringBuilder(scope.opset, scope.names, node.name or scope.names.fresh(f"{OP_TYPE}_{node.output[0]}"))

    @staticmethod
    def _narrow(node: NodeProto, data: TensorInfo, mode: Mode, scope: GraphScope, builder: LoweringBuilder,
                freed: set[str]) -> tuple[str, int] | None:
        """The float16/bfloat16 value the node's input widens (``_narrow_source``), which the form gathers
        instead. Mode "zero" zeroes in the gathered type: float16 (ORT's Where has no bfloat16 kernel)."""
        types = (TensorProto.FLOAT16,) if mode == Mode.ZERO else (TensorProto.FLOAT16, TensorProto.BFLOAT16)
        narrow = _narrow_source(node.input[0], data, scope, builder, types)
        if narrow is not None:
            freed.add(node.input[0])  # the widened input: dropped if nothing else reads it
        return narrow

    @staticmethod
    def _narrow_output(node: NodeProto, scope: GraphScope, builder: LoweringBuilder,
                       narrow: tuple[str, int] | None) -> list[NodeProto]:
        """Where the node's output only goes back to the narrow type (``_narrow_tail``), the narrow gathered
        values go there directly instead of through float32 (the widening Cast ending ``builder``'s nodes
        goes); returns the nodes of the graph that then go."""
        tail = _narrow_tail(scope, node.output[0], narrow[1]) if narrow is not None else None
        last = builder.nodes[-1] if builder.nodes else None
        if tail is None or last is None or not round_trip_cast(last) or last.output[0] != node.output[0]:
            return []
        builder.nodes.pop()
        _narrow_finish(builder, last.input[0], tail)
        return tail

    def _single_gather(self, node: NodeProto, scope: GraphScope, semantics: Semantics,
                       plan: GatherPlan | ElementsPlan | NDPlan, builder: LoweringBuilder, freed: set[str]) -> Visit:
        """Step 2: the nodes of ``plan``, on the narrow input where there is one."""
        narrow = self._narrow(node, semantics.data, semantics.mode, scope, builder, freed)
        x, elem_type = narrow if narrow is not None else (node.input[0], semantics.data.elem_type)
        emitter = FormEmitter(builder, semantics, x, node.input[1], scope.constants, elem_type)
        values = emit_form(plan, emitter)
        if narrow is not None:
            values = builder.cast(values, semantics.data.elem_type, "widened")
        builder.rename_last_output(node.output[0])
        removes = self._narrow_output(node, scope, builder, narrow)
        return Visit(builder.nodes, removes=removes, freed=freed | {node.input[1]},
                     detail={"form": FORM_NAMES[type(plan)], "source": "semantics"})


def _narrow_source(x: str, data: TensorInfo, scope: GraphScope, builder: LoweringBuilder,
                   types: tuple[int, ...] = (TensorProto.FLOAT16, TensorProto.BFLOAT16)) -> tuple[str, int] | None:
    """The rewriter's float16/bfloat16 round trip: ``x`` is moving ops (``graphs.walk.MOVING_OPS``: the
    rewrite's alignment) of ``Cast(narrow, to=FLOAT)``. Then the lowering gathers from (the moving ops again on)
    ``narrow`` and widens only what it read, instead of the whole input on every run (a Cast is elementwise
    and exact, so the order does not matter)."""
    if data.elem_type != TensorProto.FLOAT:
        return None
    moving, node = list[NodeProto](), scope.producers.get(x)
    while moves_elements(node, TensorProto.FLOAT16) and len(moving) < len(MOVING_OPS):
        moving.append(node)
        node = scope.producers.get(node.input[0])
    if not round_trip_cast(node):
        return None
    source = scope.infos.get(node.input[0])
    if source is None or source.elem_type not in types or not all(moves_elements(n, source.elem_type) for n in moving):
        return None
    name = node.input[0]
    for aligned in reversed(moving):
        copy = NodeProto()
        copy.CopyFrom(aligned)
        copy.input[0] = name
        copy.output[0] = copy.name = name = builder.names.fresh(f"{builder.prefix}/narrow_aligned")
        builder.nodes.append(copy)
    return name, source.elem_type


def lower_model(model: ModelProto, external_data_folder: str | os.PathLike | None = None, *,
                single_gather_only: bool = False) -> tuple[ModelProto, LowerReport]:
    """Return a copy of ``model`` with every GatherMultiaxis node replaced by standard ONNX ops, and the
    report of what happened to each (its form; a node is only ever replaced by an equivalent subgraph
    or left as it is, with the reason). See the module docstring for the steps. Constant indices kept in
    an external file are read from ``external_data_folder``, the model's folder (and only there). A copy
    left with no GatherMultiaxis node loses the rewrite's model-level entry (``graphs.provenance.MODEL_KEY``):
    it is plain ONNX (not with ``single_gather_only``, the session's lowering of the file it runs).

    Args:
        model: the model; it is not changed.
        external_data_folder: the model's folder, where external constant indices are read; None when
            none is needed.
        single_gather_only: lower only the nodes one standard gather computes (``lower_single_gathers``).

    Returns:
        The lowered copy and the LowerReport.
    """
    lowering = LowerPass(external_data_folder=external_data_folder, single_gather_only=single_gather_only)
    # Under onnx < 1.19 shape inference stops at a GatherMultiaxis (its schema has no inference there), so
    # ranks behind one are known only once it is lowered: the driver repeats while it lowers and leaves.
    result = run_pass(model, lowering, repeat=True)
    unname_replaced_dims(model, result)
    if not single_gather_only and any(entry.key == MODEL_KEY for entry in result.metadata_props) and not any(
            is_gather_multiaxis(node) for holder in node_holders(result) for node in holder.node):
        # plain ONNX again: the rewrite's note on how to run the file no longer holds (the session's own
        # single-gather lowering keeps it: its model stands for the rewritten file)
        if result is model:
            result = ModelProto()
            result.CopyFrom(model)
        unmark_rewritten(result)
    return result, lowering.report


_RESTORING_OPS = {"Squeeze", "Unsqueeze", "Reshape", "Flatten", "Identity", "Cast", "Expand"}
_RESTORING_DEPTH = 3  # the rewrite's restore: a Squeeze or Reshape, then the float16 Cast back


def unname_replaced_dims(before: ModelProto, after: ModelProto) -> None:
    """In ``after``, the value_info of each GatherMultiaxis output of ``before`` that no GatherMultiaxis
    computes any more, and of what the rewrite's restoring ops write from it, keeps its type, rank and sizes
    but loses its dim names. The rewrite declared those
    names (``batch``), not the model's author; tract, which pins inputs to concrete sizes, refuses a
    declared name that meets a size ("Impossible to unify Sym(batch) with Val(2)").

    Args:
        before: the model that was lowered.
        after: its lowered copy, changed in place.

    Returns:
        None.
    """
    def outputs(model: ModelProto) -> set[str]:
        return {node.output[0] for holder in node_holders(model) for node in holder.node if is_gather_multiaxis(node)}

    replaced = outputs(before) - outputs(after)
    # and what the rewrite's restoring ops (Squeeze, Reshape, a Cast back) write from them: the replaced
    # gather's own output, which the rewrite typed too
    readers: dict[str, list[NodeProto]] = {}
    for holder in node_holders(before):
        for node in holder.node:
            if node.input and node.op_type in _RESTORING_OPS:
                readers.setdefault(node.input[0], []).append(node)
    frontier = set(replaced)
    for _ in range(_RESTORING_DEPTH):
        frontier = {output for name in frontier for node in readers.get(name, ()) for output in node.output} - replaced
        replaced |= frontier
    for holder in node_holders(after):
        for info in getattr(holder, "value_info", ()):  # functions declare none
            if info.name in replaced and info.type.HasField("tensor_type"):
                for dim in info.type.tensor_type.shape.dim:
                    if dim.HasField("dim_param"):
                        dim.ClearField("dim_param")


def lower_single_gathers(model: ModelProto, external_data_folder: str | os.PathLike | None = None
                         ) -> tuple[ModelProto, LowerReport]:
    """``lower_model`` restricted to the nodes that one standard gather computes (steps 1 and 2 of the
    module docstring): what the package's session runs on ORT's builtin kernels. A node that needs the
    general decomposition is left, with the reason (``KEPT_FOR_KERNEL``), for the GatherMultiaxis kernel.

    Args:
        model: the model; it is not changed.
        external_data_folder: as ``lower_model``'s.

    Returns:
        The copy and the LowerReport (lowered: the nodes now one standard gather).
    """
    return lower_model(model, external_data_folder, single_gather_only=True)


__all__ = ["GENERAL", "KEPT_FOR_KERNEL", "MIN_OPSET", "LowerPass", "LowerReport", "LoweredNode", "is_gather_multiaxis", "lower_model",
           "lower_single_gathers", "unname_replaced_dims"]
