"""The general lowering where the axes or the ranks are known only at run time: every output element is read
on its own. Its output coordinates come from its flat position (Div/Mod by the output strides), its input offset
is the sum of the gathered coordinates on the axes and the output coordinates elsewhere (0 where the input has
size 1), each times the input's stride. Every coordinate is checked as in ``general_form`` (all of them, or
none when the output is empty in the modes that check only what is read), and so are the sizes of the non-axis
dimensions (they broadcast).
"""

from __future__ import annotations

from dataclasses import dataclass

from onnx import NodeProto, TensorProto, helper

from ...ops.alignment import GATHER, GATHER_ELEMENTS
from ...ops.contract import MODES, Mode
from ..ir.builder import INT64_MAX
from ..ir.walk import attribute
from .general_form import NotLowered, checks_only_when_read
from .lowering_builder import LoweringBuilder

RUN_TIME_MIN_OPSET = 11  # Range; Where/Less on int64 (9), Mod (10)
RUN_TIME_MODES = tuple(mode for mode in Mode if mode.checks_indices)  # what the rewrite's run-time alignment writes


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
    return b.op(GATHER, [b.constant([0], "zero"), index], role, axis=0)




@dataclass
class _Shapes:
    """The run-time shapes of one node: the input's, the dimensions, the axes and the output's."""

    x_shape: str
    dims: str
    axes: str
    k: str
    tuple_size: str
    logical: str
    on_axis: str
    l_is_one: str
    x_is_one: str
    shape_check: str
    out_shape: str
    size: str


def lower_gather_multiaxis_at_run_time(node: NodeProto, elem_type: int, b: LoweringBuilder,
                                       narrow: tuple[str, int] | None = None) -> None:
    """Append a replacement that needs neither ranks nor axes statically (``narrow`` as
    ``lower_gather_multiaxis``'s); NotLowered outside ``RUN_TIME_MODES`` or below ``RUN_TIME_MIN_OPSET``."""
    mode = _run_time_mode(node, elem_type, b.opset)
    x, idx, output = node.input[0], node.input[1], node.output[0]
    widen = None
    if narrow is not None:
        x, widen, elem_type = narrow[0], elem_type, narrow[1]
    shapes = _shapes(b, x, idx, node.input[2])
    counted, coordinate_check = _coordinates(b, idx, shapes, mode)
    offsets = _offsets(b, shapes, counted, coordinate_check)
    _read(b, x, offsets, shapes, elem_type)
    if widen is not None:
        b.cast(b.nodes[-1].output[0], widen, "widened")
    b.rename_last_output(output)


def _run_time_mode(node: NodeProto, elem_type: int, opset: int) -> Mode:
    """The node's mode, where the run-time form computes it; raises NotLowered."""
    mode = attribute(node, "mode", None)
    if mode is None:
        raise NotLowered(f"no 'mode' attribute (required: one of {', '.join(MODES)})")
    if mode not in RUN_TIME_MODES:
        raise NotLowered(f"mode {mode!r} with axes or ranks known only at run time (lowered: modes "
                         f"{', '.join(RUN_TIME_MODES)})")
    if opset < RUN_TIME_MIN_OPSET:
        raise NotLowered(f"axes or ranks known only at run time need opset >= {RUN_TIME_MIN_OPSET} "
                         f"(the model's opset is {opset})")
    if opset < 14 and not elem_type:
        raise NotLowered("below opset 14 the lowering of run-time ranks needs the input's element type (for an If), "
                         "which is not known")
    return Mode(mode)


def _shapes(b: LoweringBuilder, x: str, idx: str, axes_input: str) -> _Shapes:
    """The shapes, the axes counted from the front, and the check that the non-axis sizes broadcast."""
    one_vector, int64 = b.constant([1], "one"), TensorProto.INT64
    x_shape, i_shape = b.op("Shape", [x], "input_shape"), b.op("Shape", [idx], "indices_shape")
    # the op requires equal ranks: the indices' shape reshaped to the input's rank raises for another rank
    i_shape = b.op("Reshape", [i_shape, b.op("Shape", [x_shape], "rank_1d")], "indices_shape_of_rank")
    dims = b.arange(b.length(x_shape, "rank"), "dimensions")
    # GatherElements(Range(0, r), axes) counts negative axes from the end and refuses out-of-range ones. Not
    # Gather: axes that are a Range's output (the rewrite's run-time GatherND alignment) would meet ORT's
    # GatherToSliceFusion, whose Slice clamps an out-of-range axis instead of refusing it.
    axes = b.op(GATHER_ELEMENTS, [dims, b.cast(axes_input, int64, "axes_int64")], "axes", axis=0)
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
    return _Shapes(x_shape, dims, axes, k, tuple_size, logical, on_axis, l_is_one, x_is_one, shape_check, out_shape,
                   size)


def _coordinates(b: LoweringBuilder, idx: str, s: _Shapes, mode: Mode) -> tuple[str, str]:
    """The coordinates [M, k] (M = prod(logical)) counted from the front, and their check."""
    int64, one_vector, zero = TensorProto.INT64, b.constant([1], "one"), b.constant(0, "zero_scalar")
    logical, tuple_size, k, x_shape, axes, size = s.logical, s.tuple_size, s.k, s.x_shape, s.axes, s.size
    tuples = b.op("Reshape", [idx, b.op("Concat", [logical, tuple_size], "tuples_shape", axis=0)], "tuples")
    rows = b.op("Reshape", [tuples, b.op("Concat", [b.constant([-1], "minus_one"), tuple_size], "tuple_rows_shape",
                                         axis=0)], "tuple_rows")  # [M, max(k, 1)]
    coordinates = b.slice(rows, b.constant([0], "zero"), b.unsqueeze(k, [0], "k_vector"), one_vector, "coordinates_raw")
    coordinates = b.cast(coordinates, int64, "coordinates_int64")
    axis_sizes = b.op(GATHER, [x_shape, axes], "axis_sizes", axis=0)
    counted = b.op("Where", [b.op("Less", [coordinates, zero], "coordinates_negative"),
                             b.op("Add", [coordinates, axis_sizes], "coordinates_from_end"), coordinates],
                   "coordinates_counted")
    outside = b.op("Or", [b.op("Less", [counted, zero], "coordinates_below"),
                          b.op("Not", [b.op("Less", [counted, axis_sizes], "coordinates_below_size")],
                               "coordinates_above")], "coordinates_outside")
    bad = b.reduce("ReduceSum", b.op("Cast", [outside], "coordinates_outside_01", to=int64), None, "coordinates_bad")
    if checks_only_when_read(mode):  # an empty output reads nothing, so nothing is checked
        bad = b.op("Mul", [bad, b.op("Cast", [b.op("Greater", [size, zero], "output_not_empty")], "read_factor",
                                     to=int64)], "coordinates_bad_if_read")
    coordinate_check = _raise_if(b, bad, "coordinates_checked")
    return counted, coordinate_check


def _offsets(b: LoweringBuilder, s: _Shapes, counted: str, coordinate_check: str) -> str:
    """The input offset of every output element (with the checks added in, so that they always run)."""
    int64, zero = TensorProto.INT64, b.constant(0, "zero_scalar")
    size, out_shape, dims, logical, k, axes = s.size, s.out_shape, s.dims, s.logical, s.k, s.axes
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
                             b.op("Cast", [b.op("Not", [s.l_is_one], "logical_not_one")], "logical_read", to=int64)],
                     "logical_weights")
    tuple_row = b.reduce("ReduceSum", b.op("Mul", [out_coordinates, b.unsqueeze(l_weights, [0], "logical_weights_row")],
                                             "logical_terms"), [1], "tuple_row")
    components = b.op("Add", [b.op("Mul", [b.unsqueeze(tuple_row, [1], "tuple_row_column"), b.unsqueeze(k, [0], "k_1d")],
                                   "tuple_start"),
                              b.unsqueeze(b.arange(k, "component_numbers"), [0], "component_numbers_row")],
                      "component_positions")
    read = b.op(GATHER, [b.op("Reshape", [counted, b.constant([-1], "minus_one")], "coordinates_flat"), components],
                "coordinates_read", axis=0)                                   # [N, k]
    x_strides = _suffix_products(b, s.x_shape, dims, "input_strides")
    axis_offsets = b.reduce("ReduceSum", b.op("Mul", [read, b.unsqueeze(b.op(GATHER, [x_strides, axes], "axis_strides",
                                                                                axis=0), [0], "axis_strides_row")],
                                                "axis_terms"), [1], "axis_offsets")
    grid_weights = b.op("Mul", [x_strides, b.op("Cast", [b.op("Not", [b.op("Or", [s.x_is_one, s.on_axis], "not_read")],
                                                              "grid_read")], "grid_read_01", to=int64)], "grid_weights")
    grid_offsets = b.reduce("ReduceSum", b.op("Mul", [out_coordinates, b.unsqueeze(grid_weights, [0], "grid_weights_row")],
                                                "grid_terms"), [1], "grid_offsets")
    offsets = b.op("Add", [b.op("Add", [axis_offsets, grid_offsets], "offsets_unchecked"),
                           b.op("Add", [s.shape_check, coordinate_check], "checks")], "offsets")
    return offsets


def _read(b: LoweringBuilder, x: str, offsets: str, s: _Shapes, elem_type: int) -> None:
    """The elements at ``offsets``, in the output's shape (an If where an empty output needs one)."""
    int64, zero, size, out_shape = TensorProto.INT64, b.constant(0, "zero_scalar"), s.size, s.out_shape
    flat = b.op("Reshape", [x, b.constant([-1], "minus_one")], "input_flat")
    values = b.op(GATHER, [flat, offsets], "gathered_flat", axis=0)
    if b.opset >= 14:
        b.op("Reshape", [values, out_shape], "output", allowzero=1)
    else:  # a 0 in Reshape's shape copies an input size there: an empty output is made by If
        empty = b.op("Equal", [size, zero], "output_empty")
        then_nodes: list[NodeProto] = []
        else_nodes: list[NodeProto] = []
        outer = b.nodes
        b.nodes = then_nodes
        b.op(GATHER, [flat, b.op("ConstantOfShape", [out_shape], "no_offsets",
                                   value=helper.make_tensor("", int64, [1], [0]))], "empty_output", axis=0)
        b.nodes = else_nodes
        b.op("Reshape", [values, out_shape], "read_output")
        b.nodes = outer

        def branch(nodes, role):
            value = helper.make_tensor_value_info(nodes[-1].output[0], elem_type, None)
            return helper.make_graph(nodes, b.names.fresh(f"{b.prefix}/{role}"), [], [value])

        b.op("If", [empty], "output", then_branch=branch(then_nodes, "if_empty"),
             else_branch=branch(else_nodes, "if_read"))


__all__ = ["RUN_TIME_MIN_OPSET", "RUN_TIME_MODES", "lower_gather_multiaxis_at_run_time"]
