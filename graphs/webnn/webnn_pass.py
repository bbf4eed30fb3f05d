"""The WebNN lowering as a sequence of passes: static shapes, each main-graph GatherMultiaxis node in the first
WebNN form that computes it (``lower.form_plans.WEBNN_TARGET``), the standard lowering of what is left."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from onnx import ModelProto, NodeProto, helper

from ...ops.contract import is_gather_multiaxis
from ..lower.ort_guards import check_emitted
from ..ir.dead_nodes import remove_dead
from ..ir.walk import ONNX_DOMAINS, any_node
from ..lower import LoweredNode, LowerReport, lower_model, unname_replaced_dims
from ..lower.form_plans import FORM_NAMES, WEBNN_TARGET, form_choices
from ..lower.form_semantics import Semantics
from ..ranks.tensor_info import TensorInfo
from ..passes import GraphScope, ModelPass, NodePass, NotChanged, PassResult, Repeat, Sequential, Visit
from .flat_offsets import flat_offsets
from .reshape_chains import Unfit, narrowed
from .static_shapes import FOLD_ROUNDS, FixInputShapes, FoldShapeArithmetic, static_infos
from .webnn_facts import EmptyOutput, NodeFacts, NotLoweredForWebNN, WebNNLowering, node_facts
from .webnn_forms import FORM_EMPTY, FORM_FLAT, emit_plan, empty_constant
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
    for choice in form_choices(facts_semantics(narrowed_facts), lowering.opset, WEBNN_TARGET):
        if isinstance(choice, str):
            reasons.append(choice)
            continue
        try:
            return emit_plan(lowering, narrowed_facts, choice), FORM_NAMES[type(choice)], ""
        except Unfit as why:
            reasons.append(WEBNN_TARGET.reason.format(form=FORM_NAMES[type(choice)], why=why))
    return flat_offsets(lowering, facts), FORM_FLAT, "; ".join(reasons)


def facts_semantics(facts: NodeFacts) -> Semantics:
    """What the form planner reads of a node with static shapes."""
    index_type = helper.np_dtype_to_tensor_dtype(facts.index_dtype)
    return Semantics(facts.rank, tuple(facts.axes), facts.mode, TensorInfo(facts.elem_type, facts.data_shape),
                     TensorInfo(index_type, facts.indices_shape))


class WebNNDetail(NamedTuple):
    """What a visit made of a node: its form, and (for the flat and empty forms) the reason."""

    form: str
    reason: str


@dataclass
class WebNNPass(NodePass[WebNNDetail]):
    """Each main-graph GatherMultiaxis lowered by ``WebNNLowering``, on a copy whose input shapes are fixed and
    whose static shape arithmetic is folded first (``prepare``); the reshapes and Casts a form absorbs go."""

    input_shapes: dict[str, tuple[int, ...]] | None = None
    external_data_folder: str | os.PathLike | None = None  # the model's folder: where its external data is
    report: LowerReport = field(default_factory=LowerReport)
    lowering: WebNNLowering | None = None
    drops_domain: ClassVar[bool] = True  # (the custom domain's import goes with its last node)

    def targets(self, node: NodeProto) -> bool:
        """GatherMultiaxis nodes."""
        return is_gather_multiaxis(node)

    def prepare(self, model: ModelProto) -> None:
        """Static shapes (``static_shapes``), then the lowering's state."""
        Sequential(FixInputShapes(self.input_shapes),
                   Repeat(FoldShapeArithmetic(self.external_data_folder), FOLD_ROUNDS))(model)
        self.lowering = WebNNLowering(model, self.report, self.external_data_folder)

    def outcome(self, node: NodeProto, path: str, detail: WebNNDetail | None, reason: str) -> LoweredNode:
        """The report's row."""
        if detail is None:
            return LoweredNode(node.name, path, False, reason)
        if detail.form == FORM_EMPTY and detail.reason:  # replaced, but outside WebNN's ranks
            return LoweredNode(node.name, path, False, detail.reason, FORM_EMPTY, "semantics")
        return LoweredNode(node.name, path, True, detail.reason, detail.form, "semantics")

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit[WebNNDetail]:
        """The lowering of a main-graph node, with the reshapes and Casts it absorbs removed."""
        if not scope.main:
            raise NotChanged("inside an If/Loop/Scan body (WebNN graphs have no control flow); lowered to standard "
                             "ONNX ops instead")
        assert self.lowering is not None  # made by prepare(), which the driver calls first
        absorbed = set(self.lowering.absorbed)
        try:
            nodes, form, reason = lower_node(self.lowering, node, scope)
        except NotLoweredForWebNN as why:
            raise NotChanged(f"{why}; lowered to standard ONNX ops instead") from None
        # an absorbed reshape or Cast: the lowered node writes its output now
        removes = [scope.producers[name] for name in self.lowering.absorbed - absorbed]
        return Visit(nodes, removes=removes, freed=set(self.lowering.freed), detail=WebNNDetail(form, reason))


@dataclass
class UnnameReplacedDims(ModelPass):
    """``lower.unname_replaced_dims`` against the model before the lowering."""

    before: ModelProto
    in_place: ClassVar[bool] = True

    def call(self, model: ModelProto) -> PassResult:
        """Drop the dim names the rewrite declared on replaced outputs."""
        unname_replaced_dims(self.before, model)
        return PassResult(model, True)


@dataclass
class LowerWhatIsLeft(ModelPass):
    """The standard lowering of the GatherMultiaxis nodes WebNN cannot take, where one is left."""

    report: LowerReport
    external_data_folder: str | os.PathLike | None = None

    def call(self, model: ModelProto) -> PassResult:
        """Lower what is left; the report gets a row for each node even the standard lowering left."""
        # What WebNN cannot take still runs anywhere (outside WebNN's subset, as the report says, and
        # webnn_check lists it). Without a node left, its inference of the model would cost time for nothing.
        if not any_node(model, is_gather_multiaxis):
            return PassResult(model, False)
        model, standard = lower_model(model, self.external_data_folder)
        self.report.outcomes.extend(LoweredNode(o.node, o.graph, False, f"not lowered at all: {o.reason}")
                                    for o in standard.outcomes if not o.lowered)
        return PassResult(model, True)


class EmptyExpandsAsConstants(ModelPass):
    """``empty_expands_as_constants`` as a pass."""

    in_place: ClassVar[bool] = True

    def call(self, model: ModelProto) -> PassResult:
        """Replace the empty Expands."""
        empty_expands_as_constants(model)
        return PassResult(model, True)


def webnn_lowering(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None,
                   external_data_folder: str | os.PathLike | None = None,
                   report: LowerReport | None = None) -> Sequential:
    """The WebNN lowering of ``model`` as its steps, each filling ``report``."""
    report = LowerReport() if report is None else report
    return Sequential(WebNNPass(input_shapes, external_data_folder, report), UnnameReplacedDims(model),
                      LowerWhatIsLeft(report, external_data_folder), EmptyExpandsAsConstants())


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
    report = LowerReport()
    return webnn_lowering(model, input_shapes, external_data_folder, report)(model).model, report


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
