"""Run-time-aligned GatherMultiaxis nodes as their recorded gather: a node whose rewrite record the graph proves
(``graphs.lower.recorded_form``) becomes one GatherMultiaxisRecorded node reading the record's data and indices
(the op aligns them per call, ``recorded_op``), and its restore tail goes with it; the run-time alignment that
fed it (about 25 shape nodes a gather) is dropped by ``remove_recorded_alignments`` after the bind step's
identity-based removals. Constant data stays with the bound path; float16 and bfloat16 data never cross."""

from __future__ import annotations

from typing import NamedTuple, cast

from onnx import GraphProto, ModelProto, NodeProto, TensorProto, helper

from ...alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ...contract import DATA_TYPES, DOMAIN
from ..run_ops import RECORDED_OP_TYPE, recorded_attribute
from ....graphs.ir.dead_nodes import remove_dead
from ....graphs.ir.walk import node_holders
from ....graphs.passes import GraphScope
from ....graphs.ranks.tensor_info import TensorInfo

RECORDED_GATHERS = frozenset((GATHER, GATHER_ELEMENTS, GATHER_ND))
# The record's proof depends on the data's type only through the float16 round trip (a Cast on each side):
# where the bind step (no inference) does not know it, a type without that round trip stands in, and a graph
# that has the round trip fails the proof.
STAND_IN_TYPE = TensorProto.FLOAT
_BRIDGED = frozenset(DATA_TYPES)


class _DataTyped:
    """A scope that also knows the record's data type (the stand-in where it declares none)."""

    def __init__(self, scope: GraphScope, name: str, info: TensorInfo):
        self._scope, self._name, self._info = scope, name, info

    def info(self, name: str) -> TensorInfo:
        return self._info if name == self._name else self._scope.info(name)

    def __getattr__(self, attribute: str):
        return getattr(self._scope, attribute)


class RecordedNode(NamedTuple):
    """What became of a node: the tail nodes it replaced too, and the names its old inputs read (maybe dead)."""

    tail: list[NodeProto]
    freed: set[str]


def is_constant(scope: GraphScope, name: str) -> bool:
    """Whether ``name`` is an initializer or a Constant node's output of the scope (the bound path's operands)."""
    producer = scope.producers.get(name)
    return scope.constants.initializer(name) is not None or (producer is not None and producer.op_type == "Constant")


# The nodes of a run-time alignment that feed GatherMultiaxis, and their operand that places the dims, computed
# there (a static alignment's are constants; its GatherElements Slice computes only its ends).
_PLACING_OPERAND = {"Unsqueeze": 1, "Reshape": 1, "Pad": 1, "Slice": 3}


def aligned_at_run_time(node: NodeProto, scope: GraphScope) -> bool:
    """Whether ``node``'s data or indices come from an alignment computed at run time (its axes may still be
    constant: GatherElements' cut of the data to the indices' extents)."""
    for name in node.input[:2]:
        producer = scope.producers.get(name)
        if producer is None:
            continue
        at = _PLACING_OPERAND.get(producer.op_type, 0)
        if at and len(producer.input) > at and producer.input[at] and producer.input[at] not in scope.constants:
            return True
    return False


def recorded_node(node: NodeProto, scope: GraphScope, token: str, mode: str | None) -> RecordedNode | None:
    """``node`` changed in place into GatherMultiaxisRecorded where its record holds, else None (unchanged).
    The scope's producers, consumers and readers must have been read before any node of it changed."""
    from ....graphs.provenance import replaced_gather  # here: as the lowering below, only for such nodes

    record = replaced_gather(node)
    if record is None or mode is None or record.op_type not in RECORDED_GATHERS or is_constant(scope, record.data):
        return None
    declared = scope.info(record.data)
    if declared.elem_type and declared.elem_type not in _BRIDGED:  # float16, bfloat16: never through the bridge
        return None
    typed = _DataTyped(scope, record.data, TensorInfo(declared.elem_type or STAND_IN_TYPE, declared.shape))
    from ....graphs.lower.recorded_form import recorded_form  # here: a session without such nodes loads no lowering

    try:
        form = recorded_form(node, cast(GraphScope, typed))
    except Exception:  # noqa: BLE001 - a speed-up whose proof fails keeps the Run path, never stops the session
        return None
    if form is None:
        return None
    freed = {name for name in node.input if name} | {name for other in form.tail for name in other.input if name}
    node.CopyFrom(helper.make_node(RECORDED_OP_TYPE, [record.data, record.indices, token], [record.output],
                                   name=node.name, domain=DOMAIN,
                                   gather=recorded_attribute(record.op_type, record.attributes), mode=mode))
    return RecordedNode(form.tail, freed)


def remove_recorded_alignments(model: ModelProto, freed: set[str]) -> bool:
    """Drop what produced ``freed`` (the recorded nodes' old inputs) where nothing reads it any more, and what only
    that read: one walk, subgraphs before the graphs holding them (so what a subgraph freed of an outer graph's
    values is dead there too; each graph's node list is rebuilt after its subgraphs changed, never before)."""
    names, removed = set(freed), False
    for graph in reversed([holder for holder in node_holders(model) if isinstance(holder, GraphProto)]):
        candidates = [node for node in graph.node if any(name in names for name in node.output)]
        if candidates:
            dropped = remove_dead(graph, candidates, names, cascade=True, initializers="freed")
            names |= dropped
            removed |= bool(dropped)
    return removed


__all__ = ["RECORDED_GATHERS", "STAND_IN_TYPE", "RecordedNode", "is_constant", "recorded_node",
           "remove_recorded_alignments"]
