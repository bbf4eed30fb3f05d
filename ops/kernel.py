"""The vectorised NumPy kernel of GatherMultiaxis: every output coordinate becomes one flat input offset (index
terms by Horner's scheme plus broadcast ``arange`` terms), read with one ``np.take``, so neither input nor
indices are materialised at the output shape. Shape-only plans are cached (512 plans, 16 MiB of grids)."""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from math import prod
from typing import NoReturn, Sequence, SupportsInt, assert_never

import numpy as np
from numpy.typing import ArrayLike

from .contract import (CHECKING_MODES, INDEX_DTYPES, MODES, OUT_OF_RANGE_OF, UNCHECKED_WHEN_EMPTY, GatherIndexError, Mode,
                       OutOfRange, normalize_axes)
from .geometry import GatherGeometry


_INT64_MAX = np.iinfo(np.int64).max


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def zero_element(dtype: np.dtype):
    """The value written for out-of-range indices in mode "zero": 0, False, or an empty string."""
    if dtype == object:
        return ""
    return np.zeros((), dtype)[()]


def _position_text(position: Sequence[SupportsInt]) -> str:
    return "[" + ", ".join(str(int(p)) for p in position) + "]"


def _coordinate_term(indices: np.ndarray, coordinate: np.ndarray, j: int, geometry: GatherGeometry,
                     mode: str) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """One coordinate component, checked, negatives counted from the end; with the mode "zero" mask and whether
    it is a fresh int64 array (else a view of the caller's indices: never write to it)."""
    axis = geometry.axes[j]
    dim = geometry.input_shape[axis]
    if coordinate.size <= 16:  # tiny: Python's min/max beat two NumPy reductions
        values_list = coordinate.ravel().tolist()
        in_range = not values_list or (min(values_list) >= 0 and max(values_list) < dim)
    else:
        in_range = coordinate.min() >= 0 and coordinate.max() < dim
    if in_range:  # the common case
        return coordinate, None, False
    values = coordinate.astype(np.int64)
    np.add(values, dim, out=values, where=values < 0)  # negatives count from the end, once
    bad = (values < 0) | (values >= dim)
    match OUT_OF_RANGE_OF[mode]:
        case OutOfRange.CLAMP:
            np.clip(values, 0, dim - 1, out=values)
            return values, None, True
        case OutOfRange.ZERO:
            if not bad.any():
                return values, None, True
            values[bad] = 0
            return values, bad, True
        case OutOfRange.RAISE:
            if not bad.any():
                return values, None, True
            _raise_out_of_range(indices, bad, j, geometry)
        case outcome:
            assert_never(outcome)


def _raise_out_of_range(indices: np.ndarray, bad: np.ndarray, j: int, geometry: GatherGeometry) -> NoReturn:
    """Raise GatherIndexError naming the first out-of-range index of coordinate ``j``."""
    axis = geometry.axes[j]
    dim = geometry.input_shape[axis]
    logical_position = np.unravel_index(int(np.argmax(bad)), bad.shape)
    k = len(geometry.axes)
    position = (*logical_position[:-1], logical_position[-1] * k + j) if k > 1 else logical_position
    value = int(indices[position]) if indices.ndim else int(indices)
    raise GatherIndexError(
        f"index {value} at indices{_position_text(position)} is out of range for axis {axis} of size {dim} "
        f"(valid range [{-dim}, {dim - 1}]; input shape {_position_text(geometry.input_shape)}, "
        f"axes {list(geometry.axes)})")


def _horner(terms: list[tuple[int, np.ndarray, bool]]) -> tuple[np.ndarray, bool]:
    """sum(values * stride), each stride dividing the previous: ((v_a * s_a/s_b + v_b) * s_b/s_c + v_c) * s_c in
    one int64 buffer. Also whether the result is our own buffer (one stride-1 term comes back as it is)."""
    (stride, offsets, fresh), rest = terms[0], terms[1:]
    if not rest and stride == 1:
        return offsets, fresh
    if not (fresh and offsets.dtype == np.int64):
        offsets = offsets.astype(np.int64)  # a copy: from here on written in place
    for next_stride, values, _ in rest:
        if next_stride != stride:
            offsets *= stride // next_stride
        offsets += values
        stride = next_stride
    if stride != 1:
        offsets *= stride
    return offsets, True


def _check_output_fits(geometry: GatherGeometry, itemsize: int) -> None:
    """Fail before allocating when the output (plus its int64 offsets) cannot exist on this machine."""
    size = geometry.output_size  # a Python int: exact however large
    if size > _INT64_MAX:
        raise MemoryError(f"the output shape {list(geometry.output_shape)} has {size} elements, which overflows "
                          f"int64 (input shape {list(geometry.input_shape)}, indices shape "
                          f"{list(geometry.indices_shape)}, axes {list(geometry.axes)})")
    needed = size * (itemsize + (8 if geometry.axes else 0))
    memory = _physical_memory()
    if memory is not None and needed > memory:
        raise MemoryError(f"the output shape {list(geometry.output_shape)} ({size} elements of {itemsize} bytes) needs "
                          f"{needed / 2**30:.1f} GiB, more than this machine's {memory / 2**30:.1f} GiB of memory")


def _block_start(geometry: GatherGeometry) -> int:
    """First dimension of the trailing run that is copied as contiguous blocks."""
    start = geometry.rank
    while start > 0:
        d = start - 1
        if d in geometry.axes or geometry.logical_indices_shape[d] != 1:
            break
        if geometry.input_shape[d] != geometry.output_shape[d]:
            break
        start = d
    return start


def gather_multiaxis(input: ArrayLike, indices: ArrayLike, axes: Sequence[int],
                     mode: Mode | str = Mode.ERROR) -> np.ndarray:
    """Gather elements of ``input`` at the coordinates in ``indices`` along ``axes``, as ``ops.contract`` states.

    Args:
        input: the data array (anything ``np.asarray`` takes), any element type.
        indices: int32 or int64, the rank of ``input``; with several axes the last dimension holds the tuples.
        axes: the distinct dimensions of ``input`` the indices address, each in ``[-rank, rank - 1]``.
        mode: a ``Mode`` or one of its strings.

    Returns:
        A new C-contiguous ``np.ndarray`` of ``input``'s dtype.

    Raises:
        ValueError: ``mode`` is not one of the modes.
        TypeError: ``indices`` is not int32 or int64.
        GatherIndexError: an index out of range in mode "error" (or "error_nonempty", non-empty output).
        GatherShapeError: shapes or axes break the contract, or an axis of size 0 is indexed.
        MemoryError: more output elements than an int64 offset can address."""
    if mode not in MODES:
        Mode.from_any(mode)  # raises, naming the modes
    data = np.asarray(input)
    index_array = np.asarray(indices)
    if index_array.dtype not in INDEX_DTYPES:
        raise TypeError(f"indices must be int32 or int64, got {index_array.dtype}")
    # Axes are checked before the cache: lru_cache would take 1.0 or True for the axis 1.
    plan = PLANS(data.shape, index_array.shape, normalize_axes(axes, data.ndim), data.dtype.itemsize)
    geometry = plan.geometry
    if not geometry.axes:  # nothing to index: a pure broadcast of the input
        return np.array(np.broadcast_to(data, geometry.output_shape), order="C")
    if geometry.output_size == 0 and mode in UNCHECKED_WHEN_EMPTY:  # nothing is read, so nothing is checked
        return np.empty(geometry.output_shape, dtype=data.dtype)
    geometry.check_addressable()
    if plan.direct and mode in CHECKING_MODES:
        # One axis read with stride 1 and nothing to add: the indices are the offsets, and np.take
        # counts negatives from the end once and refuses out-of-range ones, as this operator does.
        try:
            return _take(data, index_array.reshape(plan.lead_out), plan).reshape(geometry.output_shape)
        except IndexError:
            pass  # the general path below names the offending index

    # Offsets (in blocks) contributed by the indices, in the logical indices shape. Horner's scheme over
    # the axes in order of decreasing stride (each stride divides the previous one) keeps them in one
    # int64 buffer: offsets = ((c_a * s_a/s_b + c_b) * s_b/s_c + c_c) * s_c.
    coordinates = index_array.reshape(plan.coordinate_shape)
    terms, out_of_range = [], None
    for j in plan.stride_order:  # every coordinate is checked, also when the output is empty
        term, bad, fresh = _coordinate_term(index_array, coordinates[..., j], j, geometry, mode)
        terms.append((plan.strides[j], term, fresh))
        if bad is not None:
            out_of_range = bad if out_of_range is None else (out_of_range | bad)
    if geometry.output_size == 0:  # nothing to read (and a zero-size dimension makes strides 0)
        return np.empty(geometry.output_shape, dtype=data.dtype)
    offsets, owned = _horner(terms)
    offsets = offsets.reshape(plan.lead_logical)  # the block dimensions have logical size 1

    # Plus the offsets of the non-axis dimensions the input really has (not broadcast ones).
    grid = plan.offset_grid()
    if owned and offsets.dtype == np.int64 and offsets.shape == plan.lead_out:
        flat = offsets if isinstance(grid, int) else np.add(offsets, grid, out=offsets)  # our own buffer
    else:  # never write into a view of the caller's indices
        flat = np.empty(plan.lead_out, dtype=np.int64)
        np.add(offsets, grid, out=flat)
    result = _take(data, flat, plan).reshape(geometry.output_shape)
    if out_of_range is not None:
        logical = geometry.logical_indices_shape
        result[np.broadcast_to(out_of_range.reshape(logical), geometry.output_shape)] = zero_element(data.dtype)
    return result


def _take(data: np.ndarray, flat: np.ndarray, plan: "_Plan") -> np.ndarray:
    # ndarray.take, not np.take: the function form's dispatch costs ~1.5 us a call, a tiny gather's whole read
    if plan.block_size == 1:
        return data.reshape(-1).take(flat)
    return data.reshape(plan.rows, plan.block_size).take(flat, axis=0)


_CACHED_GRID_ELEMENTS = 1 << 16  # larger offset grids are rebuilt per call, to bound the cache's memory


@dataclass(frozen=True)
class _Plan:
    """Everything about a call that depends only on shapes, axes and item size (cached)."""

    geometry: GatherGeometry
    rows: int                            # input rows of ``block_size`` elements
    block_size: int                      # elements copied per offset (trailing whole dimensions)
    strides: tuple[int, ...]             # row stride of each axis, in the order of axes
    stride_order: tuple[int, ...]        # positions in axes, by decreasing stride
    lead_out: tuple[int, ...]            # output shape without the block dimensions
    lead_logical: tuple[int, ...]        # logical indices shape without the block dimensions
    coordinate_shape: tuple[int, ...]    # indices seen as [*logical, k]
    grid_terms: tuple[tuple[int, int, int], ...]  # (dim, size, stride) of non-axis, non-broadcast dims
    direct: bool = False                 # one axis, stride 1, no grid, no broadcast: offsets = indices
    cached_grid: np.ndarray | int | None = None

    def offset_grid(self):
        """Offsets of the non-axis dimensions, broadcastable to ``lead_out`` (0 when there are none)."""
        if self.cached_grid is not None:
            return self.cached_grid
        return _build_grid(self.grid_terms, len(self.lead_out))


def _build_grid(terms, lead_rank: int):
    grid = 0
    for d, size, stride in terms:
        term = (np.arange(size, dtype=np.int64) * stride).reshape((-1,) + (1,) * (lead_rank - d - 1))
        grid = term if isinstance(grid, int) else grid + term
    return grid


class PlanCache:
    """Least-recently-used plans, bounded by count and by the bytes of their cached offset grids (a plan
    without a grid counts ``PLAN_BYTES``). Thread-safe; a failing plan (bad shapes) is not cached."""

    PLAN_BYTES = 1024

    def __init__(self, max_plans: int = 512, max_bytes: int = 16 << 20):
        self.max_plans, self.max_bytes = max_plans, max_bytes
        self._plans: "OrderedDict[tuple, tuple[_Plan, int]]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __call__(self, *key) -> _Plan:
        found = self._plans.get(key)  # the hot path takes no lock: OrderedDict's C methods hold the GIL
        if found is not None:
            try:
                self._plans.move_to_end(key)
            except KeyError:  # evicted by another thread in between
                pass
            return found[0]
        plan = _make_plan(*key)
        grid = plan.cached_grid
        size = self.PLAN_BYTES + (grid.nbytes if isinstance(grid, np.ndarray) else 0)
        with self._lock:
            if key not in self._plans:
                self._plans[key] = (plan, size)
                self._bytes += size
                while len(self._plans) > self.max_plans or self._bytes > self.max_bytes:
                    _, (_, dropped) = self._plans.popitem(last=False)
                    self._bytes -= dropped
        return plan

    def info(self) -> dict:
        """How full the cache is."""
        with self._lock:
            return {"plans": len(self._plans), "bytes": self._bytes, "max_plans": self.max_plans,
                    "max_bytes": self.max_bytes}


def _make_plan(input_shape: tuple[int, ...], indices_shape: tuple[int, ...], axes: tuple[int, ...], itemsize: int) -> _Plan:
    geometry = GatherGeometry.infer(input_shape, indices_shape, axes)
    _check_output_fits(geometry, itemsize)
    block_start = _block_start(geometry)
    lead_shape = input_shape[:block_start]
    row_strides = [prod(lead_shape[d + 1:]) for d in range(block_start)]
    k = len(geometry.axes)
    terms = tuple((d, geometry.output_shape[d], row_strides[d]) for d in range(block_start)
                  if d not in geometry.axes and input_shape[d] != 1)
    grid_elements = prod(size for _, size, _ in terms)
    lead_out = geometry.output_shape[:block_start]
    strides = tuple(row_strides[axis] for axis in geometry.axes)
    plan = _Plan(geometry, prod(lead_shape), prod(input_shape[block_start:]), strides,
                 tuple(sorted(range(k), key=lambda j: geometry.axes[j])),
                 lead_out, geometry.logical_indices_shape[:block_start],
                 (*geometry.logical_indices_shape, max(k, 1)), terms,
                 direct=k == 1 and strides == (1,) and not terms and geometry.logical_indices_shape[:block_start] == lead_out)
    if grid_elements <= _CACHED_GRID_ELEMENTS:
        grid = _build_grid(terms, block_start)
        if isinstance(grid, np.ndarray):
            grid.flags.writeable = False
        plan = dataclasses.replace(plan, cached_grid=grid)
    return plan


PLANS = PlanCache()
