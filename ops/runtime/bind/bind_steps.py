"""The bind step's steps after the visit, each a ``ModelPass`` over the whole model: dropped value_info, dead
feeders, grouped bound gathers, recorded nodes' alignments, unread constants, Scan body outputs, what the session
hands ORT."""


from __future__ import annotations

import itertools
from abc import abstractmethod

import onnx
from onnx import ModelProto, TensorProto, helper

from ...contract import DOMAIN, is_gather_multiaxis
from ..run_ops import GROUP_MAX, GROUP_TYPES, bound_op_type, group_attributes, group_op_type, is_bridge_node
from ....graphs.ir.dead_nodes import remove_dead
from ....graphs.ir.walk import ONNX_DOMAINS, all_names, any_node, attribute, model_nodes, node_holders
from ....graphs.passes import ModelPass, PassResult
from .bind_pass import BindPass, PreparedModel
from .recorded_nodes import remove_recorded_alignments


def holds_gather(model: ModelProto) -> bool:
    return any_node(model, is_gather_multiaxis)


GROUPED_TYPES = {bound_op_type(elem_type): elem_type for elem_type in GROUP_TYPES}


def group_shared_indices(graph: onnx.GraphProto) -> bool:
    """Bound nodes reading the same indices become GatherMultiaxisBoundGroup<Types> nodes of up to GROUP_MAX
    outputs, each where its first node was (every reader of an output comes after that node)."""
    sharing: dict[tuple[str, ...], list[onnx.NodeProto]] = {}
    for node in graph.node:
        if node.domain == DOMAIN and node.op_type in GROUPED_TYPES:
            sharing.setdefault(tuple(node.input), []).append(node)
    removed: set[int] = set()  # ids of the nodes merged into their group's first
    for members in sharing.values():
        for start in range(0, len(members) - 1, GROUP_MAX):
            chunk = members[start:start + GROUP_MAX]
            if len(chunk) < 2:
                continue
            types = [GROUPED_TYPES[node.op_type] for node in chunk]
            order = sorted(range(len(chunk)), key=lambda i: GROUP_TYPES.index(types[i]))  # output slot -> member
            slots = [order.index(i) for i in range(len(chunk))]
            tables = [attribute(node, "table") for node in chunk]
            first = chunk[0]
            group = helper.make_node(group_op_type([types[i] for i in order]), list(first.input),
                                     [chunk[i].output[0] for i in order], name=first.name, domain=DOMAIN,
                                     **group_attributes(tables, slots))
            removed.update(id(node) for node in chunk[1:])
            first.CopyFrom(group)
    if removed:
        kept = [node for node in graph.node if id(node) not in removed]
        del graph.node[:]
        graph.node.extend(kept)
    return bool(removed)


def drop_unread_constants(model: ModelProto, freed: set[str]) -> bool:
    """Drop unread Constant nodes and unread initializers in ``freed`` (axes turned attributes) in every graph,
    which ORT would warn about; holders are read as the walk goes (dropping rebuilds a node list)."""
    dropped = False
    for holder in node_holders(model):
        if isinstance(holder, onnx.GraphProto):
            constants = [node for node in holder.node if node.op_type == "Constant" and node.domain in ONNX_DOMAINS]
            dropped |= bool(remove_dead(holder, constants, freed, initializers="freed"))
    return dropped


def copy_scan_body_outputs(model: ModelProto) -> int:
    """Route each Scan body output a GatherMultiaxis node writes (rank >= 1) through a one-input Concat."""
    # Why: ORT's Scan hands the body its own output buffers, shaped by the first iteration. A builtin node
    # writing one with another shape gets an error status; the PyOp bridge lets ORT's exception leave the
    # kernel, which ends the process (std::terminate, pyop/pyfunc.cc). With the copy the op writes a value ORT
    # allocates, and the Concat meets the Scan's check as a builtin does. Identity would be optimized away; a
    # one-input Concat is kept at every level. Static declarations get the copy too (a declaration the run
    # does not meet ended the process the same way). Scalars cannot be concatenated: left as they are.
    taken, copies = None, 0
    for holder in list(node_holders(model)):
        for node in holder.node:
            if node.op_type != "Scan" or node.domain not in ONNX_DOMAINS:
                continue
            body = attribute(node, "body")
            written = {name for inner in body.node if is_bridge_node(inner) for name in inner.output}
            for output in body.output:
                dims = output.type.tensor_type.shape.dim
                if output.name not in written or not output.type.tensor_type.HasField("shape") or not dims:
                    continue
                taken = all_names(model) if taken is None else taken
                copy = next(name for name in (f"{output.name}/scan_copy{n or ''}" for n in itertools.count())
                            if name not in taken)
                taken.add(copy)
                body.node.append(helper.make_node("Concat", [output.name], [copy], name=copy, axis=0))
                output.name = copy
                copies += 1
    return copies


def bridge_crossings(model: ModelProto) -> int:
    """The GatherMultiaxis nodes of ``model`` (every op type of the domain): each crosses the PyOp bridge
    once per call (counted in the graph: a node in a Loop body counts once, both branches of an If count)."""
    return sum(map(is_bridge_node, model_nodes(model)))


# ---------------------------------------------------------------- the steps


class BindStep(ModelPass):
    """A step after ``binding``'s visit, on the model it changed (in place); a model whose nodes took no run
    token (GatherMultiaxis only in functions nothing calls) is left as it is. ``apply``: whether it changed."""

    in_place = True

    def __init__(self, binding: BindPass):
        self.binding = binding

    def call(self, model: ModelProto) -> PassResult:
        """Apply the step where the visit gave the run token."""
        prepared = self.binding.prepared
        if prepared is None or not prepared.tokened:
            return PassResult(model, False)
        return PassResult(model, self.apply(model, prepared))

    @abstractmethod
    def apply(self, model: ModelProto, prepared: PreparedModel) -> bool:
        """Change ``model`` (and fill in ``prepared``)."""


class DropValueInfo(BindStep):
    """Drops the main graph's value_info of the outputs the visits narrowed to float16."""

    def apply(self, model: ModelProto, prepared: PreparedModel) -> bool:
        dropped = self.binding.dropped_value_info
        if not dropped:
            return False
        kept_info = [value for value in model.graph.value_info if value.name not in dropped]
        del model.graph.value_info[:]
        model.graph.value_info.extend(kept_info)
        return True


class RemoveDeadFeeders(BindStep):
    """Drops the nodes that fed a bound operand, and the main graph's Constants and initializers nothing reads."""

    # Not the driver's freed names: this also drops every unread Constant and initializer of the main graph,
    # and only the nodes passed through, not whatever else fed them.
    def apply(self, model: ModelProto, prepared: PreparedModel) -> bool:
        constants = [node for node in model.graph.node if node.op_type == "Constant" and node.domain == ""]
        return bool(remove_dead(model.graph, self.binding.chain + constants))


class GroupSharedIndices(BindStep):
    """``group_shared_indices`` on the main graph."""

    def apply(self, model: ModelProto, prepared: PreparedModel) -> bool:
        return group_shared_indices(model.graph)


class RemoveRecordedAlignments(BindStep):
    """``remove_recorded_alignments`` (after the steps that remove nodes by identity: it rebuilds node lists)."""

    def apply(self, model: ModelProto, prepared: PreparedModel) -> bool:
        return remove_recorded_alignments(model, self.binding.recorded_freed)


class DropUnreadConstants(BindStep):
    """``drop_unread_constants`` with the axes operands the visits turned into attributes."""

    def apply(self, model: ModelProto, prepared: PreparedModel) -> bool:
        return drop_unread_constants(model, self.binding.freed_axes)


class CopyScanBodyOutputs(BindStep):
    """``copy_scan_body_outputs``."""

    def apply(self, model: ModelProto, prepared: PreparedModel) -> bool:
        return copy_scan_body_outputs(model) > 0


class ShareBoundInitializers(BindStep):
    """Fills ``prepared.shared``: the bound initializers the model still holds (ORT reads them elsewhere)."""

    def apply(self, model: ModelProto, prepared: PreparedModel) -> bool:
        kept = {tensor.name for tensor in model.graph.initializer}
        prepared.shared = {name: value for name, value in self.binding.bound_initializers.items()
                           if name in kept and value[0].dtype != object}
        return False


class CountCrossings(BindStep):
    """Fills ``prepared.crossings`` and, where a node crosses the bridge, ``prepared.string_inputs``."""

    def apply(self, model: ModelProto, prepared: PreparedModel) -> bool:
        prepared.crossings = bridge_crossings(model)
        if self.binding.crosses_bridge:  # a string fed in may reach a GatherMultiaxisRun node, whose bridge cuts
            # it at a NUL
            prepared.string_inputs = [value.name for value in model.graph.input
                                      if value.type.tensor_type.elem_type == TensorProto.STRING]
        return False
