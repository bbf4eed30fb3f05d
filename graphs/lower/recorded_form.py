"""Step 1 of the lowering: the gather a GatherMultiaxis node records that it replaced (``graphs.provenance``),
given back where the graph proves it. The record only says which form to try first: the rewrite's own
replacement of it (``rules.emit_replacement``) is made again from what the graph proves of its inputs (element
type, ranks, sizes) and compared node for node with the graph, from the recorded inputs to the node (alignment,
Slice, Cast, run-time shape arithmetic; constants by value) and from the node to the recorded output (its
Squeeze / Reshape / Cast back, each the only reader of the value before it). The node's mode and axes are part
of that comparison. A static alignment is compared only where the graph proves both ranks (another rank pair
could meet the same alignment and compute something else); the run-time alignment holds for every rank. A
record that does not hold is ignored, and so is one that ``ort_guards`` refuses.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from ...ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ..ranks.tensor_info import TensorInfo
from ..ir.builder import NameScope, NodeBuilder
from ..ir.walk import ONNX_DOMAINS, constant_value
from ..passes import GraphScope
from ..passes.pass_report import LeftUnchanged
from ..provenance import ReplacedGather, carry_metadata, replaced_gather
from ..rewrite.replacement import emit_replacement
from ..sources.registry import BATCH_DIMS_OPSET, OP_OPSET
from .ort_guards import recorded_gather_refused



@dataclass(frozen=True)
class RecordedForm:
    """The recorded gather, and the rewrite's nodes after the GatherMultiaxis node that it replaces too."""

    gather: NodeProto
    tail: list[NodeProto]


def _attributes(node: NodeProto) -> dict[str, object] | None:
    values: dict[str, object] = {}
    for proto in node.attribute:
        value = helper.get_attribute_value(proto)
        if isinstance(value, TensorProto):
            value = ("tensor", value.data_type, tuple(numpy_helper.to_array(value).reshape(-1).tolist()),
                     tuple(value.dims))
        elif isinstance(value, list) and value and not isinstance(value[0], (int, float, bytes)):
            return None  # graphs, tensors lists: never in the rewrite's nodes
        elif isinstance(value, list):
            value = tuple(value)
        values[proto.name] = value
    return values


def _same_op(made: NodeProto, found: NodeProto) -> bool:
    """Same op, domain, arity and attributes (names aside)."""
    made_domain = "" if made.domain in ONNX_DOMAINS else made.domain
    found_domain = "" if found.domain in ONNX_DOMAINS else found.domain
    return (made.op_type == found.op_type and made_domain == found_domain and len(made.input) == len(found.input)
            and len(made.output) == len(found.output) and _attributes(made) == _attributes(found) is not None)


class _Comparison:
    """The rewrite's replacement, made again, against the graph: ``same(made, found)`` proves that the value
    ``found`` is computed as ``made`` is, from the same leaves (the recorded inputs) or equal constants."""

    def __init__(self, made: list[NodeProto], leaves: set[str], scope: GraphScope,
                 values: dict[str, np.ndarray] | None = None):
        self.values = values or {}  # the made constants' values, by output name, where known already
        self.producers = {output: node for node in made for output in node.output if output}
        self.readers: dict[str, list[NodeProto]] = {}
        for node in made:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.leaves, self.scope = leaves, scope
        self.proven: set[tuple[str, str]] = set()

    def same(self, made: str, found: str) -> bool:
        if (made, found) in self.proven:
            return True
        if made in self.leaves or not made:
            result = made == found
        else:
            producer = self.producers.get(made)
            if producer is None:
                return False
            if producer.op_type == "Constant":
                result = self._same_constant(producer, found)
            else:
                node = self.scope.producers.get(found)
                result = (node is not None and _same_op(producer, node)
                          and list(producer.output).index(made) == list(node.output).index(found)
                          and all(self.same(a, b) for a, b in zip(producer.input, node.input)))
        if result:
            self.proven.add((made, found))
        return result

    def _same_constant(self, constant: NodeProto, found: str) -> bool:
        want = self.values.get(constant.output[0])
        if want is None:
            tensor = constant_value(constant)
            if tensor is None:
                return False
            want = numpy_helper.to_array(tensor)
        if found not in self.scope.constants:
            return False
        try:
            value = self.scope.constants[found]
        except Exception:  # noqa: BLE001 - unreadable: not proven
            return False
        return value.dtype == want.dtype and value.shape == want.shape and bool(np.array_equal(value, want))

    def tail(self, gathered: str, node: NodeProto, output: str) -> list[NodeProto] | None:
        """The graph's nodes from ``node``'s output to ``output`` that match the made ones from ``gathered``:
        each the only reader of the value before it, reading it where the made node does."""
        made_value, found_value, tail = gathered, node.output[0], list[NodeProto]()
        while made_value != output:
            made_readers = self.readers.get(made_value, [])
            found_readers = self.scope.consumers.get(found_value, [])
            if len(made_readers) != 1 or len(found_readers) != 1 or self.scope.readers.get(found_value, 0) != 1:
                return None
            made_node, found_node = made_readers[0], found_readers[0]
            if not _same_op(made_node, found_node):
                return None
            for made_input, found_input in zip(made_node.input, found_node.input):
                if made_input == made_value:
                    if found_input != found_value:
                        return None
                elif not self.same(made_input, found_input):
                    return None
            tail.append(found_node)
            made_value, found_value = made_node.output[0], found_node.output[0]
        return tail if found_value == output else None


_PREFIX = "gathermultiaxis.record"
_STAND_INS = (f"{_PREFIX}.data", f"{_PREFIX}.indices", f"{_PREFIX}.output")


def _emitted(op_type: str, attributes: dict[str, int], names: tuple[str, str, str], data: TensorInfo,
             indices: TensorInfo, opset: int) -> list[NodeProto] | None:
    """The rewrite's replacement of ``op_type`` reading ``names[:2]`` and writing ``names[2]``; None where the
    rewrite would leave it."""
    replaced = helper.make_node(op_type, list(names[:2]), [names[2]],
                                **attributes)  # type: ignore[arg-type]  # ints: node attributes
    builder = NodeBuilder(opset, NameScope(set(names)), _PREFIX)
    try:
        emit_replacement(replaced, data, indices, builder)
    except (LeftUnchanged, ValueError):
        return None
    return list(builder.nodes)


@functools.lru_cache(maxsize=256)
def _template(op_type: str, attributes: tuple[tuple[str, int], ...], data: TensorInfo, indices: TensorInfo,
              opset: int) -> tuple[tuple[NodeProto, ...], dict[str, np.ndarray]] | None:
    """The rewrite's replacement of such a gather between the names ``_STAND_INS`` (it reads no other name), and
    its constants' values by output name."""
    nodes = _emitted(op_type, dict(attributes), _STAND_INS, data, indices, opset)
    if nodes is None:
        return None
    values = {}
    for node in nodes:
        tensor = constant_value(node) if node.op_type == "Constant" else None
        if tensor is not None and node.output[0] not in _STAND_INS:
            values[node.output[0]] = numpy_helper.to_array(tensor)
            values[node.output[0]].flags.writeable = False
    return tuple(nodes), values


def _made_again(record: ReplacedGather, data: TensorInfo, indices: TensorInfo, opset: int
                ) -> tuple[list[NodeProto], dict[str, np.ndarray]] | None:
    """The rewrite's replacement of the recorded gather, for inputs known as ``data`` and ``indices``: its
    template for such a gather, between the record's names (made anew where one of them is like the template's
    own, which it would then collide with)."""
    names = (record.data, record.indices, record.output)
    if any(name.startswith(_PREFIX) for name in names):
        nodes = _emitted(record.op_type, record.attributes, names, data, indices, opset)
        return None if nodes is None else (nodes, {})
    template = _template(record.op_type, tuple(sorted(record.attributes.items())), data, indices, opset)
    if template is None:
        return None
    rename = dict(zip(_STAND_INS, names))
    made = []
    for node in template[0]:
        copy = NodeProto()
        copy.CopyFrom(node)
        for field in (copy.input, copy.output):
            for position, name in enumerate(field):
                if name in rename:
                    field[position] = rename[name]
        made.append(copy)
    return made, template[1]


def _inputs_to_try(record: ReplacedGather, data: TensorInfo, indices: TensorInfo) -> list[tuple[TensorInfo, TensorInfo]]:
    """What the rewrite may have known of the inputs, in the forms the graph proves: what it proves (a static
    alignment where both ranks are known), GatherElements' sizes forgotten (its Slice to the indices'
    extents), no rank at all (the run-time alignment, right for every rank)."""
    tried = [(data, indices)]
    if data.shape is not None and indices.shape is not None and record.op_type == GATHER_ELEMENTS:
        tried.append((TensorInfo(data.elem_type, (None,) * len(data.shape)),
                      TensorInfo(indices.elem_type, (None,) * len(indices.shape))))
    if data.shape is not None or indices.shape is not None:
        tried.append((TensorInfo(data.elem_type, None), TensorInfo(indices.elem_type, None)))
    return tried


def recorded_form(node: NodeProto, scope: GraphScope) -> RecordedForm | None:
    """The gather ``node`` records that it replaced (with the node's metadata but the record) and the tail
    nodes it replaces, where the graph proves it and ORT computes it right; None otherwise."""
    record = replaced_gather(node)
    if record is None or scope.opset < OP_OPSET[record.op_type]:
        return None
    if record.op_type == GATHER_ND and record.attributes.get("batch_dims", 0) and scope.opset < BATCH_DIMS_OPSET:
        return None
    data, indices = scope.info(record.data), scope.info(record.indices)
    if not data.elem_type:  # the rewrite's replacement depends on it (the float16 Cast round trip)
        return None
    tail = None
    for known_data, known_indices in _inputs_to_try(record, data, indices):
        made, values = _made_again(record, known_data, known_indices, scope.opset) or ([], {})
        gathers = [n for n in made if n.op_type == node.op_type and n.domain == node.domain]
        if len(gathers) != 1:
            continue
        comparison = _Comparison(made, {record.data, record.indices}, scope, values)
        if not (_same_op(gathers[0], node) and all(comparison.same(a, b) for a, b in zip(gathers[0].input, node.input))):
            continue
        tail = comparison.tail(gathers[0].output[0], node, record.output)
        if tail is not None:
            break
    if tail is None:
        return None
    gather = helper.make_node(record.op_type, [record.data, record.indices], [record.output],
                              name=record.name or None, domain=record.domain,
                              **record.attributes)  # type: ignore[arg-type]  # ints: node attributes
    if recorded_gather_refused(gather, data, scope):
        return None
    carry_metadata(node, gather)
    return RecordedForm(gather, tail)


__all__ = ["BATCH_DIMS_OPSET", "OP_OPSET", "RecordedForm", "recorded_form"]
