"""The general lowering of one GatherMultiaxis node: the flat-offset decomposition, for the nodes that no
single standard gather computes (``graphs.lower`` tries those forms first; this is the last resort). In
the model's own default opset:
from opset 11 in every mode, from opset 7 in mode "error" (the others need Where and Less on int64).

For ``output = GatherMultiaxis(X, I, axes, mode)`` with rank ``r`` (static) and constant ``axes`` (``k``
of them), all sizes are read at run time (``Shape``), so symbolic dimensions need nothing static:

1. Coordinates: for ``k > 1``, ``I`` is reshaped to ``[*L, k]`` (``L`` the logical indices shape) and
   component ``j`` is ``Gather(.., j, axis=r)``; for ``k == 1`` it is ``I`` itself.
2. Each component is checked and normalised by ``Gather(Range(0, dim), c)`` on a 1-D int64 range
   (before opset 11: ``NonZero`` of ``dim`` True values from opset 9, a ``Loop``'s iteration numbers before):
   ORT raises for any index out of ``[-dim, dim - 1]`` (for every value, whatever the output size) and
   returns negatives counted from the end. The modes only change what is fed to it (table in docs/lowering.md):
   "error" the raw indices; "error_nonempty" zeros (and a range of 1) when the output is empty, the raw
   indices otherwise; "clamp" the clamped values; "zero" the values with out-of-range ones set to 0,
   the out-of-range mask kept. On an axis of size 0 the range is empty, so any coordinate raises,
   as the kernel's GatherShapeError does. No invalid coordinate ever reaches the flat offset.
3. Flat offsets ``sum_j n_j * stride(axes[j]) + sum_{d not in axes} Range(0, out_d) * stride(d)``
   (stride 0 where ``X`` has size 1 and is broadcast), added with ONNX broadcasting into the output
   shape; a non-axis dimension whose sizes do not broadcast makes a checking Gather raise.
4. The read: trailing dimensions copied whole (not in ``axes``, indices size 1 statically) are read as
   rows of ``Flatten(X, axis=block)`` by one ``Gather(axis=0)``, as the kernel does; everything else
   (strings always: ORT 1.31's string Gather is wrong for blocks of more than one element; "zero"
   mode always) is read by ``Gather`` on ``X`` flattened to 1-D, one element per offset. In "zero"
   mode the flat input gets one zero element appended, and masked offsets point at it. In
   "error_nonempty" mode a row read sits in an ``If`` on the output being empty (an axis of size 0
   has no rows to read even where its coordinates were not checked).

Models keep their IR version, opset imports (``ai.onnx.contrib`` is dropped when nothing uses it),
inputs, outputs, initializers and value_info; functions holding a GatherMultiaxis are inlined first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import onnx
from onnx import NodeProto, TensorProto, helper, numpy_helper

from ..ops.contract import MODES, Mode
from .ir.builder import INT64_MAX, NodeBuilder
from .inference import TensorInfo
from .ir.walk import attribute, nodes_within

MIN_OPSET = 7        # "error" mode; the other modes need Where and Less on int64 (and Slice's inputs)
MODES_MIN_OPSET = 11


class NotLowered(Exception):
    """The node is kept as it is; the message says why."""


# The shape-arithmetic ops the builder evaluates itself when every input is a constant it emitted (from
# opset 9, where a Constant holds any type): a static size never becomes a node that computes it.
FOLDED_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Neg", "Min", "Max", "Equal", "Less", "Greater", "Not", "And",
                        "Or", "Where", "Cast", "Concat", "Gather", "Reshape", "Squeeze", "Unsqueeze", "Range",
                        "ReduceProd", "ReduceSum", "ConstantOfShape", "Shape"})
FOLD_MAX_ELEMENTS = 1 << 16  # larger results (a Range over a big dimension) stay nodes


class LoweringBuilder(NodeBuilder):
    """NodeBuilder plus the generic ops the lowering needs. Equal int64 constants are emitted once, and
    ops on constants only are folded (``FOLDED_OPS``) by onnx's reference evaluator."""

    def _values(self) -> dict[str, np.ndarray]:
        return self.__dict__.setdefault("_known", {})

    def constant_value(self, name: str) -> np.ndarray | None:
        """The value of ``name`` where it is a constant this builder emitted or folded.

        Args:
            name: a tensor's name.

        Returns:
            Its value, or None when it is not such a constant.
        """
        return self._values().get(name)

    def constant(self, values, role: str) -> str:
        """An int64 constant, emitted once per value (the same values give the same name).

        Args:
            values: the values (anything ``np.asarray`` takes).
            role: what the value is, for its name.

        Returns:
            The constant's name.
        """
        array = np.asarray(values, dtype=np.int64)
        cache = self.__dict__.setdefault("_constants", {})
        key = (array.shape, array.tobytes())
        if key not in cache:
            cache[key] = super().constant(array, role)
            self._values()[cache[key]] = array
        return cache[key]

    def drop_unread_constants(self, output: str) -> None:
        """Remove the Constant nodes that folding left unread (nothing here, in a subgraph included, reads
        them, and they are not ``output``).

        Args:
            output: the replacement's output, kept even when it is such a constant.
        """
        while True:
            read = {name for node in nodes_within(self.nodes) for name in node.input} | {output}
            unread = [node for node in self.nodes if node.op_type == "Constant" and node.output[0] not in read]
            if not unread:
                return
            for node in unread:
                self.nodes.remove(node)

    def _emit(self, op_type: str, inputs: list[str], role: str, **attributes) -> str:
        values = self._values()
        if op_type in FOLDED_OPS and self.opset >= 9 and inputs and all(i in values for i in inputs if i):
            folded = self._fold(op_type, inputs, attributes)
            if folded is not None:
                name = self.tensor(folded, role)
                values[name] = folded
                return name
        return super()._emit(op_type, inputs, role, **attributes)

    def op(self, op_type: str, inputs: list[str], role: str, **attributes) -> str:
        """Any standard op with one output; folded into a constant (onnx's reference evaluator) where every
        input is a constant of this builder and the op is one of ``FOLDED_OPS`` (opset 9 on).

        Args:
            op_type: the op type (default domain).
            inputs: input names.
            role: what the value is, for its name.
            **attributes: the node's attributes.

        Returns:
            The name of the output (a constant's where it was folded).
        """
        return self._emit(op_type, inputs, role, **attributes)

    def _fold(self, op_type: str, inputs: list[str], attributes: dict) -> np.ndarray | None:
        from onnx.reference import ReferenceEvaluator  # only the general form folds: imported when it does

        values = self._values()
        node = helper.make_node(op_type, list(inputs), ["folded"], **attributes)
        initializers = [numpy_helper.from_array(values[name], name) for name in dict.fromkeys(i for i in inputs if i)]
        graph = helper.make_graph([node], "fold", [], [helper.make_value_info("folded", onnx.TypeProto())],
                                  initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            (result,) = ReferenceEvaluator(model).run(None, {})
        except Exception:  # noqa: BLE001 - not foldable here (e.g. an error ORT must raise at run time)
            return None
        result = np.asarray(result)
        return result if result.size <= FOLD_MAX_ELEMENTS and result.dtype != object else None

    def typed_zero(self, elem_type: int, role: str) -> str:
        """A 1-element tensor holding 0 / False / "" of ``elem_type``.

        Args:
            elem_type: the ONNX element type.
            role: what the value is, for its name.

        Returns:
            The constant's name.
        """
        if elem_type == TensorProto.STRING:
            # onnx's annotation of vals lists numbers only; a STRING tensor's values are bytes
            tensor = helper.make_tensor("", TensorProto.STRING, [1], [b""])  # type: ignore[list-item]
        elif elem_type == TensorProto.BFLOAT16:
            tensor = helper.make_tensor("", TensorProto.BFLOAT16, [1], [0.0])
        else:
            tensor = numpy_helper.from_array(np.zeros(1, helper.tensor_dtype_to_np_dtype(elem_type)), name="")
        return self._emit("Constant", [], role, value=tensor)

    def arange(self, n: str, role: str) -> str:
        """[0, 1, ..., n - 1] (int64) for a scalar ``n``: Range from opset 11, NonZero of n True values
        from 9, the iteration numbers of a Loop before.

        Args:
            n: the name of an int64 scalar.
            role: what the value is, for its name.

        Returns:
            The name of the 1-D int64 range.
        """
        if self.opset >= 11:
            return self.op("Range", [self.constant(0, "zero_scalar"), n, self.constant(1, "one_scalar")], role)
        if self.opset >= 9:
            trues = self.op("ConstantOfShape", [self.op("Reshape", [n, self.constant([1], role + "_1d")], role + "_n")],
                            role + "_true", value=helper.make_tensor("", TensorProto.BOOL, [1], [True]))
            return self.squeeze(self.op("NonZero", [trues], role + "_positions"), [0], role)
        iteration, condition, carried = (self.names.fresh(f"{self.prefix}/{role}_{part}") for part in
                                         ("iteration", "condition", "carried"))
        condition_out, carried_out, scanned = (self.names.fresh(f"{self.prefix}/{role}_{part}") for part in
                                               ("condition_out", "carried_out", "position"))
        body = helper.make_graph(
            [helper.make_node("Identity", [condition], [condition_out]), helper.make_node("Identity", [carried], [carried_out]),
             helper.make_node("Identity", [iteration], [scanned])], f"{self.prefix}/{role}_body",
            [helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
             helper.make_tensor_value_info(condition, TensorProto.BOOL, []),
             helper.make_tensor_value_info(carried, TensorProto.INT64, [])],
            [helper.make_tensor_value_info(condition_out, TensorProto.BOOL, []),
             helper.make_tensor_value_info(carried_out, TensorProto.INT64, []),
             helper.make_tensor_value_info(scanned, TensorProto.INT64, [])])
        unused, output = self.names.fresh(f"{self.prefix}/{role}_unused"), self.names.fresh(f"{self.prefix}/{role}")
        self.nodes.append(helper.make_node("Loop", [n, "", self.constant(0, "zero_scalar")], [unused, output],
                                           name=output, body=body))  # Loop-1 needs a loop-carried value
        return output

    def tensor(self, array: np.ndarray, role: str) -> str:
        """A Constant of ``array``'s own element type (opset 9 on).

        Args:
            array: the value.
            role: what the value is, for its name.

        Returns:
            The constant's name.
        """
        return self._emit("Constant", [], role, value=numpy_helper.from_array(np.asarray(array), name=""))

    def reduce(self, op_type: str, x: str, axes: list[int] | None, role: str) -> str:
        """``op_type`` over ``axes`` (None: all of them), keepdims 0; axes are an input of ReduceSum from
        opset 13 and of the other reductions from 18.

        Args:
            op_type: ReduceSum, ReduceProd, ReduceMin, ...
            x: the tensor's name.
            axes: the reduced axes, or None for all.
            role: what the value is, for its name.

        Returns:
            The name of the output.
        """
        if axes is None:
            return self.op(op_type, [x], role, keepdims=0)
        if self.opset >= (13 if op_type == "ReduceSum" else 18):
            return self.op(op_type, [x, self.constant(axes, role + "_axes")], role, keepdims=0)
        return self.op(op_type, [x], role, axes=axes, keepdims=0)

    def scalar(self, x: str, role: str) -> str:
        """``x`` (one element) reshaped to a scalar.

        Args:
            x: the tensor's name.
            role: what the value is, for its name.

        Returns:
            The name of the scalar.
        """
        return self.op("Reshape", [x, self.constant(np.zeros(0, np.int64), role + "_shape")], role)



def node_mode(node: NodeProto) -> Mode:
    """The mode of a GatherMultiaxis node, for the lowerings.

    Args:
        node: a GatherMultiaxis node.

    Returns:
        Its ``Mode``.

    Raises:
        NotLowered: the node has no mode, or one that is none of ``MODES`` (bytes that are not UTF-8 included).
    """
    mode = attribute(node, "mode", None)
    if mode is None:  # the schema and the custom op require it
        raise NotLowered(f"no 'mode' attribute (required: one of {', '.join(MODES)})")
    if mode not in MODES:
        raise NotLowered(f"unknown mode {mode!r} (modes: {', '.join(MODES)})")
    return Mode(mode)


def lowerable(node: NodeProto, data: TensorInfo, indices: TensorInfo, axes: list[int],
              opset: int) -> tuple[Mode, int, list[int]]:
    """The node's mode, rank and non-negative axes, when some standard form of it exists at ``opset``;
    raises NotLowered with the reason otherwise.

    Args:
        node: a GatherMultiaxis node.
        data: what is known of its input.
        indices: what is known of its indices.
        axes: its axes, as the axes constant holds them.
        opset: the model's default-domain opset.

    Returns:
        The mode, the rank, and the axes counted from the front.

    Raises:
        NotLowered: no mode, an unknown mode, an opset too old for the mode, unknown or differing ranks,
            indices neither int32 nor int64, axes that are not unique axes of the rank, or mode zero with the
            input's element type unknown.
    """
    mode = node_mode(node)
    if opset < MIN_OPSET or (mode != Mode.ERROR and opset < MODES_MIN_OPSET):
        needed = MIN_OPSET if mode == Mode.ERROR else MODES_MIN_OPSET
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
    if mode == Mode.ZERO and not data.elem_type:
        raise NotLowered("mode 'zero' needs the input's element type (for its zero), which is not known")
    return Mode(mode), rank, [a % rank for a in axes]


def lower_gather_multiaxis(node: NodeProto, data: TensorInfo, indices: TensorInfo, axes: list[int],
                           b: LoweringBuilder, narrow: tuple[str, int] | None = None) -> None:
    """Append the general standard-ONNX replacement of one GatherMultiaxis node to ``b``; raises
    NotLowered. ``narrow``: a tensor of the input's shape and a narrower float type (float16 /
    bfloat16) that the input is an exact Cast of; it is gathered instead and the (few) gathered values
    are widened.

    Args:
        node: the GatherMultiaxis node.
        data: what is known of its input.
        indices: what is known of its indices.
        axes: its axes (a constant).
        b: where the nodes go; the last writes the node's output.
        narrow: (tensor name, element type) of the narrow input, or None.

    Raises:
        NotLowered: see ``lowerable``.
    """
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
    mode: str
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
        if self.mode == Mode.ZERO or self.data.elem_type in (TensorProto.STRING, 0) or self.b.opset < 9:
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
        b, r, k = self.b, self.rank, len(self.axes)
        one = b.constant([1], "one")
        x_shape, i_shape = (self._shape(name, info, role) for name, info, role in (
            (self.x, self.data, "input_shape"), (self.idx, self.indices, "indices_shape")))
        x_dim = [b.op("Gather", [x_shape, b.constant([d], f"d{d}")], f"input_dim{d}") for d in range(r)]
        i_dim = [b.op("Gather", [i_shape, b.constant([d], f"d{d}")], f"indices_dim{d}") for d in range(r)]
        logical = list(i_dim)
        if k > 1:
            k_const = b.constant([k], "k")
            logical[-1] = self._tuples_of(i_dim[-1], k_const)
            tuples = b.op("Reshape", [self.idx, b.concat(logical + [k_const], "tuple_shape")], "tuples")
            components = [b.op("Gather", [tuples, b.constant(j, f"component{j}")], f"coordinate{j}", axis=r)
                          for j in range(k)]
        else:
            components = [self.idx] * k

        out_dim = [logical[d] if d in self.axes else self._broadcast_dim(d, x_dim[d], logical[d]) for d in range(r)]
        block = self._block_start()
        strides = [one] * block  # in elements of the flattened lead dims [0, block)
        for d in range(block - 2, -1, -1):
            strides[d] = b.op("Mul", [strides[d + 1], x_dim[d + 1]], f"stride{d}")

        normalised, masks = [], []
        empty = None
        if self.mode == Mode.ERROR_NONEMPTY:
            size = out_dim[0]
            for d in range(1, r):
                size = b.op("Mul", [size, out_dim[d]], "output_size")
            empty = b.op("Equal", [b.scalar(size, "output_size_scalar"), b.constant(0, "zero_scalar")], "output_empty")
        for j, (axis, component) in enumerate(zip(self.axes, components)):
            values, mask = self._checked(component, b.scalar(x_dim[axis], f"axis{axis}_size"), empty, j)
            normalised.append(b.op("Mul", [values, strides[axis]], f"axis{axis}_offset"))
            if mask is not None:
                masks.append(mask)

        offsets = b.constant(np.zeros([1] * r, np.int64), "offsets_init")
        for term in normalised:
            offsets = b.op("Add", [offsets, term], "offsets")
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
        if block < r:
            offsets = b.squeeze(offsets, list(range(block, r)), "row_offsets")
            rows = b.op("Flatten", [self.x], "input_rows", axis=block)
            out_shape = b.concat(out_dim, "output_shape") if block < r - 1 or empty is not None else None

            def read_rows():
                b.op("Gather", [rows, offsets], "gathered_rows", axis=0)  # [*out[:block], block size]
                if block < r - 1:  # opset >= 14 here, see _block_start
                    b.op("Reshape", [b.nodes[-1].output[0], out_shape], "output", allowzero=1)

            if empty is not None and k:
                # An empty output may come from an empty block while an axis of size 0 (no rows) has
                # coordinates, so the rows are read only when the output is not empty.
                assert out_shape is not None  # made above whenever empty is
                self._unless_empty(empty, out_shape, read_rows)
            else:
                read_rows()
        else:
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
            b.op("Gather", [flat, offsets], "output", axis=0)
        if self.widen is not None:
            b.cast(b.nodes[-1].output[0], self.widen, "widened")
        b.rename_last_output(output)

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
        b.op("Gather", [flat, no_offsets], "empty_output", axis=0)
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
        return b.op("Gather", [count, bad], "logical_last", axis=0)

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
        return b.op("Gather", [size, bad], f"out_dim{d}_checked_broadcast", axis=0)

    def _checked(self, component: str, dim: str, empty: str | None, j: int) -> tuple[str, str | None]:
        """The component's values checked and normalised by Gather(Range(0, dim), prepared), and in mode
        "zero" the mask of out-of-range positions."""
        b, mode = self.b, self.mode
        zero, mask = b.constant(0, "zero_scalar"), None
        if mode == Mode.ERROR:
            prepared = component
        else:
            values = component if self.indices.elem_type == TensorProto.INT64 else \
                b.op("Cast", [component], f"coordinate{j}_int64", to=TensorProto.INT64)
            if mode == Mode.ERROR_NONEMPTY:  # an empty output reads nothing, so nothing is checked
                assert empty is not None  # emit makes it in this mode
                # values * (output not empty), not Where: ORT's Where with a scalar condition is ~100x slower
                read = b.op("Cast", [b.op("Not", [empty], "output_not_empty")], "read_factor", to=TensorProto.INT64)
                prepared = b.op("Mul", [values, read], f"coordinate{j}_if_read")
                dim = b.op("Where", [empty, b.constant(1, "one_scalar"), dim], f"axis_size{j}_if_read")
            else:
                negative = b.op("Less", [values, zero], f"coordinate{j}_negative")
                values = b.op("Where", [negative, b.op("Add", [values, dim], f"coordinate{j}_from_end"), values],
                              f"coordinate{j}_counted")
                below = b.op("Less", [values, zero], f"coordinate{j}_below")
                in_range_above = b.op("Less", [values, dim], f"coordinate{j}_below_size")
                if mode == Mode.CLAMP:
                    last = b.op("Sub", [dim, b.constant(1, "one_scalar")], f"axis_last{j}")
                    prepared = b.op("Where", [below, zero, b.op("Where", [in_range_above, values, last],
                                                                 f"coordinate{j}_clamped_high")], f"coordinate{j}_clamped")
                else:  # zero
                    mask = b.op("Or", [below, b.op("Not", [in_range_above], f"coordinate{j}_above")], f"coordinate{j}_out_of_range")
                    prepared = b.op("Where", [mask, zero, values], f"coordinate{j}_masked")
        valid = b.arange(dim, f"axis_positions{j}")
        return b.op("Gather", [valid, prepared], f"coordinate{j}_checked", axis=0), mask


RUN_TIME_MIN_OPSET = 11  # Range; Where/Less on int64 (9), Mod (10)
RUN_TIME_MODES = (Mode.ERROR, Mode.ERROR_NONEMPTY)  # the modes the rewriter's run-time alignment writes


def _suffix_products(b: LoweringBuilder, shape: str, dims: str, role: str) -> str:
    """Row-major strides of a shape of run-time rank: ``prod(shape[d+1:])`` for every d, as the product
    of the rows of an [r, r] matrix holding ``shape[e]`` where e > d and 1 elsewhere."""
    later = b.op("Greater", [b.unsqueeze(dims, [0], role + "_columns"), b.unsqueeze(dims, [1], role + "_rows")],
                 role + "_later")
    factors = b.op("Where", [later, b.unsqueeze(shape, [0], role + "_row"), b.constant([1], "one")], role + "_factors")
    return b.reduce("ReduceProd", factors, [1], role)


def _raise_if(b: LoweringBuilder, count: str, role: str) -> str:
    """A scalar 0 that cannot be computed when the int64 scalar ``count`` is not 0: ``Gather([0], count > 0)``
    raises ORT's out-of-bounds error. Added into the offsets, so that it is always run."""
    index = b.op("Cast", [b.op("Greater", [count, b.constant(0, "zero_scalar")], role + "_any")], role + "_index",
                 to=TensorProto.INT64)
    return b.op("Gather", [b.constant([0], "zero"), index], role, axis=0)


def lower_gather_multiaxis_at_run_time(node: NodeProto, elem_type: int, b: LoweringBuilder,
                                       narrow: tuple[str, int] | None = None) -> None:
    """Append a replacement that needs neither ranks nor axes statically (see the module docstring's
    last section); raises NotLowered. Every output element is read on its own: its output coordinates
    come from its flat position (Div/Mod by the output strides), its input offset is the sum of the
    gathered coordinates on the axes and the output coordinates elsewhere (0 where the input has size 1),
    each times the input's stride. Every coordinate is checked as in ``_Lowering._checked`` (all of
    them in "error" mode, none when the output is empty in "error_nonempty"), and so are the sizes of
    the non-axis dimensions (they broadcast).

    Args:
        node: the GatherMultiaxis node (its axes are an input computed at run time).
        elem_type: the input's element type.
        b: where the nodes go; the last writes the node's output.
        narrow: as ``lower_gather_multiaxis``'s: the float16/bfloat16 value the input is an exact Cast of,
            gathered instead (the gathered values are widened).

    Raises:
        NotLowered: no mode, a mode other than ``RUN_TIME_MODES``, or an opset below ``RUN_TIME_MIN_OPSET``.
    """
    mode = attribute(node, "mode", None)
    if mode is None:
        raise NotLowered(f"no 'mode' attribute (required: one of {', '.join(MODES)})")
    if mode not in RUN_TIME_MODES:
        raise NotLowered(f"mode {mode!r} with axes or ranks known only at run time (lowered: modes "
                         f"{', '.join(RUN_TIME_MODES)})")
    if b.opset < RUN_TIME_MIN_OPSET:
        raise NotLowered(f"axes or ranks known only at run time need opset >= {RUN_TIME_MIN_OPSET} "
                         f"(the model's opset is {b.opset})")
    if b.opset < 14 and not elem_type:
        raise NotLowered("below opset 14 the lowering of run-time ranks needs the input's element type (for an If), "
                         "which is not known")
    x, idx, output = node.input[0], node.input[1], node.output[0]
    widen = None
    if narrow is not None:
        x, widen, elem_type = narrow[0], elem_type, narrow[1]
    one_vector, int64 = b.constant([1], "one"), TensorProto.INT64
    x_shape, i_shape = b.op("Shape", [x], "input_shape"), b.op("Shape", [idx], "indices_shape")
    # the op requires equal ranks: the indices' shape reshaped to the input's rank raises for another rank
    i_shape = b.op("Reshape", [i_shape, b.op("Shape", [x_shape], "rank_1d")], "indices_shape_of_rank")
    dims = b.arange(b.length(x_shape, "rank"), "dimensions")
    # GatherElements(Range(0, r), axes) counts negative axes from the end and refuses out-of-range ones. Not
    # Gather: axes that are a Range's output (the rewrite's run-time GatherND alignment) would meet ORT's
    # GatherToSliceFusion, whose Slice clamps an out-of-range axis instead of refusing it.
    axes = b.op("GatherElements", [dims, b.cast(node.input[2], int64, "axes_int64")], "axes", axis=0)
    k = b.length(axes, "k")
    k_is_zero = b.op("Cast", [b.op("Equal", [k, b.constant(0, "zero_scalar")], "k_is_zero")], "k_is_zero_01", to=int64)
    tuple_size = b.unsqueeze(b.op("Add", [k, k_is_zero], "tuple_size_scalar"), [0], "tuple_size")  # max(k, 1)
    i_last = b.slice(i_shape, b.constant([-1], "minus_one"), b.constant([INT64_MAX], "to_end"), b.constant([0], "zero"),
                     "indices_last")
    i_head = b.slice(i_shape, b.constant([0], "zero"), b.constant([-1], "minus_one"), b.constant([0], "zero"),
                     "indices_head")
    logical = b.op("Concat", [i_head, b.op("Div", [i_last, tuple_size], "logical_last")], "logical_shape", axis=0)

    on_axis = b.op("Cast", [b.reduce("ReduceSum", b.op("Cast", [b.op("Equal", [
        b.unsqueeze(dims, [1], "dimension_column"), b.unsqueeze(axes, [0], "axes_row")], "is_axis_matrix")],
        "is_axis_matrix_01", to=int64), [1], "is_axis_01")], "is_axis", to=TensorProto.BOOL)
    l_is_one = b.op("Equal", [logical, one_vector], "logical_is_one")
    x_is_one = b.op("Equal", [x_shape, one_vector], "input_is_one")
    broadcast = b.op("Add", [logical, b.op("Mul", [b.op("Sub", [x_shape, logical], "size_difference"),
                                                   b.op("Cast", [l_is_one], "logical_one_01", to=int64)],
                                           "size_from_input")], "broadcast_shape")
    fits = b.op("Or", [b.op("Or", [l_is_one, x_is_one], "either_one"), b.op("Equal", [x_shape, logical], "equal_sizes")],
                "sizes_broadcast")
    unfit = b.op("Cast", [b.op("Not", [b.op("Or", [fits, on_axis], "size_fine")], "size_unfit")], "size_unfit_01",
                 to=int64)
    shape_check = _raise_if(b, b.reduce("ReduceSum", unfit, None, "sizes_not_broadcasting"), "sizes_checked")
    out_shape = b.op("Where", [on_axis, logical, broadcast], "output_shape")
    size = b.reduce("ReduceProd", out_shape, None, "output_size")

    # Coordinates: [M, k] (M = prod(logical)), normalised and checked like _Lowering._checked.
    tuples = b.op("Reshape", [idx, b.op("Concat", [logical, tuple_size], "tuples_shape", axis=0)], "tuples")
    rows = b.op("Reshape", [tuples, b.op("Concat", [b.constant([-1], "minus_one"), tuple_size], "tuple_rows_shape",
                                         axis=0)], "tuple_rows")  # [M, max(k, 1)]
    coordinates = b.slice(rows, b.constant([0], "zero"), b.unsqueeze(k, [0], "k_vector"), one_vector, "coordinates_raw")
    coordinates = b.cast(coordinates, int64, "coordinates_int64")
    axis_sizes = b.op("Gather", [x_shape, axes], "axis_sizes", axis=0)
    zero = b.constant(0, "zero_scalar")
    counted = b.op("Where", [b.op("Less", [coordinates, zero], "coordinates_negative"),
                             b.op("Add", [coordinates, axis_sizes], "coordinates_from_end"), coordinates],
                   "coordinates_counted")
    outside = b.op("Or", [b.op("Less", [counted, zero], "coordinates_below"),
                          b.op("Not", [b.op("Less", [counted, axis_sizes], "coordinates_below_size")],
                               "coordinates_above")], "coordinates_outside")
    bad = b.reduce("ReduceSum", b.op("Cast", [outside], "coordinates_outside_01", to=int64), None, "coordinates_bad")
    if mode == Mode.ERROR_NONEMPTY:  # an empty output reads nothing, so nothing is checked
        bad = b.op("Mul", [bad, b.op("Cast", [b.op("Greater", [size, zero], "output_not_empty")], "read_factor",
                                     to=int64)], "coordinates_bad_if_read")
    coordinate_check = _raise_if(b, bad, "coordinates_checked")

    # Flat output positions -> output coordinates [N, r] -> logical indices positions and input offsets [N].
    positions = b.unsqueeze(b.arange(size, "output_positions"), [1], "output_positions_column")
    out_strides = _suffix_products(b, out_shape, dims, "output_strides")
    # ORT refuses a 0 divisor even where nothing is divided (an empty output): 0 becomes 1 there.
    divisors = [b.op("Add", [v, b.op("Cast", [b.op("Equal", [v, zero], role + "_zero")], role + "_zero_01", to=int64)],
                     role + "_nonzero") for v, role in [(out_strides, "output_strides"), (out_shape, "output_sizes")]]
    out_coordinates = b.op("Mod", [b.op("Div", [positions, b.unsqueeze(divisors[0], [0], "output_strides_row")],
                                        "output_quotients"), b.unsqueeze(divisors[1], [0], "output_shape_row")],
                           "output_coordinates")
    l_weights = b.op("Mul", [_suffix_products(b, logical, dims, "logical_strides"),
                             b.op("Cast", [b.op("Not", [l_is_one], "logical_not_one")], "logical_read", to=int64)],
                     "logical_weights")
    tuple_row = b.reduce("ReduceSum", b.op("Mul", [out_coordinates, b.unsqueeze(l_weights, [0], "logical_weights_row")],
                                             "logical_terms"), [1], "tuple_row")
    components = b.op("Add", [b.op("Mul", [b.unsqueeze(tuple_row, [1], "tuple_row_column"), b.unsqueeze(k, [0], "k_1d")],
                                   "tuple_start"),
                              b.unsqueeze(b.arange(k, "component_numbers"), [0], "component_numbers_row")],
                      "component_positions")
    read = b.op("Gather", [b.op("Reshape", [counted, b.constant([-1], "minus_one")], "coordinates_flat"), components],
                "coordinates_read", axis=0)                                   # [N, k]
    x_strides = _suffix_products(b, x_shape, dims, "input_strides")
    axis_offsets = b.reduce("ReduceSum", b.op("Mul", [read, b.unsqueeze(b.op("Gather", [x_strides, axes], "axis_strides",
                                                                                axis=0), [0], "axis_strides_row")],
                                                "axis_terms"), [1], "axis_offsets")
    grid_weights = b.op("Mul", [x_strides, b.op("Cast", [b.op("Not", [b.op("Or", [x_is_one, on_axis], "not_read")],
                                                              "grid_read")], "grid_read_01", to=int64)], "grid_weights")
    grid_offsets = b.reduce("ReduceSum", b.op("Mul", [out_coordinates, b.unsqueeze(grid_weights, [0], "grid_weights_row")],
                                                "grid_terms"), [1], "grid_offsets")
    offsets = b.op("Add", [b.op("Add", [axis_offsets, grid_offsets], "offsets_unchecked"),
                           b.op("Add", [shape_check, coordinate_check], "checks")], "offsets")
    flat = b.op("Reshape", [x, b.constant([-1], "minus_one")], "input_flat")
    values = b.op("Gather", [flat, offsets], "gathered_flat", axis=0)
    if b.opset >= 14:
        b.op("Reshape", [values, out_shape], "output", allowzero=1)
    else:  # a 0 in Reshape's shape copies an input size there: an empty output is made by If
        empty = b.op("Equal", [size, zero], "output_empty")
        then_nodes: list[NodeProto] = []
        else_nodes: list[NodeProto] = []
        outer = b.nodes
        b.nodes = then_nodes
        b.op("Gather", [flat, b.op("ConstantOfShape", [out_shape], "no_offsets",
                                   value=helper.make_tensor("", int64, [1], [0]))], "empty_output", axis=0)
        b.nodes = else_nodes
        b.op("Reshape", [values, out_shape], "read_output")
        b.nodes = outer

        def branch(nodes, role):
            value = helper.make_tensor_value_info(nodes[-1].output[0], elem_type, None)
            return helper.make_graph(nodes, b.names.fresh(f"{b.prefix}/{role}"), [], [value])

        b.op("If", [empty], "output", then_branch=branch(then_nodes, "if_empty"),
             else_branch=branch(else_nodes, "if_read"))
    if widen is not None:
        b.cast(b.nodes[-1].output[0], widen, "widened")
    b.rename_last_output(output)


__all__ = ["MIN_OPSET", "MODES_MIN_OPSET", "RUN_TIME_MIN_OPSET", "RUN_TIME_MODES", "LoweringBuilder", "NotLowered",
           "lower_gather_multiaxis", "lower_gather_multiaxis_at_run_time", "lowerable"]
