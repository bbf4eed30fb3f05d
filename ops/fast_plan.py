"""The fast plan of a gather: per (axes, mode, data shape, indices shape, inserted indices axes), one NumPy call
that gives ``gather_multiaxis``'s result bit for bit, or None where only the kernel (``ops.kernel``) may answer.

NumPy's integer indexing counts a negative index from the end once and raises IndexError for one out of range:
the modes that raise, on a non-empty output. Modes zero and clamp, empty outputs, shapes the contract refuses,
an indexed axis of size 0 and large advanced-index outputs have no plan; a call that raises goes to the kernel,
which names the bad index."""

from __future__ import annotations

import threading
from typing import Callable, Sequence, assert_never

import numpy as np

from .contract import INDEX_DTYPES, OUT_OF_RANGE_OF, OutOfRange, normalize_axes
from .geometry import GatherGeometry

GatherCall = Callable[[np.ndarray, np.ndarray], np.ndarray]

# NumPy's advanced index costs ~12 ns an output element, the kernel's flat-offset take ~5 ns (the crossover
# is near 4k elements): larger outputs of that form keep the kernel. The take forms have no such limit.
FANCY_MAX_ELEMENTS = 2048
# Larger outputs go to the kernel, which checks first that they fit in memory.
TAKE_MAX_ELEMENTS = 1 << 26
_INDEX_DTYPES = frozenset(INDEX_DTYPES)  # a set lookup: half the time of the tuple's comparisons


def index_rows(data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``data.take(indices, axis=0)`` for 1-D integer ``indices`` (negatives once, out of range refused): indexing
    is ~0.15 us faster on tiny arrays, such as the shape arithmetic of TorchScript exports."""
    return data[indices]


def _take_call(axis: int, count: int | None) -> GatherCall:
    if count is None:
        return lambda data, indices: data.take(indices, axis=axis)
    return lambda data, indices: data.take(indices.reshape(count), axis=axis)


def _take_form(geometry: GatherGeometry, indices_shape: tuple[int, ...]) -> GatherCall | None:
    """One axis, the indices' other dims 1, the data's equal to the output's: ``ndarray.take`` of the values."""
    (axis,) = geometry.axes
    logical, out = geometry.logical_indices_shape, geometry.output_shape
    if any(logical[d] != 1 or geometry.input_shape[d] != out[d] for d in range(geometry.rank) if d != axis):
        return None
    count = logical[axis]
    if indices_shape != (count,):
        return _take_call(axis, count)
    return index_rows if axis == 0 else _take_call(axis, None)


def _lead_rank(geometry: GatherGeometry) -> int:
    """The dims before the trailing ones copied whole (not indexed, indices 1, data equal to the output)."""
    rank = geometry.rank
    while rank and rank - 1 not in geometry.axes and geometry.logical_indices_shape[rank - 1] == 1 and (
            geometry.input_shape[rank - 1] == geometry.output_shape[rank - 1]):
        rank -= 1
    return rank


def _advanced_form(geometry: GatherGeometry) -> GatherCall:
    """One advanced index over the lead dims: the indices' coordinates, the other dims' aranges precomputed."""
    lead = _lead_rank(geometry)
    entries: list[np.ndarray | None] = []
    for d in range(lead):
        if d in geometry.axes:
            entries.append(None)
            continue
        shape = [1] * lead
        shape[d] = geometry.input_shape[d]  # size 1: index 0, broadcast along the indices
        entry = np.arange(shape[d], dtype=np.intp).reshape(shape)
        entry.flags.writeable = False
        entries.append(entry)
    slots = tuple((geometry.axes[j], j) for j in range(len(geometry.axes)))
    coordinates = (*geometry.logical_indices_shape[:lead], len(slots))

    def gather(data: np.ndarray, indices: np.ndarray) -> np.ndarray:
        tuples = indices.reshape(coordinates)
        index = list(entries)
        for d, j in slots:
            index[d] = tuples[..., j]
        return data[tuple(index)]
    return gather


def make_fast_plan(axes: Sequence[int], mode, data_shape: tuple[int, ...], indices_shape: tuple[int, ...],
                   indices_axes: tuple[int, ...] = ()) -> GatherCall | None:
    """The plan of one call (not cached), or None; ``indices_axes``: size-1 dims inserted into the indices first."""
    outcome = OUT_OF_RANGE_OF.get(mode) if isinstance(mode, str) else None  # a Mode is a str
    match outcome:
        case OutOfRange.RAISE:
            pass
        case OutOfRange.ZERO | OutOfRange.CLAMP | None:  # indices the kernel rewrites; None: not a mode
            return None
        case _:
            assert_never(outcome)
    try:
        shape = indices_shape
        if indices_axes:  # np.expand_dims's own rule and errors, on a view of no memory
            shape = np.expand_dims(np.broadcast_to(np.int8(0), indices_shape), indices_axes).shape
        geometry = GatherGeometry.infer(data_shape, shape, normalize_axes(axes, len(data_shape)))
    except (ValueError, TypeError):  # the kernel raises the same error, with its text
        return None
    if not geometry.axes or not 0 < geometry.output_size <= TAKE_MAX_ELEMENTS or any(
            geometry.input_shape[axis] == 0 for axis in geometry.axes):
        return None
    if len(geometry.axes) == 1:
        call = _take_form(geometry, indices_shape)
        if call is not None:
            return call
    return _advanced_form(geometry) if geometry.output_size <= FANCY_MAX_ELEMENTS else None


class FastPlans:
    """The fast plans by call key, at most ``max_plans`` (the oldest dropped first); thread-safe. ``on_clear``:
    callables run by ``clear``, which empty the caches their owners keep of these plans."""

    def __init__(self, max_plans: int = 4096):
        self.max_plans = max_plans
        self.plans: dict[tuple, GatherCall | None] = {}
        self.on_clear: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def __call__(self, axes: tuple[int, ...], mode, data_shape: tuple[int, ...], indices_shape: tuple[int, ...],
                 indices_axes: tuple[int, ...] = ()) -> GatherCall | None:
        key = (axes, mode, data_shape, indices_shape, indices_axes)
        try:
            return self.plans[key]  # the hot path takes no lock: a dict lookup holds the GIL
        except KeyError:
            return self.add(key)

    def add(self, key: tuple) -> GatherCall | None:
        """Make and keep the plan of ``key`` = (axes, mode, data shape, indices shape, indices axes)."""
        plan = make_fast_plan(*key)
        with self._lock:
            while len(self.plans) >= self.max_plans:
                del self.plans[next(iter(self.plans))]
            self.plans[key] = plan
        return plan

    def __len__(self) -> int:
        return len(self.plans)

    def clear(self) -> None:
        """Forget every plan."""
        with self._lock:
            self.plans.clear()
            for clear in self.on_clear:
                clear()


FAST_PLANS = FastPlans()


def fast_gather(data: np.ndarray, indices: np.ndarray, axes: tuple[int, ...], mode,
                indices_axes: tuple[int, ...] = ()) -> np.ndarray | None:
    """``gather_multiaxis(data, np.expand_dims(indices, indices_axes), axes, mode)`` by its fast plan, or None.

    Args:
        data: the data array (an object array has no plan: its strings are checked on the kernel's path).
        indices: int32 or int64 indices.
        axes: the gathered dims, Python ints.
        mode: a ``Mode`` or its string.
        indices_axes: size-1 dims inserted into the indices first (an absorbed alignment).

    Returns:
        A new C-contiguous array, bit-identical to the kernel's; None: call the kernel (it raises, if it must)."""
    if data.dtype.hasobject or indices.dtype not in _INDEX_DTYPES:
        return None
    key = (axes, mode, data.shape, indices.shape, indices_axes)
    try:
        plan = FAST_PLANS.plans[key]
    except KeyError:
        plan = FAST_PLANS.add(key)
    if plan is None:
        return None
    try:
        return plan(data, indices)
    except (IndexError, TypeError, ValueError):
        return None


__all__ = ["FANCY_MAX_ELEMENTS", "FAST_PLANS", "TAKE_MAX_ELEMENTS", "FastPlans", "GatherCall", "fast_gather",
           "index_rows", "make_fast_plan"]
