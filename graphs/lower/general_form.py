"""The general lowering of one GatherMultiaxis node with a static rank ``r`` and constant axes: flat offsets,
for the nodes no single standard gather computes. From opset 11 in every mode, from opset 7 in the mode that
feeds the raw indices (the others need Where and Less on int64). Sizes are read at run time (``Shape``):

1. Coordinates: for ``k > 1`` axes, ``I`` is reshaped to ``[*L, k]`` (``L`` the logical indices shape) and
   component ``j`` is ``Gather(.., j, axis=r)``; for ``k == 1`` it is ``I`` itself.
2. Each component is checked and normalised by ``Gather(Range(0, dim), c)``: ORT raises for any index out of
   ``[-dim, dim - 1]`` and counts negatives from the end. The mode only changes what is fed to it (the table
   in docs/lowering.md): the raw indices, zeros where the output is empty, clamped values, or values with the
   out-of-range ones set to 0 (and the mask kept). No invalid coordinate ever reaches the flat offset.
3. Flat offsets ``sum_j n_j * stride(axes[j]) + sum_{d not in axes} Range(0, out_d) * stride(d)`` (stride 0
   where ``X`` has size 1 and is broadcast); non-axis sizes that do not broadcast make a checking Gather raise.
4. The read: trailing dimensions copied whole are rows of ``Flatten(X, axis=block)``, one ``Gather(axis=0)``;
   strings and zeroing modes read single elements of ``X`` flattened (a zero element appended for the masked
   offsets). Where only what is read is checked, a row read sits in an ``If`` on the output being empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never, cast

import numpy as np
from onnx import NodeProto, TensorProto, helper

from ...ops.alignment import GATHER
from ...ops.contract import MODES, Mode, OutOfRange
from ..ranks.tensor_info import TensorInfo
from ..ir.walk import attribute
from .lowering_builder import LoweringBuilder

MIN_OPSET = 7        # "error" mode; the other modes need Where and Less on int64 (and Slice's inputs)
MODES_MIN_OPSET = 11


class NotLowered(Exception):
    """The node is kept as it is; the message says why."""


def feeds_raw_indices(mode: Mode) -> bool:
    """Whether every index is checked as it is (no Where, no Less): the mode checks even an empty output's."""
    return mode.checks_when_empty


def zeroes_out_of_range(mode: Mode) -> bool:
    """Whether an out-of-range read gives 0 (which needs the input's element type)."""
    return mode.out_of_range is OutOfRange.ZERO


def checks_only_when_read(mode: Mode) -> bool:
    """Whether the indices are checked only where the output has elements (ORT's GatherND)."""
    return mode.checks_indices and not mode.checks_when_empty


def node_mode(node: NodeProto) -> Mode:
    """The ``Mode`` of a GatherMultiaxis node; NotLowered where it has none or an unknown one."""
    mode = attribute(node, "mode", None)
    if mode is None:  # the schema and the custom op require it
        raise NotLowered(f"no 'mode' attribute (required: one of {', '.join(MODES)})")
    if mode not in MODES:
        raise NotLowered(f"unknown mode {mode!r} (modes: {', '.join(MODES)})")
    return Mode(mode)


def lowerable(node: NodeProto, data: TensorInfo, indices: TensorInfo, axes: list[int],
              opset: int) -> tuple[Mode, int, list[int]]:
    """The node's mode, rank and axes counted from the front, when some standard form of it exists at
    ``opset``; NotLowered with the reason otherwise."""
    mode = node_mode(node)
    if opset < MIN_OPSET or (not feeds_raw_indices(mode) and opset < MODES_MIN_OPSET):
        needed = MIN_OPSET if feeds_raw_indices(mode) else MODES_MIN_OPSET
        raise NotLowered(f"mode {mode.value!r} needs opset >= {needed} (the model's opset is {opset})")
    rank = data.rank if data.rank is not None else indices.rank
    if rank is None:
        raise NotLowered("the rank of the input and of the indices is not known")
    if indices.rank is not None and indices.rank != rank:
        raise NotLowered(f"input rank {rank} and indices rank {indices.rank} differ")
    if indices.elem_type not in (0, TensorProto.INT32, TensorProto.INT64):
        raise NotLowered(f"indices of type {TensorProto.DataType.Name(indices.elem_type)} (int32 or int64 only)")
    if len(set(a % rank for a in axes)) != len(axes) or any(not -rank <= a < rank for a in axes):
        raise NotLowered(f"axes {axes} are not unique axes of rank {rank}")
    if zeroes_out_of_range(mode) and not data.elem_type:
        raise NotLowered(f"mode {mode.value!r} needs the input's element type (for its zero), which is not known")
    return Mode(mode), rank, [a % rank for a in axes]


def lower_gather_multiaxis(node: NodeProto, data: TensorInfo, indices: TensorInfo, axes: list[int],
                           b: LoweringBuilder, narrow: tuple[str, int] | None = None) -> None:
    """Append the general replacement of ``node`` to ``b`` (the last node writes its output); NotLowered as
    ``lowerable``. ``narrow``: (name, float16/bfloat16 type) of the value the input is an exact Cast of,
    gathered instead, the gathered values widened."""
    mode, rank, axes = lowerable(node, data, indices, axes, b.opset)
    x, idx, output = node.input[0], node.input[1], node.output[0]
    if rank == 0:
        b.op("Identity", [x], "copy")
        b.rename_last_output(output)
        return
    widen = None
    if narrow is not None:
        x, widen = narrow[0], data.elem_type
        data = TensorInfo(narrow[1], data.shape)
    _Lowering(b, x, idx, rank, axes, mode, data, indices, widen).emit(output)
    b.drop_unread_constants(output)


def _static(info: TensorInfo) -> bool:
    return info.shape is not None and all(isinstance(d, int) for d in info.shape)


@dataclass
class _Lowering:
    b: LoweringBuilder
    x: str
    idx: str
    rank: int
    axes: list[int]
    mode: Mode
    data: TensorInfo
    indices: TensorInfo
    widen: int | None = None  # Cast the gathered values to this type (see lower_gather_multiaxis)

    def _static_logical(self, d: int) -> int | None:
        """The logical indices size of dimension d when known statically, else None."""
        shape = self.indices.shape
        size = None if shape is None else shape[d]
        if not isinstance(size, int):
            return None
        k = len(self.axes)
        return size // k if d == self.rank - 1 and k > 1 else size

    def _block_start(self) -> int:
        """First of the trailing dimensions read as whole blocks (see the module docstring, step 4).
        Gathered blocks ``[*out[:start], block]`` are reshaped to the output with ``allowzero`` (opset
        14); before, a 0 in Reshape's shape means "copy the input's size" (and ORT's optimizer rewrites
        such shapes wrongly for empty tensors), so blocks are then the last dimension alone, which
        needs no reshape."""
        if zeroes_out_of_range(self.mode) or self.data.elem_type in (TensorProto.STRING, 0) or self.b.opset < 9:
            return self.rank  # (Flatten-1 takes float types only)
        start = self.rank
        while start > 0 and start - 1 not in self.axes and self._static_logical(start - 1) == 1:
            start -= 1
        if self.b.opset < 14:
            start = max(start, self.rank - 1)
        return start

    def _shape(self, name: str, info: TensorInfo, role: str) -> str:
        """The shape of ``name``: a constant where static; where its rank is not known, a Reshape of it to the
        node's rank, which raises for another rank (the op requires the input's and the indices' ranks equal,
        and one known rank proves nothing of the other)."""
        b = self.b
        if _static(info):
            # cast: _static(info) is what makes info.shape a tuple of ints, which mypy cannot see through a call
            return b.constant(list(cast(tuple[int, ...], info.shape)), role)
        shape = b.op("Shape", [name], role)
        if info.shape is None:
            shape = b.op("Reshape", [shape, b.constant([self.rank], "rank")], role + "_of_rank")
        return shape

    def emit(self, output: str) -> None:
        """Append the replacement; the last node writes ``output``."""
        b, r = self.b, self.rank
        x_dim, logical, components = self._coordinates()
        out_dim = [logical[d] if d in self.axes else self._broadcast_dim(d, x_dim[d], logical[d]) for d in range(r)]
        block = self._block_start()
        strides = [b.constant([1], "one")] * block  # in elements of the flattened lead dims [0, block)
        for d in range(block - 2, -1, -1):
            strides[d] = b.op("Mul", [strides[d + 1], x_dim[d + 1]], f"stride{d}")
        empty = self._output_empty(out_dim)
        offsets, masks = self._axis_offsets(components, x_dim, strides, empty)
        offsets = self._grid_offsets(offsets, x_dim, out_dim, strides, block)
        if block < r:
            self._read_rows(offsets, out_dim, block, empty)
        else:
            self._read_elements(offsets, masks)
        if self.widen is not None:
            b.cast(b.nodes[-1].output[0], self.widen, "widened")
        b.rename_last_output(output)

    def _coordinates(self) -> tuple[list[str], list[str], list[str]]:
        """The input's sizes, the logical indices sizes and the k coordinate components (step 1)."""
        b, r, k = self.b, self.rank, len(self.axes)
        b.constant([1], "one")
        x_shape, i_shape = (self._shape(name, info, role) for name, info, role in (
            (self.x, self.data, "input_shape"), (self.idx, self.indices, "indices_shape")))
        x_dim = [b.op(GATHER, [x_shape, b.constant([d], f"d{d}")], f"input_dim{d}") for d in range(r)]
        i_dim = [b.op(GATHER, [i_shape, b.constant([d], f"d{d}")], f"indices_dim{d}") for d in range(r)]
        logical = list(i_dim)
        if k > 1:
            k_const = b.constant([k], "k")
            logical[-1] = self._tuples_of(i_dim[-1], k_const)
            tuples = b.op("Reshape", [self.idx, b.concat(logical + [k_const], "tuple_shape")], "tuples")
            components = [b.op(GATHER, [tuples, b.constant(j, f"component{j}")], f"coordinate{j}", axis=r)
                          for j in range(k)]
        else:
            components = [self.idx] * k
        return x_dim, logical, components

    def _output_empty(self, out_dim: list[str]) -> str | None:
        """Whether the output is empty, in the modes that check indices only when it is not."""
        b = self.b
        if not checks_only_when_read(self.mode):
            return None
        size = out_dim[0]
        for d in range(1, self.rank):
            size = b.op("Mul", [size, out_dim[d]], "output_size")
        return b.op("Equal", [b.scalar(size, "output_size_scalar"), b.constant(0, "zero_scalar")], "output_empty")

    def _axis_offsets(self, components: list[str], x_dim: list[str], strides: list[str],
                      empty: str | None) -> tuple[str, list[str]]:
        """The offsets' sum over the axes (steps 2 and 3), and the out-of-range masks of mode zero."""
        b, normalised, masks = self.b, [], []
        for j, (axis, component) in enumerate(zip(self.axes, components)):
            values, mask = self._checked(component, b.scalar(x_dim[axis], f"axis{axis}_size"), empty, j)
            normalised.append(b.op("Mul", [values, strides[axis]], f"axis{axis}_offset"))
            if mask is not None:
                masks.append(mask)
        offsets = b.constant(np.zeros([1] * self.rank, np.int64), "offsets_init")
        for term in normalised:
            offsets = b.op("Add", [offsets, term], "offsets")
        return offsets, masks

    def _grid_offsets(self, offsets: str, x_dim: list[str], out_dim: list[str], strides: list[str],
                      block: int) -> str:
        """``offsets`` plus the output positions of the dimensions not in the axes (step 3)."""
        b, r, one = self.b, self.rank, self.b.constant([1], "one")
        for d in range(block):  # the block dimensions [block, r) are read whole: no offsets
            if d in self.axes:
                continue
            positions = b.arange(b.scalar(out_dim[d], f"out{d}_scalar"), f"positions{d}")
            broadcast = b.op("Cast", [b.op("Not", [b.op("Equal", [x_dim[d], one], f"input_dim{d}_is_one")],
                                           f"input_dim{d}_not_one")], f"input_dim{d}_read", to=TensorProto.INT64)
            stride = b.op("Mul", [strides[d], broadcast], f"grid_stride{d}")  # 0 where the input broadcasts
            term = b.op("Mul", [positions, stride], f"grid{d}")
            shape = [1] * r
            shape[d] = -1
            offsets = b.op("Add", [offsets, b.op("Reshape", [term, b.constant(shape, f"grid{d}_shape")], f"grid{d}_aligned")],
                           "offsets")
        return offsets

    def _read_rows(self, offsets: str, out_dim: list[str], block: int, empty: str | None) -> None:
        """The read of whole trailing blocks, rows of ``Flatten(X, axis=block)`` (step 4)."""
        b, r = self.b, self.rank
        offsets = b.squeeze(offsets, list(range(block, r)), "row_offsets")
        rows = b.op("Flatten", [self.x], "input_rows", axis=block)
        out_shape = b.concat(out_dim, "output_shape") if block < r - 1 or empty is not None else None

        def read_rows():
            b.op(GATHER, [rows, offsets], "gathered_rows", axis=0)  # [*out[:block], block size]
            if block < r - 1:  # opset >= 14 here, see _block_start
                b.op("Reshape", [b.nodes[-1].output[0], out_shape], "output", allowzero=1)

        if empty is not None and self.axes:
            # An empty output may come from an empty block while an axis of size 0 (no rows) has
            # coordinates, so the rows are read only when the output is not empty.
            assert out_shape is not None  # made above whenever empty is
            self._unless_empty(empty, out_shape, read_rows)
        else:
            read_rows()

    def _read_elements(self, offsets: str, masks: list[str]) -> None:
        """The read of single elements of X flattened (step 4), masked ones from an appended zero."""
        b = self.b
        if b.opset >= 9:
            flat = b.op("Reshape", [b.op("Flatten", [self.x], "input_flat_2d", axis=0),
                                    b.constant([-1], "minus_one")], "input_flat")
        else:  # Flatten-1 takes float types only
            flat = b.op("Reshape", [self.x, b.constant([-1], "minus_one")], "input_flat")
        if masks:
            mask = masks[0]
            for other in masks[1:]:
                mask = b.op("Or", [mask, other], "out_of_range")
            size = b.op("Shape", [flat], "input_size")
            flat = b.op("Concat", [flat, b.typed_zero(self.data.elem_type, "zero_element")], "input_with_zero", axis=0)
            offsets = b.op("Where", [mask, b.scalar(size, "zero_element_offset"), offsets], "offsets_masked")
        b.op(GATHER, [flat, offsets], "output", axis=0)

    def _unless_empty(self, empty: str, out_shape: str, read) -> None:
        """If(empty): an empty output of shape ``out_shape``, read from nothing; else what ``read`` emits.
        Where the sizes are static, ``empty`` is a folded constant and only its branch is emitted."""
        b = self.b
        known = b.constant_value(empty)
        if known is not None and not bool(known):
            read()
            return
        minus_one, outer = b.constant([-1], "minus_one"), b.nodes  # (constants made out here, visible in both)
        b.nodes = []
        flat = b.op("Reshape", [b.op("Flatten", [self.x], "input_flat_2d", axis=0), minus_one], "input_flat")
        no_offsets = b.op("ConstantOfShape", [out_shape], "no_offsets",
                          value=helper.make_tensor("", TensorProto.INT64, [1], [0]))
        b.op(GATHER, [flat, no_offsets], "empty_output", axis=0)
        then_nodes, b.nodes = b.nodes, []
        read()
        else_nodes, b.nodes = b.nodes, outer

        def branch(nodes, role):
            value = helper.make_tensor_value_info(nodes[-1].output[0], self.data.elem_type, None)
            return helper.make_graph(nodes, b.names.fresh(f"{b.prefix}/{role}"), [], [value])

        b.op("If", [empty], "output", then_branch=branch(then_nodes, "if_empty"),
             else_branch=branch(else_nodes, "if_read"))

    def _tuples_of(self, last: str, k: str) -> str:
        """How many tuples of ``k`` components the last indices dimension holds; a remainder makes a Gather with
        index 1 on a 1-element tensor raise, as the op does (even for an empty output)."""
        b = self.b
        count = b.op("Div", [last, k], "logical_last_unchecked")
        exact = b.op("Equal", [b.op("Mul", [count, k], "tuples_size"), last], "tuples_fill_last")
        bad = b.op("Cast", [b.op("Not", [exact], "tuples_remainder")], "tuples_check_index", to=TensorProto.INT64)
        return b.op(GATHER, [count, bad], "logical_last", axis=0)

    def _broadcast_dim(self, d: int, x_dim: str, l_dim: str) -> str:
        """The output size of non-axis dimension d: the broadcast of the input and logical indices sizes;
        sizes that do not broadcast make a Gather with index 1 on a 1-element tensor raise."""
        b = self.b
        if self._static_logical(d) == 1:
            return x_dim
        one = b.constant([1], "one")
        l_is_one = b.op("Equal", [l_dim, one], f"indices_dim{d}_is_one")
        size = b.op("Add", [l_dim, b.op("Mul", [b.op("Sub", [x_dim, l_dim], f"dim{d}_difference"),
                                                b.op("Cast", [l_is_one], f"indices_dim{d}_one", to=TensorProto.INT64)],
                                         f"dim{d}_from_input")], f"out_dim{d}_unchecked")
        ok = b.op("Or", [b.op("Or", [l_is_one, b.op("Equal", [x_dim, one], f"input_dim{d}_is_one")], f"dim{d}_one"),
                         b.op("Equal", [x_dim, l_dim], f"dim{d}_equal")], f"dim{d}_broadcasts")
        bad = b.op("Cast", [b.op("Not", [ok], f"dim{d}_not_broadcastable")], f"dim{d}_check_index", to=TensorProto.INT64)
        return b.op(GATHER, [size, bad], f"out_dim{d}_checked_broadcast", axis=0)

    def _checked(self, component: str, dim: str, empty: str | None, j: int) -> tuple[str, str | None]:
        """The component's values checked and normalised by Gather(Range(0, dim), prepared), and in mode
        "zero" the mask of out-of-range positions."""
        b, zero, mask = self.b, self.b.constant(0, "zero_scalar"), None
        if feeds_raw_indices(self.mode):
            prepared = component
        else:
            values = component if self.indices.elem_type == TensorProto.INT64 else \
                b.op("Cast", [component], f"coordinate{j}_int64", to=TensorProto.INT64)
            match self.mode.out_of_range:
                case OutOfRange.RAISE:  # an empty output reads nothing, so nothing is checked
                    assert empty is not None  # emit makes it in this mode
                    # values * (output not empty), not Where: ORT's Where with a scalar condition is ~100x slower
                    read = b.op("Cast", [b.op("Not", [empty], "output_not_empty")], "read_factor", to=TensorProto.INT64)
                    prepared = b.op("Mul", [values, read], f"coordinate{j}_if_read")
                    dim = b.op("Where", [empty, b.constant(1, "one_scalar"), dim], f"axis_size{j}_if_read")
                case OutOfRange.CLAMP:
                    values, below, in_range_above = self._counted(values, dim, j)
                    last = b.op("Sub", [dim, b.constant(1, "one_scalar")], f"axis_last{j}")
                    prepared = b.op("Where", [below, zero, b.op(
                        "Where", [in_range_above, values, last], f"coordinate{j}_clamped_high")], f"coordinate{j}_clamped")
                case OutOfRange.ZERO:
                    values, below, in_range_above = self._counted(values, dim, j)
                    mask = b.op("Or", [below, b.op("Not", [in_range_above], f"coordinate{j}_above")], f"coordinate{j}_out_of_range")
                    prepared = b.op("Where", [mask, zero, values], f"coordinate{j}_masked")
                case _:
                    assert_never(self.mode.out_of_range)
        valid = b.arange(dim, f"axis_positions{j}")
        return b.op(GATHER, [valid, prepared], f"coordinate{j}_checked", axis=0), mask

    def _counted(self, values: str, dim: str, j: int) -> tuple[str, str, str]:
        """Negative values counted from the end, and whether each is below 0 and below ``dim``."""
        b, zero = self.b, self.b.constant(0, "zero_scalar")
        negative = b.op("Less", [values, zero], f"coordinate{j}_negative")
        values = b.op("Where", [negative, b.op("Add", [values, dim], f"coordinate{j}_from_end"), values],
                      f"coordinate{j}_counted")
        below = b.op("Less", [values, zero], f"coordinate{j}_below")
        return values, below, b.op("Less", [values, dim], f"coordinate{j}_below_size")


__all__ = ["MIN_OPSET", "MODES_MIN_OPSET", "NotLowered", "checks_only_when_read", "feeds_raw_indices", "zeroes_out_of_range",
           "lower_gather_multiaxis", "lowerable", "node_mode"]
