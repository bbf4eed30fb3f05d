"""The body of GatherMultiaxisRecorded: the gather a rewritten node records (Gather, GatherElements, GatherND),
on the data and indices the original read, aligned per call as the rewrite's run-time alignment aligns them in
the graph (``graphs.sources``' ``align_at_run_time``), so that the kernel sees the same arrays: the same bits,
the same error naming the same index. The alignment is planned once per (gather, ranks)."""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from ..alignment import GATHER, GATHER_ELEMENTS, GATHER_ND, Alignment, AlignmentError
from ..contract import CHECKING_MODE_VALUES
from ..fast_plan import fast_gather
from ..kernel import gather_multiaxis
from .bridge_strings import check_output_strings
from .run_errors import RUN_ERRORS
from .run_ops import parse_recorded


class RecordedPlan(NamedTuple):
    """How one recorded gather's inputs of given ranks become the kernel's: ``alignment``'s Unsqueezes and
    restore Squeeze, GatherElements' cut of the data to the indices' extents (on its first ``fit_rank`` dims but
    the axis; -1: none), GatherND's zero coordinate for empty tuples, and Gather's ``ndarray.take`` axis."""

    alignment: Alignment
    fit_rank: int = -1
    pad_coordinates: bool = False
    take_axis: int | None = None


def run_time_axis(axis: int, rank: int) -> int:
    """The rewrite's run-time axis: a negative one counted from the end, one below ``-rank`` becomes ``rank``."""
    if axis >= 0:
        return axis
    return axis + rank if axis + rank >= 0 else rank


def gather_plan(data_rank: int, indices_rank: int, axis: int) -> RecordedPlan:
    """Gather: the indices get a trailing 1, their dims go in front of the data axis, that 1 is read and squeezed."""
    r, q = data_rank, indices_rank
    a = run_time_axis(axis, r)
    if not 0 <= a < r:
        raise AlignmentError(f"{GATHER} axis {axis} is out of range for data rank {r}")
    read = a + q
    return RecordedPlan(Alignment(axes=(read,), data_unsqueeze=tuple(range(a, read)),
                                  indices_unsqueeze=(*range(a), *range(read, r + q)), output_squeeze=(read,)),
                        take_axis=a)


def gather_elements_plan(indices_rank: int, axis: int) -> RecordedPlan:
    """GatherElements: the data cut to the indices' extents except on the axis, nothing aligned."""
    return RecordedPlan(Alignment(axes=(run_time_axis(axis, indices_rank),)), fit_rank=indices_rank)


def gather_nd_plan(data_rank: int, indices_rank: int, k: int, batch_dims: int) -> RecordedPlan:
    """GatherND: b batch dims, an index region of max(k, q-1-b) dims, the trailing data dims, and one dim of the
    folded coordinates at the end (indices with no coordinate get one zero coordinate first)."""
    r, q, b = data_rank, indices_rank, batch_dims
    if q == 0:
        raise AlignmentError(f"{GATHER_ND} with scalar indices")
    region_end = b + max(k, q - 1 - b)
    last_axis = region_end + r - (b + k)
    return RecordedPlan(Alignment(axes=tuple(range(b, b + k)),
                                  data_unsqueeze=(*range(b + k, region_end), last_axis),
                                  indices_unsqueeze=tuple(range(q - 1, last_axis)),
                                  output_squeeze=(*range(q - 1, region_end), last_axis)),
                        pad_coordinates=k == 0)


_plans: dict[tuple, RecordedPlan] = {}
_plans_lock = threading.Lock()
MAX_PLANS = 4096


def recorded_plan(gather: str, data_rank: int, indices_shape: tuple[int, ...]) -> RecordedPlan:
    """The plan of a ``gather`` attribute (``run_ops.recorded_attribute``) for these ranks, made once.

    Raises:
        AlignmentError: ranks or attributes no alignment fits (the graph's alignment fails there too)."""
    op_type, attributes = parse_recorded(gather)
    k = indices_shape[-1] if op_type == GATHER_ND and indices_shape else 0
    key = (gather, data_rank, len(indices_shape), k)
    plan = _plans.get(key)
    if plan is None:
        if op_type == GATHER:
            plan = gather_plan(data_rank, len(indices_shape), attributes.get("axis", 0))
        elif op_type == GATHER_ELEMENTS:
            plan = gather_elements_plan(len(indices_shape), attributes.get("axis", 0))
        elif op_type == GATHER_ND:
            plan = gather_nd_plan(data_rank, len(indices_shape), k, attributes.get("batch_dims", 0))
        else:
            raise AlignmentError(f"no recorded form of {op_type}")
        with _plans_lock:
            if len(_plans) >= MAX_PLANS:
                _plans.clear()
            _plans[key] = plan
    return plan


def _fitted(data: np.ndarray, indices: np.ndarray, plan: RecordedPlan) -> np.ndarray:
    """GatherElements' Slice of the data to the indices' extents (ORT's Slice: ends clamped, axes in range)."""
    rank, axis = plan.fit_rank, plan.alignment.axes[0]
    if data.ndim < rank:
        raise ValueError(f"{GATHER_ELEMENTS}: data of rank {data.ndim} cut on the {rank} dims of its indices")
    return data[tuple(slice(None) if d == axis else slice(0, indices.shape[d]) for d in range(rank))]


def _squeezed(output: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """ONNX Squeeze with explicit axes, as a view."""
    rank = output.ndim
    if not axes:
        return output
    dropped = {axis % rank for axis in axes if -rank <= axis < rank}
    if len(dropped) != len(axes) or any(output.shape[d] != 1 for d in dropped):
        raise ValueError(f"Squeeze (restoring the rank): cannot squeeze axes {list(axes)} of shape {list(output.shape)}")
    return output.reshape([size for d, size in enumerate(output.shape) if d not in dropped])


def _aligned_output(data: np.ndarray, indices: np.ndarray, plan: RecordedPlan, mode: str, fast: bool) -> np.ndarray:
    alignment = plan.alignment
    if plan.fit_rank >= 0:
        data = _fitted(data, indices, plan)
    if plan.pad_coordinates:
        indices = np.concatenate([indices, np.zeros((*indices.shape[:-1], 1), dtype=indices.dtype)], axis=-1)
    if alignment.data_unsqueeze:
        data = np.expand_dims(data, alignment.data_unsqueeze)
    output = fast_gather(data, indices, alignment.axes, mode, alignment.indices_unsqueeze) if fast else None
    if output is None:
        if alignment.indices_unsqueeze:
            indices = np.expand_dims(indices, alignment.indices_unsqueeze)
        output = gather_multiaxis(data, indices, alignment.axes, mode)
        if output.dtype == object:
            check_output_strings(output)
    return _squeezed(output, alignment.output_squeeze)


def recorded_output(data: np.ndarray, indices: np.ndarray, gather: str, mode: str, token, fast: bool = True) -> np.ndarray:
    """The recorded gather's output; an error goes to run ``token`` (never raised) with an empty placeholder.

    Args:
        data: what the recorded gather read as data; indices: its indices.
        gather: the node's ``gather`` attribute; mode: its mode.
        token: the run token (an int64 scalar array or int).
        fast: whether the fast plan (``ops.fast_plan``) and Gather's ``ndarray.take`` may answer first.

    Returns:
        A C-contiguous array, or a view the caller copies (the restore Squeeze of a new array)."""
    try:
        plan = recorded_plan(gather, data.ndim, indices.shape)
        if (fast and plan.take_axis is not None and mode in CHECKING_MODE_VALUES and data.size and indices.size
                and not data.dtype.hasobject):
            try:  # ONNX Gather is ndarray.take (negatives once); an error goes the kernel's way, which names it
                return data.take(indices, axis=plan.take_axis)
            except (IndexError, TypeError):
                pass
        return _aligned_output(data, indices, plan, mode, fast)
    except Exception as exc:  # noqa: BLE001 - every error must travel to the run, not end the process
        RUN_ERRORS.record(int(token), exc)
        if data.dtype.hasobject:
            return np.full((0,) * max(data.ndim, 1), "", dtype=object)
        return np.zeros((0,) * max(data.ndim, 1), dtype=data.dtype)


__all__ = ["MAX_PLANS", "RecordedPlan", "gather_elements_plan", "gather_nd_plan", "gather_plan", "recorded_output",
           "recorded_plan", "run_time_axis"]
