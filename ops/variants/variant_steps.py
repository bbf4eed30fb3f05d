"""The one gather every variant makes, and the trace of the shapes it goes through."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..alignment import Alignment
from ..contract import Mode
from ..kernel import gather_multiaxis


@dataclass(frozen=True)
class Step:
    """The shapes of one variant call: operands before and after alignment, axes, result."""

    variant: str
    data: tuple[tuple[int, ...], tuple[int, ...]]
    indices: tuple[tuple[int, ...], tuple[int, ...]]
    axes: tuple[int, ...]
    mode: str
    output: tuple[tuple[int, ...], tuple[int, ...]]


_tracing: list[list[Step]] = []


@contextlib.contextmanager
def trace() -> Iterator[list[Step]]:
    """``with trace() as steps``: a ``Step`` is appended to ``steps`` for every variant call in the block."""
    steps: list[Step] = []
    _tracing.append(steps)
    try:
        yield steps
    finally:  # by identity: list.remove would take an equal list of an enclosing trace
        _tracing[:] = [open_steps for open_steps in _tracing if open_steps is not steps]


def one_gather(variant, data, indices, axes, mode=Mode.ERROR, *, data_shape=None, indices_shape=None,
               alignment: Alignment | None = None, output_shape=None, crop=False):
    """Reshape the operands, gather once, reshape the result; record the shapes when tracing."""
    data, indices = np.asarray(data), np.asarray(indices)
    aligned_data = data.reshape(data_shape) if data_shape is not None else data
    if crop:
        assert alignment is not None  # crop: GatherElements' variants, which pass their alignment
        aligned_data = crop_to_indices(aligned_data, indices, alignment.axes[0])
    aligned_indices = indices.reshape(indices_shape) if indices_shape is not None else indices
    if alignment is not None:
        aligned_data = np.expand_dims(aligned_data, alignment.data_unsqueeze)
        aligned_indices = np.expand_dims(aligned_indices, alignment.indices_unsqueeze)
        axes = alignment.axes
    gathered = gather_multiaxis(aligned_data, aligned_indices, list(axes), mode)
    result = gathered
    if alignment is not None and alignment.output_squeeze:
        result = np.squeeze(result, alignment.output_squeeze)
    if output_shape is not None:
        result = result.reshape(output_shape)
    record_step(variant, data, aligned_data, indices, aligned_indices, axes, mode, gathered, result)
    return result


def record_step(variant, data, aligned_data, indices, aligned_indices, axes, mode, gathered, result):
    """Append the shapes of one variant call to every open ``trace()``."""
    for steps in _tracing:
        steps.append(Step(variant, (data.shape, aligned_data.shape), (indices.shape, aligned_indices.shape),
                          tuple(axes), Mode.from_any(mode).value, (gathered.shape, result.shape)))


def crop_to_indices(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """A view of ``data`` cut to the indices' extents on every dimension but ``axis``."""
    # torch.gather and ORT's GatherElements accept indices smaller than the data on the other axes
    return data[tuple(slice(None) if d == axis else slice(0, size) for d, size in enumerate(indices.shape))]
