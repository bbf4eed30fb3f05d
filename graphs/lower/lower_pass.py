"""The lowering pass: each GatherMultiaxis node through the three steps of the package docstring."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import numpy as np
from onnx import GraphProto, ModelProto, NodeProto, TensorProto

from ...ops.contract import OP_TYPE, Mode, is_gather_multiaxis
from ..ranks.tensor_info import TensorInfo
from ..ir.walk import (MOVING_OPS, ONNX_DOMAINS, any_node, model_nodes, moves_elements, node_holders, nodes_within,
                       round_trip_cast, subgraphs)
from ..passes import GraphScope, InferredGraph, NodePass, NotChanged, Visit
from ..provenance import MODEL_KEY, replaced_gather, unmark_rewritten
from ..rewrite.rank_layers import RankLayers
from .form_emitter import FormEmitter, emit_form
from .form_plans import FORM_NAMES, ElementsPlan, GatherPlan, NDPlan, plan_forms
from .form_semantics import Semantics
from .general_form import NotLowered, lower_gather_multiaxis, lowerable, zeroes_out_of_range
from .general_run_time import lower_gather_multiaxis_at_run_time
from .lower_report import GENERAL, KEPT_FOR_KERNEL, LoweredNode, LowerReport
from .lowering_builder import LoweringBuilder
from .ort_guards import check_emitted
from .recorded_form import recorded_form

# The modes whose bounds need the indices' element type (they clamp or zero instead of raising).
_BOUNDED_MODES = " and ".join(sorted(repr(mode.value) for mode in Mode if not mode.checks_indices))


class LowerDetail(NamedTuple):
    """What the visit says of a lowered node: its form, what chose it, and why it is the general one."""

    form: str
    source: str
    reason: str = ""


# -- step 1: the gather the rewrite replaced ------------------------------------------------------------


def replaced_form(node: NodeProto, scope: GraphScope) -> Visit[LowerDetail] | None:
    """Step 1: the recorded gather, where ``recorded_form`` finds the graph proves it."""
    form = recorded_form(node, scope)
    if form is None:
        return None
    return Visit([form.gather], removes=form.tail, freed={*node.input, *(i for n in form.tail for i in n.input)},
                 detail=LowerDetail(form.gather.op_type, "rewrite record"))


def _narrow_tail(scope: GraphScope, name: str, elem_type: int) -> list[NodeProto] | None:
    """The nodes from ``name`` to the Cast back to ``elem_type`` (the rewriter's float16/bfloat16 round trip):
    moving ops (``graphs.ir.walk.MOVING_OPS``), then the Cast, each the only reader of the value before it; None
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


def _axes(node: NodeProto, scope: GraphScope) -> np.ndarray | None:
    """The node's constant axes (None: computed at run time); NotChanged unless they are 1-D int64."""
    axes = scope.constants.get(node.input[2])
    axes_type = scope.info(node.input[2]).elem_type
    if (axes is not None and (axes.ndim != 1 or axes.dtype != np.int64)) or axes_type not in (0, TensorProto.INT64):
        kind = f"{axes.ndim}-D {axes.dtype}" if axes is not None else TensorProto.DataType.Name(axes_type)
        raise NotChanged(f"axes {node.input[2]!r} are not a 1-D int64 tensor ({kind}; the op takes 1-D int64)")
    return axes


# -- the visit --------------------------------------------------------------------------------------------


@dataclass
class LowerPass(NodePass[LowerDetail]):
    """Each GatherMultiaxis node in its cheapest exact standard form, or left with the reason."""

    report: LowerReport = field(default_factory=LowerReport)
    external_data_folder: str | os.PathLike | None = None  # where the scope's constants read external data
    single_gather_only: bool = False  # leave the nodes that only the general decomposition computes
    drops_domain: ClassVar[bool] = True
    # Under onnx < 1.19 shape inference stops at a GatherMultiaxis (its schema has no inference there), so
    # ranks behind one are known only once it is lowered: the driver repeats while it lowers and leaves.
    repeat: ClassVar[bool] = True
    layers: RankLayers = field(init=False)
    # this walk's: the outputs of the nodes lowered, the inputs of the nodes left that another walk may lower
    lowered_outputs: set[str] = field(init=False, default_factory=set)
    left_inputs: set[str] = field(init=False, default_factory=set)

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
        """GatherMultiaxis nodes."""
        return is_gather_multiaxis(node)

    def outcome(self, node: NodeProto, path: str, detail: LowerDetail | None, reason: str) -> LoweredNode:
        """The LoweredNode, with the form and source when lowered."""
        if detail is None:
            return LoweredNode(node.name, path, False, reason)
        return LoweredNode(node.name, path, True, detail.reason, detail.form, detail.source)

    def walks_again(self, model: ModelProto, outcomes: list) -> bool:
        """Only where a node left has a record or constant axes, and an input computed from the output of a node
        lowered in this walk: nothing else knows more in another walk."""
        again = bool(self.left_inputs) and not self.left_inputs.isdisjoint(
            downstream(model.graph, set(self.lowered_outputs)))
        self.lowered_outputs, self.left_inputs = set(), set()
        return again

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit[LowerDetail]:
        """The standard ONNX replacement of ``node`` (NotChanged: wrong arity, axes not 1-D int64, not lowerable)."""
        try:
            visit = self._visit(node, scope)
        except NotChanged:
            if replaced_gather(node) is not None or (len(node.input) > 2 and node.input[2] in scope.constants):
                self.left_inputs.update(node.input[:2])
            raise
        self.lowered_outputs.update(node.output)
        self.lowered_outputs.update(name for made in visit.nodes or () for name in made.output)
        return visit

    def _visit(self, node: NodeProto, scope: GraphScope) -> Visit[LowerDetail]:
        if len(node.input) != 3 or len(node.output) != 1:
            raise NotChanged("a GatherMultiaxis node takes 3 inputs and gives 1 output")
        replaced = replaced_form(node, scope)
        if replaced is not None:
            return replaced
        data, indices = scope.info(node.input[0]), scope.info(node.input[1])
        axes = _axes(node, scope)
        builder = self._builder(node, scope)
        freed = {node.input[2]}
        try:
            ranks = (data.rank, indices.rank)
            if axes is None or ranks == (None, None) or (0 in ranks and None in ranks):  # (rank 0: no general form
                # to check the other rank in)
                return self._at_run_time(node, scope, data, builder, freed)
            mode, rank, axes_list = lowerable(node, data, indices, [int(a) for a in axes], scope.opset)
            if rank == 0:
                lower_gather_multiaxis(node, data, indices, axes_list, builder)
                return Visit(builder.nodes, freed=freed, detail=LowerDetail("Identity", "semantics"))
            return self._by_semantics(node, scope, Semantics(rank, tuple(axes_list), mode, data, indices), builder,
                                      freed)
        except NotLowered as reason:
            raise NotChanged(str(reason)) from None

    def _at_run_time(self, node: NodeProto, scope: GraphScope, data: TensorInfo, builder: LoweringBuilder,
                     freed: set[str]) -> Visit[LowerDetail]:
        """The general form of axes computed by the model (or an axes initializer that is also a graph input,
        whose value may be fed at run time), or of no rank known."""
        if self.single_gather_only:
            raise NotChanged(f"{KEPT_FOR_KERNEL}: axes or ranks known only at run time")
        narrow = self._narrow(node, data, False, scope, builder, freed)
        lower_gather_multiaxis_at_run_time(node, data.elem_type, builder, narrow)
        return self._general(node, scope, builder, narrow, freed, "axes or ranks known only at run time")

    def _by_semantics(self, node: NodeProto, scope: GraphScope, semantics: Semantics, builder: LoweringBuilder,
                      freed: set[str]) -> Visit[LowerDetail]:
        """Step 2's forms in their order, the first whose nodes pass ``check_emitted``; else step 3."""
        mode, data, indices = semantics.mode, semantics.data, semantics.indices
        plans, reasons = plan_forms(semantics, scope.opset)
        if plans and not mode.checks_indices and not indices.elem_type:
            plans = []
            reasons.append(f"the indices' element type is not known (the bounds of {_BOUNDED_MODES} need it)")
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
        narrow = self._narrow(node, data, zeroes_out_of_range(mode), scope, builder, freed)
        lower_gather_multiaxis(node, data, indices, list(semantics.axes), builder, narrow)
        return self._general(node, scope, builder, narrow, freed, general_reason)

    def _general(self, node: NodeProto, scope: GraphScope, builder: LoweringBuilder, narrow: tuple[str, int] | None,
                 freed: set[str], reason: str) -> Visit[LowerDetail]:
        """Step 3's Visit, its nodes checked as every form's are (``ort_guards.check_emitted``)."""
        removes = self._narrow_output(node, scope, builder, narrow)
        unfit = check_emitted(builder.nodes, scope)
        if unfit is not None:
            raise NotLowered(f"the general form: {unfit}")
        return Visit(builder.nodes, removes=removes, freed=freed, detail=LowerDetail(GENERAL, "semantics", reason))

    @staticmethod
    def _builder(node: NodeProto, scope: GraphScope) -> LoweringBuilder:
        return LoweringBuilder(scope.opset, scope.names, node.name or scope.names.fresh(f"{OP_TYPE}_{node.output[0]}"))

    @staticmethod
    def _narrow(node: NodeProto, data: TensorInfo, zeroes: bool, scope: GraphScope, builder: LoweringBuilder,
                freed: set[str]) -> tuple[str, int] | None:
        """The float16/bfloat16 value the node's input widens (``_narrow_source``), which the form gathers
        instead. A mode that ``zeroes`` does it in the gathered type: float16 (ORT's Where has no bfloat16 kernel)."""
        types = (TensorProto.FLOAT16,) if zeroes else (TensorProto.FLOAT16, TensorProto.BFLOAT16)
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
                       plan: GatherPlan | ElementsPlan | NDPlan, builder: LoweringBuilder, freed: set[str]
                       ) -> Visit[LowerDetail]:
        """Step 2: the nodes of ``plan``, on the narrow input where there is one."""
        narrow = self._narrow(node, semantics.data, zeroes_out_of_range(semantics.mode), scope, builder,
                              freed)
        x, elem_type = narrow if narrow is not None else (node.input[0], semantics.data.elem_type)
        emitter = FormEmitter(builder, semantics, x, node.input[1], scope.constants, elem_type)
        values = emit_form(plan, emitter)
        if narrow is not None:
            values = builder.cast(values, semantics.data.elem_type, "widened")
        builder.rename_last_output(node.output[0])
        removes = self._narrow_output(node, scope, builder, narrow)
        return Visit(builder.nodes, removes=removes, freed=freed | {node.input[1]},
                     detail=LowerDetail(FORM_NAMES[type(plan)], "semantics"))


def _narrow_source(x: str, data: TensorInfo, scope: GraphScope, builder: LoweringBuilder,
                   types: tuple[int, ...] = (TensorProto.FLOAT16, TensorProto.BFLOAT16)) -> tuple[str, int] | None:
    """The rewriter's float16/bfloat16 round trip: ``x`` is moving ops (``graphs.ir.walk.MOVING_OPS``: the
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


def downstream(graph: GraphProto, sources: set[str]) -> set[str]:
    """``sources`` and every name computed from them in ``graph`` (graph order is topological); everything
    within a node holding subgraphs that reads one, or whose subgraphs compute one."""
    reached = sources
    for node in graph.node:
        inner = [sub for attribute in node.attribute for sub in subgraphs(attribute)]
        for sub in inner:
            reached = downstream(sub, reached)
        inner_names = {name for sub in inner for n in nodes_within(sub.node) for name in (*n.input, *n.output)}
        if not reached.isdisjoint(node.input) or not reached.isdisjoint(inner_names):
            reached.update(node.output)
            reached |= inner_names
    return reached


def lower_model(model: ModelProto, external_data_folder: str | os.PathLike | None = None, *,
                single_gather_only: bool = False) -> tuple[ModelProto, LowerReport]:
    """Return a copy of ``model`` with every GatherMultiaxis node replaced by an equivalent standard ONNX
    subgraph or left as it is (with the reason), and the report. A copy left with no GatherMultiaxis node
    loses the rewrite's model-level entry (``graphs.provenance.MODEL_KEY``) unless ``single_gather_only``.

    Args:
        model: the model; it is not changed.
        external_data_folder: the model's folder, where external constant indices are read; None when
            none is needed.
        single_gather_only: lower only the nodes one standard gather computes (``session_lowering.lower_single_gathers``).

    Returns:
        The lowered copy and the LowerReport.
    """
    lowering = LowerPass(external_data_folder=external_data_folder, single_gather_only=single_gather_only)
    result = lowering(model).model
    unname_replaced_dims(model, result)
    if not single_gather_only and any(entry.key == MODEL_KEY for entry in result.metadata_props) and not any_node(
            result, is_gather_multiaxis):
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
    """In ``after`` (changed in place), the value_info of each GatherMultiaxis output of ``before`` that no
    GatherMultiaxis computes any more, and of what the rewrite's restoring ops write from it, loses its dim
    names: the rewrite declared them, and tract refuses a declared name that meets a size."""
    def outputs(model: ModelProto) -> set[str]:
        return {node.output[0] for node in model_nodes(model) if is_gather_multiaxis(node)}

    replaced = outputs(before) - outputs(after)
    # and what the rewrite's restoring ops (Squeeze, Reshape, a Cast back) write from them: the replaced
    # gather's own output, which the rewrite typed too
    readers: dict[str, list[NodeProto]] = {}
    for node in model_nodes(before):
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


__all__ = ["LowerDetail", "LowerPass", "downstream", "lower_model", "replaced_form", "unname_replaced_dims"]
