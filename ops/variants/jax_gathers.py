"""JAX's ``lax.gather`` (StableHLO gather, index vector last); jax is never imported."""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass
from typing import NoReturn, Sequence, SupportsIndex

import numpy as np
from numpy.typing import ArrayLike

from ..contract import GatherShapeError, Mode
from ..kernel import gather_multiaxis
from .variant_steps import record_step


class JaxGatherMode(enum.Enum):
    """Out-of-bounds handling of ``jax_gather``, named like ``jax.lax.GatherScatterMode``'s members."""

    CLIP = "clip"  # each start index is clamped to [0, dim - slice size]: the window lies inside the operand
    FILL_OR_DROP = "fill"  # a window with any part out of bounds is fill_value, all of it

    @classmethod
    def from_any(cls, mode) -> "JaxGatherMode":
        """``mode`` from JAX's strings or a member (of this enum or JAX's, by name); ValueError otherwise."""
        name = mode.name if isinstance(mode, enum.Enum) else mode
        if name in ("CLIP", "clip"):
            return cls.CLIP
        if name in ("FILL_OR_DROP", "fill", "drop"):
            return cls.FILL_OR_DROP
        if mode is None or name in ("PROMISE_IN_BOUNDS", "promise_in_bounds"):
            raise ValueError(f"mode {mode!r} (jax.lax.gather's default, PROMISE_IN_BOUNDS) leaves out-of-bounds "
                             f"starts implementation-defined; pass mode='clip' (what XLA does for them) or 'fill'")
        raise ValueError(f"mode must be 'clip' or 'fill' (or GatherScatterMode.CLIP / FILL_OR_DROP), got {mode!r}")


@dataclass(frozen=True)
class GatherDimensionNumbers:
    """The five fields of ``jax.lax.GatherDimensionNumbers``; the index vector is start_indices' last dim."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()

    @classmethod
    def from_any(cls, dimension_numbers) -> "GatherDimensionNumbers":
        """The fields of any object that has them, as tuples of ints (the batching ones may be absent)."""
        fields = {}
        for name in ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
                     "start_indices_batching_dims"):
            value = getattr(dimension_numbers, name, () if "batching" in name else None)
            if value is None:
                raise TypeError(f"dimension_numbers has no {name} (got {dimension_numbers!r})")
            try:
                fields[name] = tuple(operator.index(d) for d in value)
            except TypeError:
                raise TypeError(f"dimension_numbers.{name} must be a sequence of ints, got {value!r}") from None
        return cls(**fields)


def _check_call(operand_shape, indices_shape, dn: GatherDimensionNumbers, slice_sizes) -> list[int]:
    """StableHLO gather's constraints, as JAX's shape rule checks them; the windowed operand dims.

    Raises:
        GatherShapeError: naming the broken constraint, the shapes and the dimension numbers.
    """
    rank = len(operand_shape)
    context = (f"(operand shape {list(operand_shape)}, start_indices shape {list(indices_shape)}, "
               f"slice_sizes {list(slice_sizes)}, {dn})")

    def fail(message) -> NoReturn:
        raise GatherShapeError(f"{message} {context}")

    def check_dims(name, dims, bound, of, must_sort=False):
        for d in dims:
            if not 0 <= d < bound:
                fail(f"{name} {list(dims)}: {d} is not a dimension of {of} (valid range [0, {bound - 1}])")
        if len(set(dims)) != len(dims):
            fail(f"{name} {list(dims)} names a dimension twice")
        if must_sort and list(dims) != sorted(dims):
            fail(f"{name} {list(dims)} must be sorted")

    if not indices_shape:
        fail("start_indices must have at least one dimension (its last holds the index vectors)")
    batch_shape, k = tuple(indices_shape[:-1]), indices_shape[-1]
    out_rank = len(batch_shape) + len(dn.offset_dims)
    check_dims("offset_dims", dn.offset_dims, out_rank, f"the rank-{out_rank} output", must_sort=True)
    check_dims("collapsed_slice_dims", dn.collapsed_slice_dims, rank, "the operand", must_sort=True)
    check_dims("operand_batching_dims", dn.operand_batching_dims, rank, "the operand", must_sort=True)
    check_dims("start_index_map", dn.start_index_map, rank, "the operand")
    check_dims("start_indices_batching_dims", dn.start_indices_batching_dims, len(batch_shape),
               "start_indices but its last (the index vector)")
    if len(dn.start_index_map) != k:
        fail(f"start_index_map has {len(dn.start_index_map)} entries but the index vectors (the last "
             f"dimension of start_indices) have {k}")
    if set(dn.collapsed_slice_dims) & set(dn.operand_batching_dims) \
            or set(dn.start_index_map) & set(dn.operand_batching_dims):
        fail("operand_batching_dims must be disjoint from collapsed_slice_dims and start_index_map")
    if len(dn.operand_batching_dims) != len(dn.start_indices_batching_dims) or any(
            operand_shape[o] != batch_shape[i]
            for o, i in zip(dn.operand_batching_dims, dn.start_indices_batching_dims)):
        fail("operand_batching_dims and start_indices_batching_dims must pair dimensions of equal sizes")
    if len(slice_sizes) != rank:
        fail(f"slice_sizes needs one size per operand dimension ({rank})")
    for d, (size, dim) in enumerate(zip(slice_sizes, operand_shape)):
        if not 0 <= size <= dim:
            fail(f"slice size {size} of operand dimension {d} is outside [0, {dim}]")
    removed = (*dn.collapsed_slice_dims, *dn.operand_batching_dims)
    if any(slice_sizes[d] != 1 for d in removed):
        fail("collapsed_slice_dims and operand_batching_dims need slice size 1")
    windowed = [d for d in range(rank) if d not in removed]
    if len(windowed) != len(dn.offset_dims):
        fail(f"offset_dims must name one output dimension for each of the {len(windowed)} operand "
             f"dimensions neither collapsed nor batching")
    return windowed


@dataclass(frozen=True)
class JaxGatherLayout:
    """Where the dimensions of one ``jax.lax.gather`` go in its gatherMultiaxis call.

    The aligned rank is the output's plus one size-1 dim per collapsed operand dim (appended, squeezed after).
    Offset dims sit at their ``offset_dims`` entry, operand batching dims at their start_indices batch dim's
    output place (broadcasting pairs them); the axes are the aligned places of ``start_index_map``."""

    crop: tuple[slice, ...]  # per operand dim: its window when no start index moves it, else all of it
    order: tuple[int, ...]  # operand dims by aligned place (a transpose)
    missing: tuple[int, ...]  # aligned places the operand lacks: batch dims without an operand batching dim
    start_shape: tuple[int, ...]  # start_indices' batch dims at their aligned places, 1 elsewhere
    axes: tuple[int, ...]  # aligned place of each start_index_map entry
    windows: tuple[int, ...]  # slice size of each start_index_map entry
    upper_bounds: tuple[int, ...]  # dim - slice size of each start_index_map entry: its largest in-bounds start
    output_shape: tuple[int, ...]

    @classmethod
    def infer(cls, operand_shape, indices_shape, dimension_numbers: GatherDimensionNumbers,
              slice_sizes) -> "JaxGatherLayout":
        """The layout of a call that ``_check_call`` accepts (GatherShapeError otherwise)."""
        dn, rank = dimension_numbers, len(operand_shape)
        windowed = _check_call(operand_shape, indices_shape, dn, slice_sizes)
        batch_shape = tuple(indices_shape[:-1])
        out_rank = len(batch_shape) + len(dn.offset_dims)
        batch_places = [p for p in range(out_rank) if p not in dn.offset_dims]
        place = dict(zip(windowed, dn.offset_dims))
        place.update(zip(dn.collapsed_slice_dims, range(out_rank, out_rank + len(dn.collapsed_slice_dims))))
        place.update((o, batch_places[i]) for o, i in zip(dn.operand_batching_dims, dn.start_indices_batching_dims))
        aligned_rank = out_rank + len(dn.collapsed_slice_dims)
        start_shape = [1] * aligned_rank
        for p, size in zip(batch_places, batch_shape):
            start_shape[p] = size
        output_shape = list(start_shape[:out_rank])
        for d in windowed:
            output_shape[place[d]] = slice_sizes[d]
        moved = set(dn.start_index_map)
        return cls(
            crop=tuple(slice(None) if d in moved or d in dn.operand_batching_dims else slice(0, slice_sizes[d])
                       for d in range(rank)),
            order=tuple(sorted(range(rank), key=place.__getitem__)),
            missing=tuple(sorted(set(range(aligned_rank)) - set(place.values()))),
            start_shape=tuple(start_shape),
            axes=tuple(place[d] for d in dn.start_index_map),
            windows=tuple(slice_sizes[d] for d in dn.start_index_map),
            upper_bounds=tuple(operand_shape[d] - slice_sizes[d] for d in dn.start_index_map),
            output_shape=tuple(output_shape))


def _jax_fill_value(dtype: np.dtype):
    """JAX's default fill for ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind in "iu":
        return np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max
    if dtype.kind == "b":
        return True
    raise TypeError(f"jax.lax.gather has no fill value for dtype {dtype}")


def jax_gather(operand: ArrayLike, start_indices: ArrayLike, dimension_numbers: object,
               slice_sizes: Sequence[SupportsIndex], mode: str | enum.Enum = "clip",
               fill_value: ArrayLike | None = None, *, indices_are_sorted: bool = False,
               unique_indices: bool = False) -> np.ndarray:
    """``jax.lax.gather`` as one gatherMultiaxis call.

    Each output window of ``slice_sizes`` starts at ``start_indices[batch..., j]`` on operand dim
    ``start_index_map[j]`` (0 elsewhere, the batch index on batching dims). ``mode`` "clip" (default here;
    JAX's PROMISE_IN_BOUNDS is refused) clamps starts to ``[0, dim - slice size]``; "fill" gives ``fill_value``
    (default NaN for floats, the most negative value for signed ints, the largest for unsigned, True for bool)
    for windows partly out of bounds. ``dimension_numbers``: JAX's own or any object with its fields.
    ``indices_are_sorted`` and ``unique_indices`` are JAX's promises, unused here."""
    mode = JaxGatherMode.from_any(mode)
    dimension_numbers = GatherDimensionNumbers.from_any(dimension_numbers)
    operand, start_indices = np.asarray(operand), np.asarray(start_indices)
    if start_indices.dtype.kind not in "iu":
        raise TypeError(f"start_indices must have an integer dtype, got {start_indices.dtype}")
    layout = JaxGatherLayout.infer(operand.shape, start_indices.shape, dimension_numbers,
                                   tuple(operator.index(s) for s in slice_sizes))
    # The operand: crop the dims no start moves to their window, put each dim in its aligned place.
    data = np.expand_dims(np.transpose(operand[layout.crop], layout.order), layout.missing)
    # The starts (as int64; uint64 beyond int64 are out of bounds anyway), one k-vector per aligned place.
    if start_indices.dtype == np.uint64:
        start_indices = np.asarray(np.minimum(start_indices, np.uint64(np.iinfo(np.int64).max)))
    starts = start_indices.astype(np.int64).reshape(*layout.start_shape, len(layout.axes))
    clamped = np.clip(starts, 0, np.array(layout.upper_bounds, np.int64))
    if layout.axes:  # coordinate j: the clamped start plus an iota along the window of its aligned place
        coordinates = [clamped[..., j] + np.arange(size).reshape([size if p == axis else 1
                                                                  for p in range(len(layout.start_shape))])
                       for j, (axis, size) in enumerate(zip(layout.axes, layout.windows))]
        tuples = np.stack(np.broadcast_arrays(*coordinates), axis=-1)
        # fold the k-tuples into the last dimension
        indices = tuples.reshape(*tuples.shape[:-2], tuples.shape[-2] * tuples.shape[-1])
    else:  # nothing is indexed: the indices only carry the batch shape
        indices = np.zeros(layout.start_shape, np.int64)
    gathered = gather_multiaxis(data, indices, layout.axes, Mode.ERROR)  # clamped: always in range
    result = gathered.reshape(layout.output_shape)
    if mode is JaxGatherMode.FILL_OR_DROP:
        outside = ((starts < 0) | (starts > np.array(layout.upper_bounds, np.int64))).any(axis=-1)
        if outside.any():
            fill = np.array(_jax_fill_value(operand.dtype) if fill_value is None else fill_value, operand.dtype)
            np.copyto(result, fill, where=outside.reshape(layout.start_shape[:len(layout.output_shape)]))
    record_step(f"jax_gather ({mode.value})", operand, data, start_indices, indices, layout.axes, Mode.ERROR,
                gathered, result)
    return result
