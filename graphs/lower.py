"""Lowering: every GatherMultiaxis node becomes standard ONNX ops, each in the cheapest exact form.

A visit over the pass driver (``graphs.passes.run_pass``) takes each node through three steps, the first
that applies deciding:

1. **The gather it replaced.** A node the rewrite wrote records the one standard gather it stands for
   (``graphs.provenance``); where the graph still has the rewrite's shape around it (the mode the
   rewrite chose, the recorded inputs upstream, the recorded output downstream through the rewrite's
   tail of Squeeze / Reshape / Cast nodes), that gather comes back and the alignment around it goes.
   This is what lowers nodes the rewrite aligned at run time (unknown ranks) to one gather too.
2. **One standard gather from the node's semantics** (``graphs.lower_forms``): Gather, GatherElements
   or GatherND, chosen from the axes, ranks, mode and the statically known sizes.
3. **The general decomposition** (``graphs.lower_general``): flat offsets computed from the run-time
   shapes, for the nodes no single gather computes; the report says why for each.

In every step the model's own default opset decides what may be emitted. Models keep their IR version,
opset imports (``ai.onnx.contrib`` is dropped when nothing uses it), inputs, outputs, initializers and
value_info; functions holding a GatherMultiaxis are inlined first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper

from ..ops.contract import DOMAIN, OP_TYPE, Mode
from .inference import TensorInfo
from .lower_forms import FORM_NAMES, FormEmitter, Semantics, emit_form, plan_form
from .lower_general import (MIN_OPSET, LoweringBuilder, NotLowered, lower_gather_multiaxis,
                            lower_gather_multiaxis_at_run_time, lowerable)
from .passes import GraphScope, NotChanged, Visit, run_pass
from .provenance import carry_metadata, replaced_gather
from .report import PassReport
from .walk import ONNX_DOMAINS, attribute, round_trip_cast

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

# The modes the rewrite writes for each op (graphs.rules), and the first opset of each op's attributes.
_REWRITE_MODES = {"Gather": Mode.ERROR, "GatherElements": Mode.ERROR, "GatherND": Mode.ERROR_NONEMPTY}
_OP_OPSET = {"Gather": 1, "GatherElements": 11, "GatherND": 11}
_TAIL_OPS = ("Squeeze", "Reshape", "Cast")  # what the rewrite writes after the node (rules.emit_replacement)
_UPSTREAM_LIMIT = 256  # nodes searched above the node for the recorded inputs (the run-time alignment's few dozen)


def _derives_from(scope: GraphScope, name: str, source: str) -> bool:
    """Whether ``name`` is ``source`` or computed from it within this graph."""
    pending, seen = [name], set[str]()
    while pending and len(seen) < _UPSTREAM_LIMIT:
        current = pending.pop()
        if current == source:
            return True
        if current in seen:
            continue
        seen.add(current)
        producer = scope.producers.get(current)
        if producer is not None:
            pending.extend(i for i in producer.input if i)
    return False


def _tail(scope: GraphScope, node: NodeProto, output: str) -> list[NodeProto] | None:
    """The rewrite's nodes from ``node``'s output to ``output``: each the only reader of the one before,
    each a Squeeze, Reshape or Cast of it; None when the graph does not have that shape."""
    chain, current = list[NodeProto](), node.output[0]
    while current != output:
        readers = scope.consumers.get(current, [])
        if len(readers) != 1 or scope.readers.get(current, 0) != 1 or len(chain) == len(_TAIL_OPS):
            return None
        reader = readers[0]
        if reader.op_type not in _TAIL_OPS or reader.domain not in ONNX_DOMAINS or reader.input[0] != current:
            return None
        chain.append(reader)
        current = reader.output[0]
    return chain


def _replaced_form(node: NodeProto, scope: GraphScope, mode: str | None) -> Visit | None:
    """Step 1: the replaced gather, or None where the record is absent or the graph no longer bears it out.
    What is checked is the graph's shape around the node (mode, upstream, tail), not the alignment nodes'
    own attributes: an edit inside the rewrite's alignment is not seen."""
    record = replaced_gather(node)
    if record is None or _REWRITE_MODES.get(record.op_type) != mode or scope.opset < _OP_OPSET[record.op_type]:
        return None
    if record.op_type == "GatherND" and record.attributes.get("batch_dims", 0) and scope.opset < 12:
        return None
    data = scope.info(record.data)
    if record.op_type == "Gather":
        producer = scope.producers.get(record.indices)
        if producer is not None and producer.op_type == "Range":
            return None  # ORT's GatherToSliceFusion gets Gather(x, Range(T-1, -1, -1)) wrong: lowering/forms
        axis = record.attributes.get("axis", 0)
        if data.elem_type in (TensorProto.STRING, 0) and (data.shape is None or any(
                size != 1 for size in data.shape[axis % len(data.shape) + 1:] if data.shape)):
            return None  # ORT's string Gather is wrong for blocks of more than one element
    if not (_derives_from(scope, node.input[0], record.data) and _derives_from(scope, node.input[1], record.indices)):
        return None
    tail = _tail(scope, node, record.output)
    if tail is None:
        return None
    gather = helper.make_node(record.op_type, [record.data, record.indices], [record.output],
                              name=record.name or None, domain=record.domain,
                                  **record.attributes)  # type: ignore[arg-type]  # ints: node attributes, never doc_string
    carry_metadata(node, gather)
    return Visit([gather], removes=tail, freed={*node.input, *(i for n in tail for i in n.input)},
                         detail={"form": record.op_type, "source": "rewrite record"})


# -- the visit --------------------------------------------------------------------------------------------


@dataclass
class LowerPass:
    """The lowering as a visit over ``graphs.passes.run_pass``."""

    report: LowerReport = field(default_factory=LowerReport)
    external_data_folder: str | os.PathLike | None = None  # where the scope's constants read external data
    single_gather_only: bool = False  # leave the nodes that only the general decomposition computes
    drops_domain: ClassVar[bool] = True

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
        replaced = _replaced_form(node, scope, attribute(node, "mode", None))
        if replaced is not None:
            return replaced
        data, indices = scope.info(node.input[0]), scope.info(node.input[1])
        axes = scope.constants.get(node.input[2])
        axes_type = scope.info(node.input[2]).elem_type
        if (axes is not None and (axes.ndim != 1 or axes.dtype != np.int64)) or axes_type not in (0, TensorProto.INT64):
            kind = f"{axes.ndim}-D {axes.dtype}" if axes is not None else TensorProto.DataType.Name(axes_type)
            raise NotChanged(f"axes {node.input[2]!r} are not a 1-D int64 tensor ({kind}; the op takes 1-D int64)")
        builder = LoweringBuilder(scope.opset, scope.names, node.name or scope.names.fresh(f"{OP_TYPE}_{node.output[0]}"))
        freed = {node.input[2]}
        try:
            if axes is None or (data.rank is None and indices.rank is None):
                if self.single_gather_only:
                    raise NotChanged(f"{KEPT_FOR_KERNEL}: axes or ranks known only at run time")
                # axes computed by the model (an axes initializer that is also a graph input, whose value may be
                # fed at run time) or no rank known
                lower_gather_multiaxis_at_run_time(node, data.elem_type, builder)
                return Visit(builder.nodes, freed=freed, detail={"form": GENERAL, "source": "semantics", "reason":
                             "axes or ranks known only at run time"})
            mode, rank, axes = lowerable(node, data, indices, [int(a) for a in axes], scope.opset)
            if rank == 0:
                lower_gather_multiaxis(node, data, indices, axes, builder)
                return Visit(builder.nodes, freed=freed, detail={"form": "Identity", "source": "semantics"})
            producer = scope.producers.get(node.input[1])
            semantics = Semantics(rank, tuple(axes), mode, data, indices,
                                  producer is not None and producer.op_type == "Range")
            plan, reasons = plan_form(semantics, scope.opset)
            if plan is not None and mode in (Mode.CLAMP, Mode.ZERO) and not indices.elem_type:
                plan = None
                reasons.append("the indices' element type is not known (the bounds of 'clamp' and 'zero' need it)")
            general_reason = "no single gather computes it: " + "; ".join(reasons)
            if plan is None and self.single_gather_only:
                raise NotChanged(f"{KEPT_FOR_KERNEL}: {general_reason}")
            # (in mode "zero" the values are zeroed in the input's own type: float32, which ORT's Where takes)
            narrow = _narrow_source(node.input[0], data, scope, builder) if mode != Mode.ZERO else None
            if narrow is not None:
                freed.add(node.input[0])  # the widened input: dropped if nothing else reads it
            if plan is not None:
                x, elem_type = (narrow[0], narrow[1]) if narrow is not None else (node.input[0], data.elem_type)
                emitter = FormEmitter(builder, semantics, x, node.input[1], scope.constants, elem_type)
                values = emit_form(plan, emitter)
                if narrow is not None:
                    values = builder.cast(values, data.elem_type, "widened")
                builder.rename_last_output(node.output[0])
                return Visit(builder.nodes, freed=freed | {node.input[1]},
                             detail={"form": FORM_NAMES[type(plan)], "source": "semantics"})
            lower_gather_multiaxis(node, data, indices, axes, builder, narrow)
        except NotLowered as reason:
            raise NotChanged(str(reason)) from None
        return Visit(builder.nodes, freed=freed, detail={"form": GENERAL, "source": "semantics", "reason": general_reason})


def _narrow_source(x: str, data: TensorInfo, scope: GraphScope, builder: LoweringBuilder) -> tuple[str, int] | None:
    """The rewriter's float16/bfloat16 round trip: ``x = [Unsqueeze](Cast(narrow, to=FLOAT))``. Then the
    lowering gathers from (the Unsqueeze of) ``narrow`` and widens only what it read, instead of the
    whole input on every run (a Cast is elementwise and exact, so the order does not matter)."""
    node = scope.producers.get(x)
    aligned = None
    if node is not None and node.op_type == "Unsqueeze" and node.domain in ONNX_DOMAINS:
        aligned, node = node, scope.producers.get(node.input[0])
    if not round_trip_cast(node) or data.elem_type != TensorProto.FLOAT:
        return None
    source = scope.infos.get(node.input[0])
    if source is None or source.elem_type not in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
        return None
    name = node.input[0]
    if aligned is not None:
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
    an external file are read from ``external_data_folder``, the model's folder (and only there).

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
    return result, lowering.report


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
           "lower_single_gathers"]
