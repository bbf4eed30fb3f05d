"""The GatherMultiaxis operator's contract, stated once: node signature, modes, errors, shape rule (NumPy only).

    output = GatherMultiaxis(input, indices, axes, mode)     domain ai.onnx.contrib, version 1
      input    T      one of DATA_TYPES
      indices  int32 or int64 (INDEX_TYPES), the rank of input
      axes     int64 1-D tensor: distinct dimensions of input, each in [-rank, rank - 1]
      mode     string attribute, required on the node: one of Mode's values
      output   T      the rank of input; its dims are ``output_dims``

DATA_TYPES are what the PyOp bridge can carry: not float16/bfloat16 (the rewriter wraps those in an exact
Cast round trip), not complex (registering complex types makes every session fail to load)."""

from __future__ import annotations

import enum
import operator
from typing import Protocol, Sequence, assert_never, overload

import numpy as np

DOMAIN = "ai.onnx.contrib"
OP_TYPE = "GatherMultiaxis"
# onnx.TensorProto.DataType's values (fixed by onnx.proto), written out so that the kernel and the command
# line's --help import no onnx; tests/ops/test_contract.py checks them against onnx.
_ELEM_TYPES = {"FLOAT": 1, "UINT8": 2, "INT8": 3, "UINT16": 4, "INT16": 5, "INT32": 6, "INT64": 7, "STRING": 8,
               "BOOL": 9, "DOUBLE": 11, "UINT32": 12, "UINT64": 13}
DATA_TYPES = tuple(_ELEM_TYPES[name] for name in ("FLOAT", "DOUBLE", "INT8", "INT16", "INT32", "INT64", "UINT8",
                                                  "UINT16", "UINT32", "UINT64", "BOOL", "STRING"))
INDEX_TYPES = (_ELEM_TYPES["INT32"], _ELEM_TYPES["INT64"])
INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


class OutOfRange(enum.Enum):
    """What reading at an index outside ``[-dim, dim - 1]`` gives."""

    RAISE = "raise"  # GatherIndexError (the kernel), ORT's own error (a lowered form)
    ZERO = "zero"    # the output element is 0 (or False, "")
    CLAMP = "clamp"  # the element at the index clamped into range


class Mode(str, enum.Enum):
    """What an index outside ``[-dim, dim - 1]`` does; values are the node's ``mode`` strings (equal to them).

    ERROR: raise (ONNX's Gather and GatherElements; ORT checks every index, even for an empty output).
    ERROR_NONEMPTY: raise, but check nothing when the output is empty (ORT's GatherND).
    ZERO: the output element is 0 (OpenVINO Gather-8).
    CLAMP: clamp into range after negatives count from the end (Chromium's WebNN backends; the WebNN
    spec calls such indices invalid)."""

    ERROR = "error"
    ERROR_NONEMPTY = "error_nonempty"
    ZERO = "zero"
    CLAMP = "clamp"

    @classmethod
    def from_any(cls, value: "Mode | str") -> "Mode":
        """``value`` as a Mode.

        Args:
            value: a Mode, or one of the mode strings (``MODES``).

        Returns:
            The Mode.

        Raises:
            ValueError: ``value`` names no mode."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"mode must be one of {MODES}, got {value!r}") from None

    def __str__(self) -> str:
        return self.value

    @property
    def out_of_range(self) -> OutOfRange:
        """What an index out of range gives in this mode."""
        match self:
            case Mode.ERROR | Mode.ERROR_NONEMPTY:
                return OutOfRange.RAISE
            case Mode.ZERO:
                return OutOfRange.ZERO
            case Mode.CLAMP:
                return OutOfRange.CLAMP
            case _:
                assert_never(self)

    @property
    def checks_indices(self) -> bool:
        """Whether an index out of range raises (some output element reads it)."""
        return self.out_of_range is OutOfRange.RAISE

    @property
    def checks_when_empty(self) -> bool:
        """Whether the indices are checked when the output has no element (ORT's Gather: yes; GatherND: no)."""
        match self:
            case Mode.ERROR:
                return True
            case Mode.ERROR_NONEMPTY | Mode.ZERO | Mode.CLAMP:
                return False
            case _:
                assert_never(self)


MODES = tuple(mode.value for mode in Mode)  # the mode strings, in Mode's order
# The strings of the modes that check indices, for hot paths that hold a node's mode attribute as a str. Values,
# not members: a Mode hashes as its name, so ``Mode.ERROR in {"error"}`` is False (compare ``mode.value``).
CHECKING_MODE_VALUES = frozenset(mode.value for mode in Mode if mode.checks_indices)
# The kernel's per-call lookups, keyed by members and strings alike (a Mode and its string hash differently):
# what an out-of-range index gives, and the modes that skip every check when the output is empty.
OUT_OF_RANGE_OF: dict[Mode | str, OutOfRange] = {**{mode: mode.out_of_range for mode in Mode},
                                                **{mode.value: mode.out_of_range for mode in Mode}}
CHECKING_MODES = frozenset({*(m for m in Mode if m.checks_indices), *CHECKING_MODE_VALUES})
UNCHECKED_WHEN_EMPTY = frozenset(key for m in Mode if m.checks_indices and not m.checks_when_empty for key in (m, m.value))


class _Node(Protocol):
    @property
    def op_type(self) -> str: ...
    @property
    def domain(self) -> str: ...


def is_gather_multiaxis(node: _Node) -> bool:
    """Whether ``node`` is a GatherMultiaxis node (its op type in the op's domain)."""
    return node.op_type == OP_TYPE and node.domain == DOMAIN


class GatherShapeError(ValueError):
    """The shapes or axes given to gather_multiaxis do not satisfy its shape contract."""


class GatherIndexError(IndexError):
    """An index value lies outside the valid range of its axis (mode="error")."""


def shape_text(shape: Sequence[int | None]) -> str:
    """A shape as error messages write it."""
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def normalize_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """Axes as non-negative ints.

    Args:
        axes: dimensions of a tensor of rank ``rank``, each in ``[-rank, rank - 1]``, none twice.
        rank: the tensor's rank.

    Returns:
        The axes with negatives counted from the end, in the given order.

    Raises:
        GatherShapeError: an axis that is not an integer, out of range, or named twice."""
    if all(type(axis) is int and 0 <= axis < rank for axis in axes) and len(set(axes)) == len(axes):
        return tuple(axes)  # the common case, cheaply
    normalized = []
    for axis in axes:
        try:
            value = operator.index(axis)
        except TypeError:
            raise GatherShapeError(f"axes must be integers, got {axis!r}") from None
        if not -rank <= value < rank:
            raise GatherShapeError(
                f"axis {value} is out of range for rank {rank} (valid range [{-rank}, {rank - 1}])")
        value %= rank
        if value in normalized:
            raise GatherShapeError(f"axes {list(axes)} name dimension {value} more than once")
        normalized.append(value)
    return tuple(normalized)


# Known dims in, known dims out (a None only ever comes from a None): the overloads say so to type checkers.
@overload
def logical_indices_dims(indices_dims: Sequence[int], axes_count: int) -> list[int]: ...
@overload
def logical_indices_dims(indices_dims: Sequence[int | None], axes_count: int) -> list[int | None]: ...
def logical_indices_dims(indices_dims: Sequence[int | None], axes_count: int) -> list[int] | list[int | None]:
    """The indices' dims with each coordinate tuple folded (the last dim holds ``axes_count`` components each).

    Raises:
        GatherShapeError: the last dimension is known and not a multiple of ``axes_count``."""
    logical = list(indices_dims)
    if axes_count > 1 and logical and logical[-1] is not None:
        if logical[-1] % axes_count:
            raise GatherShapeError(
                f"the last indices dimension ({logical[-1]}) must be a multiple of len(axes)={axes_count}, "
                f"since each coordinate tuple is folded into it (indices shape {shape_text(indices_dims)})")
        logical[-1] //= axes_count
    return logical


@overload
def output_dims(input_dims: Sequence[int], indices_dims: Sequence[int], axes: Sequence[int]) -> list[int]: ...
@overload
def output_dims(input_dims: Sequence[int | None], indices_dims: Sequence[int | None],
                axes: Sequence[int]) -> list[int | None]: ...
def output_dims(input_dims: Sequence[int | None], indices_dims: Sequence[int | None],
                axes: Sequence[int]) -> list[int] | list[int | None]:
    """The shape rule: one rank; on an axis the logical indices' size; elsewhere the two sizes broadcast (equal,
    or one is 1). Unknown dims (None) give None unless the rule fixes the size anyway.

    Raises:
        GatherShapeError: the ranks differ, an axis is bad, or the known sizes break the rule."""
    input_dims, indices_dims = list(input_dims), list(indices_dims)
    rank = len(input_dims)
    if len(indices_dims) != rank:
        raise GatherShapeError(
            f"input rank {rank} and indices rank {len(indices_dims)} differ; gather_multiaxis needs "
            f"equal ranks (input shape {shape_text(input_dims)}, indices shape {shape_text(indices_dims)})")
    axes = normalize_axes(axes, rank)
    logical = logical_indices_dims(indices_dims, len(axes))
    output: list[int | None] = []
    for d, (size_in, size_idx) in enumerate(zip(input_dims, logical)):
        if d in axes:
            output.append(size_idx)
        elif size_idx == 1 or (size_in is not None and size_in == size_idx):
            output.append(size_in)
        elif size_in == 1:
            output.append(size_idx)
        elif size_in is not None and size_idx is not None:
            raise GatherShapeError(
                f"dimension {d} is not broadcastable: input size {size_in} vs logical indices size {size_idx} "
                f"(need equal sizes or one of them 1; input shape {shape_text(input_dims)}, "
                f"logical indices shape {shape_text(logical)}, axes {list(axes)})")
        else:  # one size unknown: the output has the input's size when it is known and not 1
            output.append(size_in)
    return output


__all__ = ["CHECKING_MODES", "CHECKING_MODE_VALUES", "DATA_TYPES", "DOMAIN", "INDEX_DTYPES", "INDEX_TYPES", "MODES", "OP_TYPE", "OUT_OF_RANGE_OF", "UNCHECKED_WHEN_EMPTY",
           "GatherIndexError", "GatherShapeError", "Mode", "OutOfRange", "is_gather_multiaxis", "logical_indices_dims",
           "normalize_axes", "output_dims", "shape_text"]
