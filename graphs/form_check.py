"""The check a single standard gather passes before the lowering emits it for a GatherMultiaxis node
(``lower``, ``lower --target webnn`` and the session's builtin gathers alike): that it computes what the
node computes on every input the graph allows, and that ONNX Runtime computes it right.

* **The rewrite's record** (``graphs.provenance``) only says which form to try first. ``recorded_form``
  gives back the recorded gather where the graph between the record's names and the node is exactly what
  the rewrite writes for that gather: the rewrite's own replacement of it (``rules.emit_replacement``) is
  made again from what the graph proves of its inputs (element type, ranks, sizes) and compared node for
  node with the graph, from the recorded inputs to the node (alignment, Slice, Cast, run-time shape
  arithmetic; constants by value) and from the node to the recorded output (its Squeeze / Reshape / Cast
  back, each the only reader of the value before it). The node's mode and axes are part of that
  comparison: the record's gather, aligned as the rewrite aligns it, must equal the node. A static
  alignment is compared only where the graph proves both ranks (another rank pair could meet the same
  alignment and compute something else); the run-time alignment holds for every rank. A record that does
  not hold is ignored.
* **ONNX Runtime's known bugs** (docs/upstream.md), guarded through what ORT removes or folds before it
  fuses: ``reaches_range`` (GatherToSliceFusion turns ``Gather(x, Range(...))`` into a Slice, wrong where
  the Range's start or limit is negative, and clamping out-of-range indices where Gather raises: only the
  gather a model had passes, where its start and limit are provably >= 0; ORT removes Identity, no-op
  Casts, Dropout, ``Add 0`` / ``Mul 1``-style no-ops, Expand and Slice that change nothing, and
  Unsqueeze / Squeeze pairs first, and folds constants),
  ``possibly_string`` (ORT's string Gather copies one element of each block: an element type the graph
  does not prove may be string). Where a guard cannot decide, it refuses.
* ``check_emitted``: every Gather a form emits, checked on the nodes as emitted (a Squeeze the form
  writes after the rewrite's Unsqueeze is such a pair).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from ..ops.contract import DOMAIN, OP_TYPE
from .ir.builder import NameScope, NodeBuilder
from .inference import TensorInfo
from .passes import GraphScope
from .provenance import ReplacedGather, carry_metadata, replaced_gather
from .ranks.rank_rules import FOLDABLE_OPS, fold
from .passes.pass_report import LeftUnchanged
from .rewrite.replacement import emit_replacement
from .ir.walk import ONNX_DOMAINS, attribute, constant_value
from .sources.registry import BATCH_DIMS_OPSET, OP_OPSET
_SEARCH_LIMIT = 4096  # values a guard looks at before it stops deciding (and refuses)


def possibly_string(elem_type: int) -> bool:
    """Whether a value of ``elem_type`` may hold strings: STRING, or a type the graph does not prove (0).

    Args:
        elem_type: an ONNX element type, 0 for unknown.

    Returns:
        True for STRING or 0.
    """
    return elem_type in (TensorProto.STRING, 0)


# -- what ORT removes before GatherToSliceFusion --------------------------------------------------------


class _Search:
    """What ORT may remove or fold, seen from one value: the nodes that write values (emitted ones first, not
    yet in the graph, then the scope's own), with what is known of their constants. Each value is looked at
    once (memos); past ``_SEARCH_LIMIT`` values the search stops deciding."""

    def __init__(self, scope: GraphScope, emitted: Mapping[str, NodeProto]):
        self.scope, self.emitted = scope, emitted
        self.budget = _SEARCH_LIMIT
        self.values: dict[str, np.ndarray | None] = {}
        self.foldable: dict[str, bool] = {}
        self.signs: dict[str, bool] = {}

    def spent(self) -> bool:
        self.budget -= 1
        return self.budget < 0

    def producer(self, name: str) -> NodeProto | None:
        node = self.emitted.get(name)
        return node if node is not None else self.scope.producers.get(name)

    def constant(self, name: str) -> np.ndarray | None:
        node = self.emitted.get(name)
        if node is not None:
            tensor = constant_value(node) if node.op_type == "Constant" else None
            return None if tensor is None else numpy_helper.to_array(tensor)
        try:
            return self.scope.constants[name] if name in self.scope.constants else None
        except Exception:  # noqa: BLE001 - an unreadable constant (external data): its value is not known
            return None

    def value(self, name: str) -> np.ndarray | None:
        """The value of ``name`` where it is a constant or small integer arithmetic on constants."""
        if name not in self.values:
            self.values[name] = None  # (a cycle, or the search stopped: not known)
            value = self.constant(name)
            node = self.producer(name) if value is None and not self.spent() else None
            if node is not None and node.domain in ONNX_DOMAINS and node.op_type in FOLDABLE_OPS:
                inputs = [self.value(i) if i else None for i in node.input]
                if all(v is not None for i, v in zip(node.input, inputs) if i):
                    value = fold(node, inputs)
            self.values[name] = value
        return self.values[name]

    def may_fold(self, name: str) -> bool:
        """Whether ORT's constant folding may make ``name`` a constant: nothing it is computed from is a graph
        input (or a Shape of a value whose shape the graph does not fix). Undecided: True."""
        if name not in self.foldable:
            self.foldable[name] = True  # (a cycle, or the search stopped: may fold)
            if self.constant(name) is None and not self.spent():
                node = self.producer(name)
                if node is None or node.domain not in ONNX_DOMAINS:  # a graph input, or an enclosing graph's value
                    self.foldable[name] = False
                elif node.op_type == "Shape":
                    shape = self.scope.info(node.input[0]).shape
                    self.foldable[name] = shape is not None and all(isinstance(d, int) for d in shape)
                else:
                    self.foldable[name] = all(self.may_fold(i) for i in node.input if i)
        return self.foldable[name]

    def passed_through(self, node: NodeProto) -> list[str]:
        """The inputs of ``node`` that ORT may make it a plain copy of (it removes the node before fusing)."""
        op = node.op_type
        if op in ("Identity", "Dropout", "Expand", "Slice"):
            return [node.input[0]]
        if op == "Cast":
            source = self.scope.info(node.input[0]).elem_type
            return [node.input[0]] if source in (0, attribute(node, "to")) else []
        if op in _NEUTRAL and len(node.input) == 2:
            through = []
            for position in ((0, 1) if op in ("Add", "Mul") else (0,)):
                operand = node.input[1 - position]
                value = self.value(operand)
                if value is not None:
                    if value.size and np.all(value == _NEUTRAL[op]):
                        through.append(node.input[position])
                elif self.may_fold(operand):  # a constant once folded, of a value not known here
                    through.append(node.input[position])
            return through
        if op in ("Squeeze", "Unsqueeze"):
            inner = self.producer(node.input[0])
            pair = "Unsqueeze" if op == "Squeeze" else "Squeeze"
            if inner is not None and inner.op_type == pair and inner.domain in ONNX_DOMAINS:
                outer_axes, inner_axes = self.axes(node), self.axes(inner)
                if outer_axes is None or inner_axes is None or sorted(outer_axes) == sorted(inner_axes):
                    return [inner.input[0]]  # the pair undoes itself (or may: axes not known)
        return []

    def axes(self, node: NodeProto) -> list[int] | None:
        axes = attribute(node, "axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            value = self.constant(node.input[1])
            axes = None if value is None else [int(a) for a in value.reshape(-1)]
        return axes if isinstance(axes, list) else None

    def nonnegative(self, name: str) -> bool:
        """Whether every element of ``name`` is provably >= 0 (``_NONNEGATIVE`` and the rules below);
        undecided: False."""
        if name not in self.signs:
            self.signs[name] = False  # (a cycle, or the search stopped: not proven)
            value = self.value(name)
            if value is not None:
                self.signs[name] = value.dtype != object and bool(np.all(value >= 0))
            elif not self.spent():
                node = self.producer(name)
                self.signs[name] = node is not None and self._nonnegative(node)
        return self.signs[name]

    def _nonnegative(self, node: NodeProto) -> bool:
        op, inputs = node.op_type, [name for name in node.input if name]
        if (node.domain, op) == (DOMAIN, OP_TYPE):  # selects its data's elements (or 0, or clamps to them)
            return self.nonnegative(node.input[0])
        if node.domain not in ONNX_DOMAINS:
            return False
        if op in _NONNEGATIVE:
            return True
        if op == "Cast":  # an integer widened (or kept): the same value; a float may be NaN, a narrowing may wrap
            source = self.scope.info(node.input[0]).elem_type if node.input[0] not in self.emitted else 0
            return source in _WIDENS.get(attribute(node, "to"), frozenset()) and self.nonnegative(node.input[0])
        if op in _NONNEGATIVE_OF_ALL:
            return bool(inputs) and all(self.nonnegative(name) for name in inputs)
        if op == "Max":
            return any(self.nonnegative(name) for name in inputs)
        if op == "Where":
            return len(inputs) == 3 and self.nonnegative(inputs[1]) and self.nonnegative(inputs[2])
        if op in _NONNEGATIVE_OF_DATA:
            return bool(inputs) and self.nonnegative(node.input[0])
        return False


_NEUTRAL = {"Add": 0, "Sub": 0, "Mul": 1, "Div": 1}
# Integer values that are >= 0 whatever their inputs (not Abs: Abs of the lowest integer is itself), that
# are when all their inputs are (Div truncates, Mod of non-negatives is non-negative), and that select,
# move or reduce their data input's elements.
_NONNEGATIVE = frozenset({"Shape", "Size", "NonZero", "ArgMax", "ArgMin", "Relu"})
_NONNEGATIVE_OF_ALL = frozenset({"Add", "Mul", "Sum", "Min", "Div", "Mod", "Concat"})
_NONNEGATIVE_OF_DATA = frozenset({"Identity", "Squeeze", "Unsqueeze", "Reshape", "Flatten", "Expand", "Gather",
                                  "GatherElements", "GatherND", "Slice", "Tile", "Transpose", "ReduceMax",
                                  "ReduceMin", "ReduceSum", "Dropout"})
_SMALL_INTEGERS = frozenset({TensorProto.BOOL, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16,
                             TensorProto.UINT16, TensorProto.INT32})
# Cast targets, and the source types whose every value they keep.
_WIDENS = {TensorProto.INT64: _SMALL_INTEGERS | {TensorProto.UINT32, TensorProto.INT64},
           TensorProto.INT32: _SMALL_INTEGERS}


def reaches_range(scope: GraphScope, name: str, emitted: Mapping[str, NodeProto] | None = None, *,
                  restores_original: bool = False) -> bool:
    """Whether ORT may see ``name`` as the output of a ``Range`` that GatherToSliceFusion makes wrong, once it
    has removed or folded what it removes before it fuses (the module docstring); True where that cannot be
    decided.

    The fused ``Slice(x, start, limit, axis, delta)`` computes the Gather on every in-range index when the
    Range's start and limit are both >= 0 (Gather counts each negative index from the end, Slice its start
    and its limit apart; the step's sign does not matter). It clamps an index that is out of range, where
    the Gather raises: so such a Range passes only for the gather a model had (``restores_original``), which
    ORT fuses alike in the model itself, never for a Gather the lowering introduces.

    Args:
        scope: the graph's scope.
        name: the indices a Gather would read.
        emitted: nodes written but not yet in the graph, by output name (a form's own nodes).
        restores_original: the Gather is the one the rewrite replaced (its record), given back.

    Returns:
        True when a Range may reach ``name`` (a Gather of it may be fused into a wrong Slice).
    """
    search = _Search(scope, emitted or {})
    pending, seen = [name], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if search.spent():
            return True
        node = search.producer(current)
        if node is None or node.domain not in ONNX_DOMAINS:
            continue
        if node.op_type == "Range":
            if not (restores_original and len(node.input) == 3
                    and search.nonnegative(node.input[0]) and search.nonnegative(node.input[1])):
                return True
            continue
        pending.extend(search.passed_through(node))
    return False


def check_emitted(nodes: Iterable[NodeProto], scope: GraphScope, *, restores_original: bool = False) -> str | None:
    """Why the nodes a form emits may not be used, or None: a Gather among them whose indices ORT may see as a
    Range's output that it fuses wrong (``reaches_range``, through the emitted nodes and the graph's).

    Args:
        nodes: the form's nodes.
        scope: the graph's scope.
        restores_original: the nodes are the gather the rewrite replaced, given back (``reaches_range``).

    Returns:
        The reason, or None when every emitted Gather passes.
    """
    nodes = list(nodes)
    emitted = {output: node for node in nodes for output in node.output if output}
    for node in nodes:
        if (node.op_type == "Gather" and node.domain in ONNX_DOMAINS
                and reaches_range(scope, node.input[1], emitted, restores_original=restores_original)):
            return ("its Gather's indices are (or ORT may make them) a Range's output, which ORT's "
                    "GatherToSliceFusion turns into a wrong Slice")
    return None


# -- the rewrite's record -----------------------------------------------------------------------------


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

    def __init__(self, made: list[NodeProto], leaves: set[str], scope: GraphScope):
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
        tensor = constant_value(constant)
        if tensor is None or found not in self.scope.constants:
            return False
        try:
            value = self.scope.constants[found]
        except Exception:  # noqa: BLE001 - unreadable: not proven
            return False
        want = numpy_helper.to_array(tensor)
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


def _made_again(record: ReplacedGather, data: TensorInfo, indices: TensorInfo, opset: int) -> list[NodeProto] | None:
    """The rewrite's replacement of the recorded gather, for inputs known as ``data`` and ``indices``."""
    replaced = helper.make_node(record.op_type, [record.data, record.indices], [record.output],
                                **record.attributes)  # type: ignore[arg-type]  # ints: node attributes
    builder = NodeBuilder(opset, NameScope({record.data, record.indices, record.output}), "gathermultiaxis.record")
    try:
        emit_replacement(replaced, data, indices, builder)
    except (LeftUnchanged, ValueError):
        return None
    return list(builder.nodes)


def _inputs_to_try(record: ReplacedGather, data: TensorInfo, indices: TensorInfo) -> list[tuple[TensorInfo, TensorInfo]]:
    """What the rewrite may have known of the inputs, in the forms the graph proves: what it proves (a static
    alignment where both ranks are known), GatherElements' sizes forgotten (its Slice to the indices'
    extents), no rank at all (the run-time alignment, right for every rank)."""
    tried = [(data, indices)]
    if data.shape is not None and indices.shape is not None and record.op_type == "GatherElements":
        tried.append((TensorInfo(data.elem_type, (None,) * len(data.shape)),
                      TensorInfo(indices.elem_type, (None,) * len(indices.shape))))
    if data.shape is not None or indices.shape is not None:
        tried.append((TensorInfo(data.elem_type, None), TensorInfo(indices.elem_type, None)))
    return tried


def _single_element_blocks(data: TensorInfo, axis: int) -> bool:
    """Whether every dimension of ``data`` after ``axis`` is proven to be 1 (a Gather's block is one element)."""
    if not data.shape:
        return False
    return all(size == 1 for size in data.shape[axis % len(data.shape) + 1:])


def recorded_form(node: NodeProto, scope: GraphScope) -> RecordedForm | None:
    """The gather ``node`` records that it replaced, where the graph proves it (the module docstring) and ORT
    computes it right; None otherwise (no record, a record that does not hold, or a guard that refuses).

    Args:
        node: a GatherMultiaxis node.
        scope: its graph's scope.

    Returns:
        The RecordedForm: the gather (with the node's metadata but the record) and the tail nodes it replaces.
    """
    record = replaced_gather(node)
    if record is None or scope.opset < OP_OPSET[record.op_type]:
        return None
    if record.op_type == "GatherND" and record.attributes.get("batch_dims", 0) and scope.opset < BATCH_DIMS_OPSET:
        return None
    data, indices = scope.info(record.data), scope.info(record.indices)
    if not data.elem_type:  # the rewrite's replacement depends on it (the float16 Cast round trip)
        return None
    tail = None
    for known_data, known_indices in _inputs_to_try(record, data, indices):
        made = _made_again(record, known_data, known_indices, scope.opset)
        gathers = [n for n in made or () if n.op_type == node.op_type and n.domain == node.domain]
        if len(gathers) != 1:
            continue
        comparison = _Comparison(made or [], {record.data, record.indices}, scope)
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
    if record.op_type == "Gather":
        if check_emitted([gather], scope, restores_original=True) is not None:
            return None
        if possibly_string(data.elem_type) and not _single_element_blocks(data, record.attributes.get("axis", 0)):
            return None  # ORT's string Gather is wrong for blocks of more than one element
    carry_metadata(node, gather)
    return RecordedForm(gather, tail)


__all__ = ["BATCH_DIMS_OPSET", "OP_OPSET", "RecordedForm", "check_emitted", "possibly_string", "reaches_range",
           "recorded_form"]
