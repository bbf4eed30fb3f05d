"""The WebNN lowering as a pass: each main-graph GatherMultiaxis node takes the first WebNN form that computes
it; what is left gets the standard lowering."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

from onnx import ModelProto, NodeProto, helper

from ...ops.contract import is_gather_multiaxis
from ..lower.ort_guards import check_emitted
from ..ir.dead_nodes import remove_dead
from ..ir.walk import ONNX_DOMAINS, node_holders
from ..lower import LoweredNode, LowerReport, lower_model, unname_replaced_dims
from ..passes import GraphScope, NotChanged, Visit, run_pass
from .flat_offsets import flat_offsets
from .reshape_chains import narrowed
from .static_shapes import FOLD_ROUNDS, fix_input_shapes, fold_shape_arithmetic, static_infos
from .webnn_facts import EmptyOutput, NotLoweredForWebNN, WebNNLowering, node_facts
from .webnn_forms import FORM_EMPTY, FORM_FLAT, empty_constant, gather_elements_form, gather_form, gather_nd_form
from .webnn_ops import MAX_RANK

def lower_node(lowering: WebNNLowering, node: NodeProto, scope: GraphScope) -> tuple[list[NodeProto], str, str]:
    """The replacement of one main-graph GatherMultiaxis node, its form and (for the flat form) why no
    single gather computes it; raises NotLoweredForWebNN, also where the nodes fail ``lower.ort_guards.check_emitted``."""
    lowering.pending = {}
    absorbed, freed = set(lowering.absorbed), set(lowering.freed)
    nodes, form, reason = lowered_form(lowering, node)
    unfit = check_emitted(nodes, scope)
    if unfit is not None:
        lowering.absorbed, lowering.freed = absorbed, freed
        raise NotLoweredForWebNN(unfit)
    lowering.prepared.update(lowering.pending)  # (copies made for a node that was not lowered are gone)
    lowering.freed.update(node.input)  # the axes, and reshapes of data and indices a form read around
    return nodes, form, reason


def lowered_form(lowering: WebNNLowering, node: NodeProto) -> tuple[list[NodeProto], str, str]:
    """The nodes, the form, and (for the flat form) why no single gather computes the node."""
    try:
        facts = node_facts(lowering, node)
    except EmptyOutput as empty:
        rank = len(empty.dims)
        outside = (f"rank {rank} > {MAX_RANK}, the ranks every WebNN backend supports; the empty output is a "
                   f"constant" if rank > MAX_RANK else "")
        return [empty_constant(lowering, node, empty)], FORM_EMPTY, outside
    if not facts.axes:  # the rewrite never makes one
        return flat_offsets(lowering, facts), FORM_FLAT, "no axes: a broadcast of the data, not a gather"
    reasons = []
    narrowed_facts = narrowed(lowering, facts)
    for form in (gather_form, gather_elements_form, gather_nd_form):
        outcome = form(lowering, narrowed_facts)
        if isinstance(outcome, str):
            reasons.append(outcome)
        else:
            return outcome[0], outcome[1], ""
    return flat_offsets(lowering, facts), FORM_FLAT, "; ".join(reasons)


@dataclass
class WebNNPass:
    """The WebNN lowering as a visit over ``graphs.passes.run_pass``: the copy gets its input shapes fixed
    and its static shape arithmetic folded before the walk (``prepare``); each main-graph GatherMultiaxis
    is lowered by ``WebNNLowering``, and the reshapes and Casts around it that the form absorbs go."""

    input_shapes: dict[str, tuple[int, ...]] | None = None
    external_data_folder: str | os.PathLike | None = None  # the model's folder: where its external data is
    report: LowerReport = field(default_factory=LowerReport)
    lowering: WebNNLowering | None = None
    drops_domain: ClassVar[bool] = True  # (the custom domain's import goes with its last node)

    def targets(self, node: NodeProto) -> bool:
        """Whether the pass visits ``node``."""
        return is_gather_multiaxis(node)

    def prepare(self, model: ModelProto) -> None:
        """Fixes the input shapes, folds the static shape arithmetic (up to FOLD_ROUNDS times), and makes
        the lowering."""
        fix_input_shapes(model, self.input_shapes)
        for _ in range(FOLD_ROUNDS):  # a folded shape can make the next value's shape static: fold again
            if not fold_shape_arithmetic(model, self.external_data_folder):
                break
        self.lowering = WebNNLowering(model, self.report, self.external_data_folder)

    def outcome(self, node: NodeProto, path: str, visit: Visit | None, reason: str) -> LoweredNode:
        """The report's row for a visited node."""
        if visit is None:
            return LoweredNode(node.name, path, False, reason)
        if visit.detail["form"] == FORM_EMPTY and visit.detail["reason"]:  # replaced, but outside WebNN's ranks
            return LoweredNode(node.name, path, False, visit.detail["reason"], FORM_EMPTY, "semantics")
        return LoweredNode(node.name, path, True, visit.detail["reason"], visit.detail["form"], "semantics")

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit:
        """The WebNN lowering of a main-graph GatherMultiaxis ``node``, with the reshapes and Casts it
        absorbs removed."""
        if not scope.main:
            raise NotChanged("inside an If/Loop/Scan body (WebNN graphs have no control flow); lowered to standard "
                             "ONNX ops instead")
        assert self.lowering is not None  # made by prepare(), which run_pass calls first
        absorbed = set(self.lowering.absorbed)
        try:
            nodes, form, reason = lower_node(self.lowering, node, scope)
        except NotLoweredForWebNN as why:
            raise NotChanged(f"{why}; lowered to standard ONNX ops instead") from None
        # an absorbed reshape or Cast: the lowered node writes its output now
        removes = [scope.producers[name] for name in self.lowering.absorbed - absorbed]
        return Visit(nodes, removes=removes, freed=set(self.lowering.freed), detail={"form": form, "reason": reason})


def lower_for_webnn(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None,
                    external_data_folder: str | os.PathLike | None = None) -> tuple[ModelProto, LowerReport]:
    """A copy of ``model`` (rewritten: holding GatherMultiaxis nodes) with its input shapes fixed and
    every GatherMultiaxis node of the main graph lowered for WebNN (see ``gathermultiaxis.graphs.webnn``), and the
    report. Raises NotStatic when an input shape is not fixed. A constant kept in an external file is
    read, where its values are needed, from ``external_data_folder`` (the model's folder) only.

    Args:
        model: the rewritten model; it is not changed.
        input_shapes: input name to its static dims, for inputs with symbolic dims.
        external_data_folder: the model's folder; None when no external constant is needed.

    Returns:
        The lowered copy (nodes without a WebNN form get the standard lowering) and the LowerReport.

    Raises:
        NotStatic: an input shape is not fixed.
    """
    webnn = WebNNPass(input_shapes, external_data_folder)
    result = run_pass(model, webnn)
    unname_replaced_dims(model, result)
    report = webnn.report
    # What WebNN cannot take still runs anywhere: the standard lowering (it stays outside WebNN's subset,
    # as the report says, and webnn_check lists it). Only where a node is left: its inference of the
    # lowered model would cost memory and time for nothing.
    if any(is_gather_multiaxis(node) for holder in node_holders(result) for node in holder.node):
        result, standard = lower_model(result, external_data_folder)
        report.outcomes.extend(LoweredNode(o.node, o.graph, False, f"not lowered at all: {o.reason}")
                               for o in standard.outcomes if not o.lowered)
    empty_expands_as_constants(result)
    return result, report


def empty_expands_as_constants(model: ModelProto) -> None:
    """Each main-graph Expand whose static output has a size-0 dim becomes that empty tensor, a Constant.
    The rewrite's alignment and the standard lowering expand size 1 to 0 where a shape holds a 0; once
    shapes are folded to constants, ORT's optimizer removes such an Expand (ExpandElimination takes a target
    0 for 1: wrong shapes, or a later gather reading a non-empty tensor), onnxruntime-web refuses the
    session, and OpenVINO ignores the 0 or dies (SIGFPE). WebNN has no empty tensors anyway."""
    expands = [node for node in model.graph.node if node.op_type == "Expand" and node.domain in ONNX_DOMAINS]
    if not expands:
        return
    infos = static_infos(model)
    producers = {name: node for node in model.graph.node for name in node.output}
    emptied: list[NodeProto] = []
    for node in expands:
        info = infos.get(node.output[0])
        if info is None or not info.elem_type or info.shape is None:
            continue
        dims = list(info.shape)
        if 0 in dims and all(isinstance(d, int) for d in dims):
            emptied.extend(producers[name] for name in node.input if name in producers)
            constant = helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                        value=helper.make_tensor("", info.elem_type, dims, []))
            node.CopyFrom(constant)
    if emptied:  # what only the Expands read (the alignment's reshapes)
        remove_dead(model.graph, emptied, cascade=True, initializers="freed")
