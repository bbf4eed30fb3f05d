"""The op types of a ``gathermultiaxis.InferenceSession``'s in-memory model, never in a file: names, attribute
forms, bound tables. Beside the contract so the bind step needs no ORT runtime (``registration`` defines them)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto

from ..contract import CHECKING_MODE_VALUES, DATA_TYPES, DOMAIN, OP_TYPE, Mode

RUN_OP_TYPE = "GatherMultiaxisRun"
FIXED_RUN_OP_TYPE = "GatherMultiaxisRunFixedAxes"
NARROWING_RUN_OP_TYPE = "GatherMultiaxisRunFixedAxesToFloat16"  # float32 data holding float16 values
NARROWING_AXES_RUN_OP_TYPE = "GatherMultiaxisRunToFloat16"  # the same, axes an input (computed at run time)
BOUND_OP_PREFIX = "GatherMultiaxisBound"
# The rewrite's recorded gather (data and indices as the original read them), aligned per call by the op itself
RECORDED_OP_TYPE = "GatherMultiaxisRecorded"

# Output types a bound node may have beyond DATA_TYPES: float16 comes back through the bridge as it is.
BOUND_OUTPUT_TYPES = (*DATA_TYPES, TensorProto.FLOAT16)

# Bound gathers that share their indices, gathered in one call (one bridge crossing): GatherMultiaxisBoundGroup<Types>,
# one output per table, outputs sorted by type in GROUP_TYPES order. Each op type is registered with the bridge
# up front (a PyOp defined after the library was registered on some options crashes sessions made with them),
# and every registration slows each session's creation (~0.3 ms), so only the types of tree ensembles (float
# thresholds and values, int64 features and children) and at most GROUP_MAX tables a call: 12 signatures.
GROUP_OP_PREFIX = "GatherMultiaxisBoundGroup"
GROUP_TYPES = (TensorProto.FLOAT, TensorProto.INT64)
GROUP_MAX = 4


def bound_op_type(elem_type: int) -> str:
    """The op type of a bound gather with output type ``elem_type`` (one per type: no data input to pick from)."""
    return BOUND_OP_PREFIX + TensorProto.DataType.Name(elem_type).capitalize()


def group_op_type(elem_types) -> str:
    """The op type of a group with output types ``elem_types`` (sorted as GROUP_TYPES)."""
    return GROUP_OP_PREFIX + "".join(TensorProto.DataType.Name(t).capitalize() for t in elem_types)


def group_signatures() -> list[tuple[int, ...]]:
    """The output types of every group op type: each sorted choice of 2 to GROUP_MAX of GROUP_TYPES."""
    return [types for size in range(2, GROUP_MAX + 1)
            for types in itertools.combinations_with_replacement(GROUP_TYPES, size)]


def group_attributes(tables: list[str], slots: list[int]) -> dict[str, str]:
    """A group node's attributes: ``tables`` in graph order (so the first error is the ungrouped run's), table i
    into output ``slots[i]``."""
    return {"tables": ",".join(tables), "slots": ",".join(str(slot) for slot in slots)}


@functools.lru_cache(maxsize=256)
def parse_group(tables: str, slots: str) -> tuple[tuple[str, int], ...]:
    """The (table key, output slot) pairs of a group node's attributes, in the order they are gathered."""
    return tuple(zip(tables.split(","), (int(slot) for slot in slots.split(","))))


@functools.lru_cache(maxsize=256)
def parse_axes(text: str) -> tuple[int, ...]:
    """The ``axes`` attribute of a GatherMultiaxisRunFixedAxes node ("0,2"; "" for none), as ints."""
    return tuple(int(part) for part in text.split(",")) if text else ()


def axes_attribute(axes) -> str:
    """``axes`` as a GatherMultiaxisRunFixedAxes attribute (the bridge hands attributes over as strings)."""
    return ",".join(str(int(axis)) for axis in axes)


def recorded_attribute(op_type: str, attributes: dict[str, int]) -> str:
    """The ``gather`` attribute of a GatherMultiaxisRecorded node: "Gather;axis=1" (attributes sorted)."""
    return ";".join([op_type, *(f"{key}={int(value)}" for key, value in sorted(attributes.items()))])


@functools.lru_cache(maxsize=256)
def parse_recorded(text: str) -> tuple[str, dict[str, int]]:
    """The op type and integer attributes a ``gather`` attribute names (``recorded_attribute``'s inverse)."""
    op_type, *pairs = text.split(";")
    return op_type, {key: int(value) for key, value in (pair.split("=") for pair in pairs)}


def is_bridge_node(node) -> bool:
    """Whether ``node`` is one of the session's GatherMultiaxis op types (each crosses the PyOp bridge)."""
    return node.domain == DOMAIN and node.op_type.startswith(OP_TYPE)


@dataclass(frozen=True)
class BoundTable:
    """A constant data operand handed to the kernel once, parsed at bind time. ``widen``: "float16" or "bfloat16"
    when ``array`` holds raw 16-bit values gathered as is and widened to a float32 output, else None.
    ``indices_axes``: size-1 dims the node inserts into its indices (the alignment Unsqueeze, absorbed)."""

    array: np.ndarray
    widen: str | None = None
    axes: tuple[int, ...] = (0,)
    mode: str = Mode.ERROR.value
    indices_axes: tuple[int, ...] = ()
    take_table: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        # The embedding form (one axis a, the table of size 1 before it, the absorbed alignment adding the
        # indices' size-1 dimensions after it): the gather is ndarray.take of the raw indices along the
        # table's first real dimension, with no plan to look up.
        rank = self.array.ndim
        if (len(self.axes) == 1 and getattr(self.mode, "value", self.mode) in CHECKING_MODE_VALUES and -rank <= self.axes[0] < rank
                and self.array.dtype != object):
            axis = self.axes[0] % rank
            if all(size == 1 for size in self.array.shape[:axis]) and self.indices_axes == tuple(range(axis + 1, rank)):
                object.__setattr__(self, "take_table", self.array.reshape(self.array.shape[axis:]))

    def output_dtype(self) -> np.dtype:
        """The dtype of the node's output."""
        return np.dtype(np.float32) if self.widen else self.array.dtype

    def indices(self, indices: np.ndarray) -> np.ndarray:
        """The node's indices with the absorbed alignment applied."""
        return np.expand_dims(indices, self.indices_axes) if self.indices_axes else indices


__all__ = ["BOUND_OP_PREFIX", "BOUND_OUTPUT_TYPES", "FIXED_RUN_OP_TYPE", "GROUP_MAX", "GROUP_OP_PREFIX", "GROUP_TYPES",
           "NARROWING_AXES_RUN_OP_TYPE", "NARROWING_RUN_OP_TYPE", "RECORDED_OP_TYPE", "RUN_OP_TYPE", "BoundTable", "axes_attribute",
           "bound_op_type", "group_attributes", "group_op_type", "group_signatures", "is_bridge_node", "parse_axes",
           "parse_group", "parse_recorded", "recorded_attribute"]
