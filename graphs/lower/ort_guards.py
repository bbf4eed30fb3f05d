"""Guards against ONNX Runtime's known bugs (docs/upstream.md), for every gather the lowering emits.

* GatherToSliceFusion turns ``Gather(x, Range(...))`` into a Slice, wrong where the Range's start or limit is
  negative, and clamping out-of-range indices where Gather raises: only the gather a model had passes, where
  its start and limit are provably >= 0. ORT removes Identity, no-op Casts, Dropout, ``Add 0`` / ``Mul 1``-style
  no-ops, Expand and Slice that change nothing, and Unsqueeze / Squeeze pairs before it fuses, and folds
  constants: the guard looks through all of them (``reaches_range``).
* ORT's string Gather copies one element of each block: an element type the graph does not prove may be
  string (``possibly_string``).

Where a guard cannot decide, it refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from onnx import NodeProto, TensorProto, numpy_helper

from ...ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ...ops.contract import is_gather_multiaxis
from ..ranks.tensor_info import TensorInfo
from ..ir.folding import GUARD_FOLDING, fold
from ..ir.walk import ONNX_DOMAINS, attribute, constant_value
from ..passes import GraphScope

_SEARCH_LIMIT = 4096  # values a guard looks at before it stops deciding (and refuses)


def possibly_string(elem_type: int) -> bool:
    """Whether a value of ``elem_type`` may hold strings: STRING, or a type the graph does not prove (0)."""
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
            if node is not None and node.domain in ONNX_DOMAINS and node.op_type in GUARD_FOLDING.ops:
                inputs = [self.value(i) if i else None for i in node.input]
                if all(v is not None for i, v in zip(node.input, inputs) if i):
                    value = fold(node, inputs, self.scope.opset, GUARD_FOLDING)
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
                    shape = self.scope.info(node.input[0]).shape  # (partial types: an unknown shape may be fixed)
                    self.foldable[name] = self.scope.partial_types or (
                        shape is not None and all(isinstance(d, int) for d in shape))
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
        if is_gather_multiaxis(node):  # selects its data's elements (or 0, or clamps to them)
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
_NONNEGATIVE_OF_DATA = frozenset({"Identity", "Squeeze", "Unsqueeze", "Reshape", "Flatten", "Expand", GATHER,
                                  GATHER_ELEMENTS, GATHER_ND, "Slice", "Tile", "Transpose", "ReduceMax",
                                  "ReduceMin", "ReduceSum", "Dropout"})
_SMALL_INTEGERS = frozenset({TensorProto.BOOL, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16,
                             TensorProto.UINT16, TensorProto.INT32})
# Cast targets, and the source types whose every value they keep.
_WIDENS = {TensorProto.INT64: _SMALL_INTEGERS | {TensorProto.UINT32, TensorProto.INT64},
           TensorProto.INT32: _SMALL_INTEGERS}


def reaches_range(scope: GraphScope, name: str, emitted: Mapping[str, NodeProto] | None = None, *,
                  restores_original: bool = False) -> bool:
    """Whether ORT may see ``name`` as the output of a ``Range`` that GatherToSliceFusion makes wrong (True
    where that cannot be decided). The fused Slice is exact on in-range indices when start and limit are >= 0
    but clamps out-of-range ones where Gather raises: such a Range passes only for the gather a model had
    (``restores_original``). ``emitted``: a form's nodes not yet in the graph, by output name."""
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
    Range's output that it fuses wrong (``reaches_range``, through the emitted nodes and the graph's)."""
    nodes = list(nodes)
    emitted = {output: node for node in nodes for output in node.output if output}
    for node in nodes:
        if (node.op_type == GATHER and node.domain in ONNX_DOMAINS
                and reaches_range(scope, node.input[1], emitted, restores_original=restores_original)):
            return ("its Gather's indices are (or ORT may make them) a Range's output, which ORT's "
                    "GatherToSliceFusion turns into a wrong Slice")
    return None


def _single_element_blocks(data: TensorInfo, axis: int) -> bool:
    """Whether every dimension of ``data`` after ``axis`` is proven to be 1 (a Gather's block is one element)."""
    if not data.shape:
        return False
    return all(size == 1 for size in data.shape[axis % len(data.shape) + 1:])


def recorded_gather_refused(gather: NodeProto, data: TensorInfo, scope: GraphScope) -> bool:
    """Whether ORT may compute the given-back ``gather`` (of input ``data``) wrong: a Range its indices reach,
    or a string Gather of blocks of more than one element."""
    if gather.op_type != GATHER:
        return False
    if check_emitted([gather], scope, restores_original=True) is not None:
        return True
    return possibly_string(data.elem_type) and not _single_element_blocks(data, attribute(gather, "axis", 0))


__all__ = ["check_emitted", "possibly_string", "reaches_range", "recorded_gather_refused"]
