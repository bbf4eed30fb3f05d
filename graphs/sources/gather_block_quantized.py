"""GatherBlockQuantized (com.microsoft) as GatherMultiaxis over the quantized rows, then dequantization
in standard ONNX ops: the table stays packed, only the gathered rows are unpacked and scaled.

ORT's CPU kernel (contrib_ops/cpu/quantization/gather_block_quantized.cc), for integer data:

    output = float(code - zero_point) * scale          (computed in float32, then cast to the scales' type)

* ``data`` is uint8 holding ``8 / bits`` codes per byte (bits 2, 4 or 8; the first code in the lowest
  bits; ``gather_axis`` 0 and ``quantize_axis`` the last dimension only), or int4 / uint4 (bits 4, any
  axes, also gather_axis = quantize_axis: then row ``i`` reads block ``i // block_size``). The output has the data's shape with the gathered axis replaced by the indices' shape and, for
  packed uint8, the last dimension multiplied by ``8 / bits``.
* ``scales`` has the data's rank, ``ceil(n / block_size)`` blocks along ``quantize_axis`` (``n`` codes there).
* ``zero_points`` (optional) has the scales' shape; for uint8 data packed like the data along the last
  dimension. Absent: ``2**(bits - 1)`` for uint8 data, 0 for int4 / uint4.
* Indices in ``[-dim, dim)`` count from the end; others give 0.0 (the whole gathered slice).

The rewrite: indices out of range are replaced by 0 and remembered in a mask; GatherMultiaxis reads the
data's rows, the scales' rows and the zero points' rows (int4 / uint4 tables are cast to int8 first:
no ONNX op reinterprets their bytes); the codes are unpacked with Div and Mod; each block's scale and
zero point are spread over its codes by one more GatherMultiaxis along the quantize axis (the constant
``arange(n) // block_size``); then ``float(Where(mask, code - zero_point, 0)) * scale``, and a Cast to
float16 when the scales are float16. The scales' rows are read in GatherMultiaxis mode "zero", so an
index out of range gives 0 * +0.0 = +0.0 as in ORT (a Where on floats would not do: ORT's Where turns
-0.0 into +0.0). Every step is exact, so the result is bit-identical to ORT's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from ...ops.alignment import gather_alignment
from ...ops.contract import Mode
from ..ranks.tensor_info import TensorInfo
from ..ir.builder import NodeBuilder
from ..ir.tensors import type_name
from ..ir.walk import attribute
from ..passes.pass_report import LeftUnchanged
from ..ranks.rank_rules import elem_type_of, known, ranked
from .source_gather import GatherEmitter, OptInRule, Rewrite, SourceGather

OP_TYPE = "GatherBlockQuantized"
DOMAIN = "com.microsoft"
MIN_OPSET = 13  # Unsqueeze / Squeeze / Slice with axes as inputs
_PACKED = TensorProto.UINT8
_NIBBLES: dict[int, int] = {TensorProto.INT4: TensorProto.INT8, TensorProto.UINT4: TensorProto.UINT8}  # widened before gathering
_SCALE_TYPES: tuple[int, ...] = (TensorProto.FLOAT, TensorProto.FLOAT16)


class BlockEmitter:
    """The nodes of one rewrite; every helper returns the name of its output."""

    def __init__(self, builder: NodeBuilder, emit_gather: GatherEmitter):
        self.b = builder
        self.emit_gather = emit_gather

    def op(self, op_type: str, inputs: list[str], role: str, **attributes) -> str:
        return self.b.op(op_type, inputs, role, **attributes)

    def tensor(self, array: np.ndarray, role: str) -> str:
        return self.op("Constant", [], role, value=numpy_helper.from_array(np.asarray(array), name=""))

    def gather(self, data: str, data_info: TensorInfo, indices: str, indices_info: TensorInfo, axis: int,
               role: str) -> str:
        """A builtin-Gather-equivalent GatherMultiaxis (the rewriter's own rule for Gather)."""
        output = self.b.names.fresh(f"{self.b.prefix}/{role}")
        gather = helper.make_node("Gather", [data, indices], [output], name=output, axis=axis)
        self.emit_gather(gather, data_info, indices_info, self.b)
        return output

    def gather_or_zero(self, data: str, rank: int, indices: str, indices_rank: int, axis: int, role: str) -> str:
        """A Gather whose out-of-range indices give 0 (GatherMultiaxis mode "zero"): an exact +0.0, which
        ORT's Where would not keep apart from -0.0."""
        alignment = gather_alignment(rank, indices_rank, axis)
        data = self.b.unsqueeze(data, list(alignment.data_unsqueeze), f"{role}_align_data")
        indices = self.b.unsqueeze(indices, list(alignment.indices_unsqueeze), f"{role}_align_indices")
        output = self.b.names.fresh(f"{self.b.prefix}/{role}")
        self.b.gather_multiaxis(data, indices, list(alignment.axes), output, output, Mode.ZERO)
        return self.b.squeeze(output, list(alignment.output_squeeze), f"{role}_restore_rank")

    def unpack(self, packed: str, components: int, bits: int, rank: int, last: int, role: str) -> str:
        """uint8 [..., last] -> int32 [..., last * components], code j of a byte = (byte >> bits*j) & (2**bits - 1)."""
        wide = self.b.cast(packed, TensorProto.INT32, f"{role}_int32")
        if components == 1:
            return wide
        spread = self.op("Unsqueeze", [wide, self.b.constant([rank], f"{role}_axis")], f"{role}_spread")
        divisors = self.tensor(np.array([1 << (bits * j) for j in range(components)], np.int32), f"{role}_shifts")
        modulus = self.tensor(np.array(1 << bits, np.int32), f"{role}_modulus")
        codes = self.op("Mod", [self.op("Div", [spread, divisors], f"{role}_shifted"), modulus], f"{role}_codes")
        head = self.b.slice(self.b.shape(wide, f"{role}_shape"), self.b.constant([0], f"{role}_head_start"),
                            self.b.constant([rank - 1], f"{role}_head_end"), self.b.constant([0], f"{role}_head_axes"),
                            f"{role}_head")
        unpacked_last = self.b.constant([last * components], f"{role}_last")  # not -1: the head may hold a 0
        return self.op("Reshape", [codes, self.b.concat([head, unpacked_last], f"{role}_unpacked_shape")],
                       f"{role}_unpacked")


@dataclass(frozen=True)
class BlockLayout:
    """A GatherBlockQuantized node's inputs and attributes, checked as ORT's kernel checks them."""

    data: TensorInfo
    indices: TensorInfo
    scales: TensorInfo
    zero_points: TensorInfo | None
    data_dims: tuple[int, ...]
    gather_axis: int
    quantize_axis: int
    block_size: int
    bits: int
    components: int  # codes per stored element (8 // bits for packed uint8, else 1)

    @property
    def rank(self) -> int:
        return len(self.data_dims)

    @property
    def codes_on_axis(self) -> int:
        return self.data_dims[self.quantize_axis] * self.components

    @property
    def blocks(self) -> int:
        return -(-self.codes_on_axis // self.block_size)

    @property
    def packed_blocks(self) -> int:  # uint8 zero points: packed like the data
        return -(-self.blocks // self.components)


def _checked_axes(node: NodeProto, data: TensorInfo, rank: int) -> tuple[int, int, int, int, int]:
    """gather_axis, quantize_axis (both non-negative), block_size, bits and codes per element, as ORT accepts them."""
    gather_axis, quantize_axis = attribute(node, "gather_axis", 0), attribute(node, "quantize_axis", 1)
    block_size, bits = attribute(node, "block_size", 128), attribute(node, "bits", 4)
    if not (-rank <= gather_axis < rank and -rank <= quantize_axis < rank):
        raise LeftUnchanged(f"gather_axis {gather_axis} or quantize_axis {quantize_axis} is outside rank {rank}")
    gather_axis, quantize_axis = gather_axis % rank, quantize_axis % rank
    if block_size < 16 or block_size & (block_size - 1):
        raise LeftUnchanged(f"block_size {block_size} is not a power of 2 >= 16 (ORT refuses it)")
    if data.elem_type == _PACKED:
        if bits not in (2, 4, 8) or gather_axis != 0 or quantize_axis != rank - 1 or rank < 2:
            raise LeftUnchanged(f"uint8 data needs bits 2, 4 or 8, gather_axis 0 and quantize_axis last (ORT "
                                f"refuses bits {bits}, gather_axis {gather_axis}, quantize_axis {quantize_axis})")
        return gather_axis, quantize_axis, block_size, bits, 8 // bits
    if bits != 4:
        raise LeftUnchanged(f"int4/uint4 data needs bits 4 (ORT refuses {bits})")
    return gather_axis, quantize_axis, block_size, bits, 1


def _check_tables(layout: BlockLayout) -> None:
    """ORT's kernel checks the scales' and zero points' shapes on every run and refuses the node; the rewrite
    would read rows past the end as zeros and ignore extra blocks. A shape not known here (scales fed as a graph
    input with symbolic dims) cannot be checked at all: such a node stays."""
    data, scales, zero_points, components = layout.data, layout.scales, layout.zero_points, layout.components
    assert data.shape is not None
    blocks = layout.blocks
    expected = {"scales": tuple(blocks if axis == layout.quantize_axis else n for axis, n in enumerate(data.shape))}
    if zero_points is not None:
        expected["zero_points"] = expected["scales"][:-1] + (layout.packed_blocks,) if data.elem_type == _PACKED else \
            expected["scales"]
    for role, info in (("scales", scales), ("zero_points", zero_points)):
        if info is None:
            continue
        if info.shape is None or not all(isinstance(n, int) for n in info.shape):
            raise LeftUnchanged(f"the shape of the {role.replace('_', ' ')} is not known statically (ORT checks it "
                                f"against the data's on each run; the rewrite could not)")
        if tuple(info.shape) != expected[role]:
            raise LeftUnchanged(f"{role.replace('_', ' ')} of shape {list(info.shape)} for data of shape "
                                f"{list(data.shape)} (ORT refuses them: it needs {list(expected[role])}, "
                                f"ceil({layout.codes_on_axis} / {layout.block_size}) = {blocks} blocks on quantize_axis"
                                + (f", packed {components} to a byte" if role == "zero_points" and components > 1 else "")
                                + ")")


def check_layout(node: NodeProto, infos: dict[str, TensorInfo], builder: NodeBuilder) -> BlockLayout:
    """The node's layout; raises LeftUnchanged where the rewrite cannot replace it (or ORT refuses it)."""
    if builder.opset < MIN_OPSET:
        raise LeftUnchanged(f"the dequantization nodes need opset {MIN_OPSET} (the model has {builder.opset})")
    unknown = TensorInfo(0, None)
    inputs = list(node.input) + [""] * (4 - len(node.input))
    data, indices, scales = (infos.get(name, unknown) for name in inputs[:3])  # (required inputs)
    zero_points = infos.get(inputs[3], unknown) if inputs[3] else None
    if data.shape is None or not all(isinstance(d, int) for d in data.shape):
        raise LeftUnchanged("the data's shape is not known statically (it is a table: an initializer)")
    data_dims = cast(tuple[int, ...], data.shape)  # cast: all ints, as just checked (mypy cannot see through all())
    if indices.shape is None or scales.shape is None:
        raise LeftUnchanged("the rank of the indices or of the scales is not known")
    assert indices.rank is not None and scales.rank is not None  # (the same fact, for the type checker)
    if data.elem_type != _PACKED and data.elem_type not in _NIBBLES:
        raise LeftUnchanged(f"data type {TensorProto.DataType.Name(data.elem_type) if data.elem_type else 'unknown'} "
                            f"is not rewritten (uint8, int4 and uint4 are)")
    if scales.elem_type not in _SCALE_TYPES:
        raise LeftUnchanged("scales must be float or float16 (ORT's CPU kernel has no other)")
    rank = len(data.shape)
    gather_axis, quantize_axis, block_size, bits, components = _checked_axes(node, data, rank)
    if scales.rank != rank or (zero_points is not None and zero_points.rank != rank):
        raise LeftUnchanged("scales and zero_points must have the data's rank")
    if zero_points is not None and zero_points.elem_type != data.elem_type:
        raise LeftUnchanged(f"zero points of type {type_name(zero_points.elem_type)} with data of type "
                            f"{type_name(data.elem_type)} (ORT refuses them: both are its type T1)")
    layout = BlockLayout(data, indices, scales, zero_points, data_dims, gather_axis, quantize_axis, block_size, bits,
                         components)
    _check_tables(layout)
    return layout


def _in_range_rows(e: BlockEmitter, node: NodeProto, dim: int) -> tuple[str, str, str]:
    """The indices as int64, whether each is in range, and the in-range row each reads (0 where ORT writes zeros)."""
    builder = e.b
    index = builder.cast(node.input[1], TensorProto.INT64, "indices_int64")
    valid = e.op("And", [e.op("Not", [e.op("Less", [index, builder.constant(-dim, "minus_dim")], "below")], "not_below"),
                         e.op("Less", [index, builder.constant(dim, "dim")], "not_above")], "in_range")
    negative = e.op("Less", [index, builder.constant(0, "zero_index")], "negative")
    counted = e.op("Where", [negative, e.op("Add", [index, builder.constant(dim, "dim_to_add")], "from_end"), index],
                   "counted_from_start")
    return index, valid, e.op("Where", [valid, counted, builder.constant(0, "first_row")], "safe_indices")


def emit_gather_block_quantized(node: NodeProto, infos: dict[str, TensorInfo], builder: NodeBuilder,
                                emit_gather: GatherEmitter) -> TensorInfo:
    """The opt-in emitter (``OptInEmitter``) of GatherBlockQuantized."""
    layout = check_layout(node, infos, builder)
    data, indices, scales, zero_points = layout.data, layout.indices, layout.scales, layout.zero_points
    assert data.shape is not None and indices.shape is not None and indices.rank is not None
    rank, gather_axis, quantize_axis, components = layout.rank, layout.gather_axis, layout.quantize_axis, layout.components
    block_size, bits, blocks, codes_on_axis = layout.block_size, layout.bits, layout.blocks, layout.codes_on_axis
    e = BlockEmitter(builder, emit_gather)
    out_rank = rank - 1 + indices.rank
    index, valid, safe = _in_range_rows(e, node, layout.data_dims[gather_axis])
    safe_info = TensorInfo(TensorProto.INT64, indices.shape)
    same_axis = gather_axis == quantize_axis  # (int4 / uint4 only) each row reads its own block's scale
    output_axis = quantize_axis if quantize_axis < gather_axis else quantize_axis + indices.rank - 1
    if same_axis:
        block_rows = e.op("Div", [safe, builder.constant(block_size, "block_size")], "block_of_row")
        # an index out of range reads the block past the end: scale +0.0 in mode "zero"
        scale_index = e.op("Where", [valid, block_rows, builder.constant(blocks, "past_the_blocks")], "scale_rows_index")
    else:
        block_rows, scale_index = safe, index

    def rows(name: str, info: TensorInfo, role: str, rows_index: str = safe) -> tuple[str, TensorInfo]:
        if info.elem_type in _NIBBLES:  # no op reads int4 bytes as bytes: widen the table first
            name = builder.cast(name, _NIBBLES[info.elem_type], f"{role}_widened")
            info = TensorInfo(_NIBBLES[info.elem_type], info.shape)
        return e.gather(name, info, rows_index, safe_info, gather_axis, f"{role}_rows"), info

    def spread_blocks(blocked: str, info: TensorInfo, role: str) -> str:
        """One value per block -> one per code along the quantize axis (a gather of arange(n) // block_size)."""
        if same_axis:  # gathered by block already
            return blocked
        spread = e.tensor(np.arange(codes_on_axis, dtype=np.int64) // block_size, f"{role}_block_of_code")
        assert info.shape is not None and indices.shape is not None  # ranks known (checked above)
        shape = info.shape[:gather_axis] + tuple(indices.shape) + info.shape[gather_axis + 1:]
        return e.gather(blocked, TensorInfo(info.elem_type, shape), spread, TensorInfo(TensorProto.INT64, (codes_on_axis,)),
                        output_axis, f"{role}_per_code")

    codes, _ = rows(node.input[0], data, "data")
    codes = e.unpack(codes, components, bits, out_rank, layout.data_dims[-1], "data") if data.elem_type == _PACKED \
        else builder.cast(codes, TensorProto.INT32, "codes_int32")
    scale_table = node.input[2]
    if scales.elem_type == TensorProto.FLOAT16:  # the bridge carries no float16; ORT computes in float32 anyway
        scale_table = builder.cast(scale_table, TensorProto.FLOAT, "scales_float")
    scale_rows = e.gather_or_zero(scale_table, rank, scale_index, indices.rank, gather_axis, "scales_rows")
    scale = spread_blocks(scale_rows, TensorInfo(TensorProto.FLOAT, scales.shape), "scales")
    if zero_points is not None:
        zero_rows, zero_info = rows(node.input[3], zero_points, "zero_points", block_rows)
        if data.elem_type == _PACKED:
            zero_rows = e.unpack(zero_rows, components, bits, out_rank, layout.packed_blocks, "zero_points")
            zero_rows = builder.slice(zero_rows, builder.constant([0], "zp_start"), builder.constant([blocks], "zp_end"),
                                      builder.constant([out_rank - 1], "zp_axis"), "zero_points_blocks")
            zero_info = TensorInfo(TensorProto.INT32, scales.shape)
        else:
            zero_rows = builder.cast(zero_rows, TensorProto.INT32, "zero_points_int32")
        zero_rows_info = TensorInfo(TensorProto.INT32, zero_info.shape)
        codes = e.op("Sub", [codes, spread_blocks(zero_rows, zero_rows_info, "zero_points")], "centred")
    elif data.elem_type == _PACKED:
        codes = e.op("Sub", [codes, e.tensor(np.array(1 << (bits - 1), np.int32), "default_zero_point")], "centred")
    return _dequantized(e, node, layout, codes, scale, valid, out_rank)


def _dequantized(e: BlockEmitter, node: NodeProto, layout: BlockLayout, codes: str, scale: str, valid: str,
                 out_rank: int) -> TensorInfo:
    """float(Where(mask, code - zero_point, 0)) * scale, cast back to float16 scales' type; the output's info."""
    builder, data, indices, scales = e.b, layout.data, layout.indices, layout.scales
    assert data.shape is not None and indices.shape is not None and indices.rank is not None
    gather_axis = layout.gather_axis
    # Out of range: code 0 (on integers) times scale +0.0 (mode "zero") is the +0.0 ORT writes.
    mask = builder.unsqueeze(valid, list(range(gather_axis)) + list(range(gather_axis + indices.rank, out_rank)),
                             "in_range_aligned")
    codes = e.op("Where", [mask, codes, e.tensor(np.array(0, np.int32), "zero_code")], "out_of_range_zeroed")
    e.op("Mul", [builder.cast(codes, TensorProto.FLOAT, "centred_float"), scale], "dequantized")
    if scales.elem_type == TensorProto.FLOAT16:
        builder.cast(builder.nodes[-1].output[0], TensorProto.FLOAT16, "to_float16")
    builder.rename_last_output(node.output[0])
    shape = list(data.shape[:gather_axis]) + list(indices.shape) + list(data.shape[gather_axis + 1:])
    shape[-1] = shape[-1] * layout.components if isinstance(shape[-1], int) else None
    return TensorInfo(scales.elem_type, tuple(shape))


def rank_rule(node, inputs, constants):
    """A Gather of the (packed, same-rank) data, of the scales' type."""
    if not (known(inputs[0]) and known(inputs[1])):
        return None
    return [ranked(elem_type_of(inputs[2]) if len(inputs) > 2 else 0, inputs[0].rank + inputs[1].rank - 1)]


SOURCE = SourceGather(DOMAIN, OP_TYPE, Rewrite.OPT_IN, first_opset=1, why_not=(
    "it gathers blocks of 4/8-bit quantized data and dequantizes them with their scales in one kernel; "
    "rewritten only when asked for (ops including GatherBlockQuantized: graphs/block_quantized.py)"),
    rank_rule=rank_rule, opt_in=OptInRule(DOMAIN, emit_gather_block_quantized))

__all__ = ["DOMAIN", "OP_TYPE", "SOURCE", "BlockEmitter", "BlockLayout", "check_layout", "emit_gather_block_quantized", "rank_rule"]
