"""The one constant folder: a node's output value from its inputs' values, where a caller's policy lets it.

Two engines: a NumPy table of integer ops (int32/int64) computing exactly what ORT computes (Div truncates, Mod
follows ``fmod``) or nothing where the op would fail; and onnx's reference evaluator, one node at a time. Each
caller keeps its own policy (``RANK_FOLDING``, ``SHAPE_FOLDING``, ``BUILDER_FOLDING``) so that what it folds
does not change.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Callable, Literal, Sequence

import numpy as np
from onnx import NodeProto, TensorProto, helper

from ...ops.contract import GatherShapeError, is_gather_multiaxis
from ...ops.kernel import gather_multiaxis
from .walk import ONNX_DOMAINS, attribute, holds_subgraph


@dataclass(frozen=True)
class FoldPolicy:
    """What one caller folds. ``max_elements`` bounds the result, and each input where ``input_kinds`` (NumPy
    dtype kinds) is set ("": any input, any size); ``result_kinds`` "": any but object; ``kernel``: fold
    GatherMultiaxis nodes too, by the kernel; ``squeeze_empty_axes``: an empty axes input of Squeeze removes every
    size-1 dim, as ORT reads it (else it removes none)."""

    ops: frozenset[str]
    engine: Literal["numpy", "reference"]
    max_elements: int
    input_kinds: str = ""
    result_kinds: str = ""
    min_opset: int = 1
    kernel: bool = False
    squeeze_empty_axes: bool = False


_TO_THE_END = (np.iinfo(np.int32).max, np.iinfo(np.int64).max)


def slice_length(length: int, start: int, end: int, step: int) -> int:
    """How many elements ORT's Slice takes from an axis of ``length`` (ONNX's clamping, not Python's; an end
    of INT32_MAX or INT64_MAX means "to the end" in the step's direction, as ORT reads it).
    """
    if end in _TO_THE_END:
        end = -1 - length if step < 0 else length
    start, end = (v + length if v < 0 else v for v in (start, end))
    if step > 0:
        start, end = min(max(start, 0), length), min(max(end, 0), length)
    else:
        start, end = min(max(start, 0), length - 1), min(max(end, -1), length - 1)
    return len(range(start, end, step))


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    if not np.all(b):
        return None
    quotient = np.abs(a) // np.abs(b)  # integer Div truncates towards zero, as C++ does
    return np.where((a < 0) != (b < 0), -quotient, quotient).astype(np.result_type(a, b))


def _modulo(node: NodeProto, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    if not np.all(b):
        return None
    return np.fmod(a, b) if attribute(node, "fmod", 0) else np.mod(a, b)  # fmod=0: the divisor's sign


def _reshaped(node: NodeProto, data: np.ndarray, shape: np.ndarray) -> np.ndarray:
    dims = [int(d) for d in shape.reshape(-1)]
    if not attribute(node, "allowzero", 0):
        dims = [data.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return data.reshape(dims)


def _squeezed(node: NodeProto, a: np.ndarray, axes: np.ndarray | None = None, *,
              empty_squeezes_all: bool = False) -> np.ndarray:
    if axes is None:
        listed = attribute(node, "axes")
        return np.squeeze(a, None if listed is None else tuple(int(x) for x in listed))
    return np.squeeze(a, None if empty_squeezes_all and axes.size == 0 else tuple(int(x) for x in axes.reshape(-1)))


def _sliced(node: NodeProto, values: list) -> np.ndarray | None:
    data, starts, ends = (np.asarray(v).reshape(-1) if i else v for i, v in enumerate(values[:3]))
    axes = values[3] if len(values) > 3 and values[3] is not None else np.arange(len(starts))
    steps = values[4] if len(values) > 4 and values[4] is not None else np.ones(len(starts), np.int64)
    for start, end, axis, step in zip(starts, ends, axes.reshape(-1), steps.reshape(-1)):
        axis, start, end, step = int(axis) % data.ndim, int(start), int(end), int(step)
        length = data.shape[axis]
        first = start + length if start < 0 else start
        first = min(max(first, 0), length) if step > 0 else min(max(first, 0), length - 1)
        data = np.take(data, first + step * np.arange(slice_length(length, start, end, step)), axis=axis)
    return data


_NUMPY_FOLDS: dict[str, Callable[..., "np.ndarray | None"]] = {
    "Identity": lambda node, a: a,
    "Neg": lambda node, a: -a,
    "Abs": lambda node, a: np.abs(a),
    "Add": lambda node, a, b: a + b,
    "Sub": lambda node, a, b: a - b,
    "Mul": lambda node, a, b: a * b,
    "Div": lambda node, a, b: _divide(a, b),
    "Mod": _modulo,
    "Min": lambda node, *values: functools.reduce(np.minimum, values),
    "Max": lambda node, *values: functools.reduce(np.maximum, values),
    "Reshape": _reshaped,
    "Unsqueeze": lambda node, a, axes=None: np.expand_dims(a, tuple(int(x) for x in (
        attribute(node, "axes") if axes is None else axes.reshape(-1)))),
    "Squeeze": _squeezed,
    "Concat": lambda node, *values: np.concatenate(values, axis=attribute(node, "axis")),
    "Gather": lambda node, a, i: np.take(a, np.where(i < 0, i + a.shape[attribute(node, "axis", 0)], i),
                                         axis=attribute(node, "axis", 0)),
    "Slice": lambda node, *values: _sliced(node, list(values)),
}

_NUMPY_FOLDABLE = frozenset({*_NUMPY_FOLDS, "Cast"})
_INTEGERS = {TensorProto.INT64: np.int64, TensorProto.INT32: np.int32}

# Rank rules read the bounds of a Slice or the shape of a Reshape that exporters compute from a few constants
# (TorchScript's nn.MultiheadAttention: Reshape(Mod(2, 3), [1])); nothing larger is folded.
RANK_FOLDING = FoldPolicy(_NUMPY_FOLDABLE, "numpy", max_elements=64, squeeze_empty_axes=True)
# The lowering's guards against ORT's GatherToSliceFusion read the same small values, but an empty axes input of
# Squeeze squeezes nothing there, as the guards have always read it (their sign decisions read the elements,
# which a Squeeze does not change).
GUARD_FOLDING = replace(RANK_FOLDING, squeeze_empty_axes=False)
# Shape arithmetic once the input shapes are fixed: integer and bool values only, so folding is exact; shape
# arithmetic, not data (Shape and Size are folded by their callers from static shapes).
SHAPE_FOLDING = FoldPolicy(
    frozenset({"Gather", "Where", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Range", "Concat",
               "Unsqueeze", "Squeeze", "Slice", "Add", "Sub", "Mul", "Div", "Mod", "Cast", "Reshape", "Expand",
               "ConstantOfShape", "Not", "And", "Or", "Max", "Min", "Abs", "Neg", "Identity", "ReduceProd",
               "ReduceSum", "ReduceMax", "ReduceMin", "CumSum", "Transpose", "Tile", "Flatten", "Sign"}),
    "reference", max_elements=1 << 16, input_kinds="iub", result_kinds="iub", kernel=True)
# A builder's shape arithmetic over the constants it emitted: a static size never becomes a node that computes
# it; larger results (a Range over a big dimension) stay nodes.
BUILDER_FOLDING = FoldPolicy(
    frozenset({"Add", "Sub", "Mul", "Div", "Neg", "Min", "Max", "Equal", "Less", "Greater", "Not", "And", "Or",
               "Where", "Cast", "Concat", "Gather", "Reshape", "Squeeze", "Unsqueeze", "Range", "ReduceProd",
               "ReduceSum", "ConstantOfShape", "Shape"}),
    "reference", max_elements=1 << 16, min_opset=9)


def fold(node: NodeProto, values: Sequence[np.ndarray | None], opset: int, policy: FoldPolicy) -> np.ndarray | None:
    """The value of ``node``'s only output from its inputs' values, where ``policy`` folds it; else None."""
    if opset < policy.min_opset:
        return None
    if policy.kernel and is_gather_multiaxis(node):
        result = _kernel(node, values, policy)
    elif len(node.output) != 1 or node.domain not in ONNX_DOMAINS or node.op_type not in policy.ops:
        return None
    elif policy.engine == "numpy":
        return _numpy(node, values, policy)
    else:
        result = _reference(node, values, opset, policy)
    if result is None or result.size > policy.max_elements:
        return None
    if result.dtype.kind not in policy.result_kinds if policy.result_kinds else result.dtype == object:
        return None
    return result


def _inputs_fit(values: Sequence[np.ndarray | None], policy: FoldPolicy) -> bool:
    return not policy.input_kinds or all(value.dtype.kind in policy.input_kinds and value.size <= policy.max_elements
                                         for value in values if value is not None)


def _kernel(node: NodeProto, values: Sequence[np.ndarray | None], policy: FoldPolicy) -> np.ndarray | None:
    """A GatherMultiaxis node by the kernel; None where it raises (ORT then says so at run time)."""
    if len(values) != 3 or any(value is None for value in values) or not _inputs_fit(values, policy):
        return None
    mode = attribute(node, "mode")  # bytes that are not UTF-8 come back escaped: no mode, not folded
    if not isinstance(mode, str):  # the schema requires a string: not foldable, ORT refuses the node
        return None
    data, indices, axes = values
    assert data is not None and indices is not None and axes is not None  # (checked above)
    try:
        return gather_multiaxis(data, indices, [int(a) for a in axes.reshape(-1)], mode)
    except (GatherShapeError, IndexError, ValueError):
        return None


def _reference(node: NodeProto, values: Sequence[np.ndarray | None], opset: int,
               policy: FoldPolicy) -> np.ndarray | None:
    """One node by onnx's reference evaluator; None where it fails (not foldable here: ORT computes it)."""
    from onnx.reference import ReferenceEvaluator  # only the callers that fold by it import it

    feeds: dict[str, np.ndarray] = {}
    for name, value in zip(node.input, values):
        if not name:
            continue
        if value is None:
            return None
        feeds[name] = value
    if holds_subgraph(node) or not _inputs_fit(values, policy):
        return None
    try:
        single = helper.make_model(
            helper.make_graph([node], "fold", [helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape) for name, value in feeds.items()],
                [helper.make_empty_tensor_value_info(node.output[0])]),
            opset_imports=[helper.make_opsetid("", opset)])
        (result,) = ReferenceEvaluator(single).run(None, feeds)
    except Exception:  # noqa: BLE001 - not foldable here (e.g. an error ORT must raise at run time)
        return None
    return np.asarray(result)


def _numpy(node: NodeProto, values: Sequence[np.ndarray | None], policy: FoldPolicy) -> np.ndarray | None:
    """The NumPy table's value of an integer node (the module docstring)."""
    limit = policy.max_elements
    if node.op_type == "Cast":
        to = _INTEGERS.get(attribute(node, "to", 0))
        value = values[0] if values else None
        if to is None or value is None or value.dtype.kind not in "iu" or value.size > limit:
            return None
        return value.astype(to)
    function = _NUMPY_FOLDS.get(node.op_type)
    if function is _squeezed:
        function = functools.partial(_squeezed, empty_squeezes_all=policy.squeeze_empty_axes)
    present = [value for value in values if value is not None]
    if function is None or not present or any(v.dtype not in (np.int64, np.int32) or v.size > limit
                                                for v in present):
        return None
    if node.op_type not in ("Unsqueeze", "Squeeze", "Slice") and len(present) != len(values):
        return None
    try:
        with np.errstate(all="raise"):
            result = function(node, *values)
    except (ValueError, IndexError, TypeError, FloatingPointError, np.exceptions.AxisError):
        return None
    if result is None or result.size > limit:
        return None
    return np.asarray(result)


__all__ = ["BUILDER_FOLDING", "GUARD_FOLDING", "RANK_FOLDING", "SHAPE_FOLDING", "FoldPolicy", "fold", "slice_length"]
