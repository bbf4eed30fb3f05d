"""Every gather the seeds name, as gatherMultiaxis: each function keeps its framework's argument order
and defaults, aligns ranks with reshapes only (``np.reshape``, ``np.expand_dims``, ``np.squeeze``,
flattening, and for torch-style gathers a crop view of the data) and makes exactly one
``gather_multiaxis`` call. ``trace()`` records the shapes each call goes through.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from math import prod

import numpy as np

from .alignment import Alignment, gather_alignment, gather_elements_alignment, gather_nd_alignment
from .kernel import gather_multiaxis


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
def trace():
    """Collect a ``Step`` for every variant call made inside the ``with`` block."""
    steps: list[Step] = []
    _tracing.append(steps)
    try:
        yield steps
    finally:
        _tracing.remove(steps)


def _one_gather(variant, data, indices, axes, mode="error", *, data_shape=None, indices_shape=None,
                alignment: Alignment | None = None, output_shape=None, crop=False):
    """Reshape the operands, gather once, reshape the result; record the shapes when tracing."""
    data, indices = np.asarray(data), np.asarray(indices)
    aligned_data = data.reshape(data_shape) if data_shape is not None else data
    if crop:
        aligned_data = _crop(aligned_data, indices, alignment.axes[0])
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
    for steps in _tracing:
        steps.append(Step(variant, (data.shape, aligned_data.shape), (indices.shape, aligned_indices.shape),
                          tuple(axes), mode, (gathered.shape, result.shape)))
    return result


def _crop(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """A view of ``data`` cut to the indices' extents on every dimension but ``axis`` (torch.gather
    and ORT's GatherElements accept indices smaller than the data there)."""
    return data[tuple(slice(None) if d == axis else slice(0, size) for d, size in enumerate(indices.shape))]


# -- ONNX ----------------------------------------------------------------------------------------

def onnx_gather(data, indices, axis=0):
    data, indices = np.asarray(data), np.asarray(indices)
    return _one_gather("onnx_gather", data, indices, None,
                       alignment=gather_alignment(data.ndim, indices.ndim, axis))


def onnx_gather_elements(data, indices, axis=0):
    data, indices = np.asarray(data), np.asarray(indices)
    return _one_gather("onnx_gather_elements", data, indices, None, crop=True,
                       alignment=gather_elements_alignment(data.ndim, indices.ndim, axis))


def onnx_gather_nd(data, indices, batch_dims=0):
    data, indices = np.asarray(data), np.asarray(indices)
    alignment = gather_nd_alignment(data.ndim, indices.ndim, indices.shape[-1] if indices.ndim else 0, batch_dims)
    return _one_gather("onnx_gather_nd", data, indices, None, alignment=alignment)


# -- OpenVINO ------------------------------------------------------------------------------------

def openvino_gather(data, indices, axis, batch_dims=0, version=8):
    """Gather-1 (no batch_dims), Gather-7 (batch_dims, negative ones counted from the indices rank) and
    Gather-8 (also negative indices, and out-of-range indices give 0). For Gather-1/7 the specs allow
    indices in [0, dim-1] only; others raise here (OpenVINO's CPU plugin returns 0 for them)."""
    if version not in (1, 7, 8):
        raise ValueError(f"OpenVINO Gather has versions 1, 7 and 8, not {version}")
    data, indices = np.asarray(data), np.asarray(indices)
    if version == 1 and batch_dims:
        raise ValueError("Gather-1 has no batch_dims")
    if batch_dims < 0:
        batch_dims += indices.ndim
    alignment = gather_alignment(data.ndim, indices.ndim, axis, batch_dims)
    return _one_gather(f"openvino_gather (Gather-{version})", data, indices, None,
                       "zero" if version == 8 else "error", alignment=alignment)


def openvino_gather_nd(data, indices, batch_dims=0, version=8):
    """GatherND-8 keeps the batch dimensions; GatherND-5 flattens them into one. Negative indices count
    from the end, as in OpenVINO's CPU plugin; out-of-range ones raise (the spec requires indices in
    range, and the CPU plugin reads outside the data for them)."""
    if version not in (5, 8):
        raise ValueError(f"OpenVINO GatherND has versions 5 and 8, not {version}")
    data, indices = np.asarray(data), np.asarray(indices)
    alignment = gather_nd_alignment(data.ndim, indices.ndim, indices.shape[-1], batch_dims)
    output_shape = None
    if version == 5 and batch_dims:
        output_shape = (prod(indices.shape[:batch_dims]), *indices.shape[batch_dims:-1],
                        *data.shape[batch_dims + indices.shape[-1]:])
    return _one_gather(f"openvino_gather_nd (GatherND-{version})", data, indices, None, alignment=alignment,
                       output_shape=output_shape)


# -- NumPy ---------------------------------------------------------------------------------------

def numpy_take(a, indices, axis=None):
    a, indices = np.asarray(a), np.asarray(indices)
    if axis is None:
        return _one_gather("numpy_take (axis=None)", a, indices, None, data_shape=(-1,),
                           alignment=gather_alignment(1, indices.ndim, 0))
    return _one_gather("numpy_take", a, indices, None, alignment=gather_alignment(a.ndim, indices.ndim, axis))


def numpy_take_along_axis(arr, indices, axis):
    arr, indices = np.asarray(arr), np.asarray(indices)
    if axis is None:
        return _one_gather("numpy_take_along_axis (axis=None)", arr, indices, [0], data_shape=(-1,))
    return _one_gather("numpy_take_along_axis", arr, indices, None,
                       alignment=gather_elements_alignment(arr.ndim, indices.ndim, axis))


# -- PyTorch (NumPy arrays in, NumPy arrays out) --------------------------------------------------

def torch_gather(input, dim, index):
    input, index = np.asarray(input), np.asarray(index)
    return _one_gather("torch_gather", input, index, None, crop=True,
                       alignment=gather_elements_alignment(input.ndim, index.ndim, dim))


def torch_take(input, index):
    input, index = np.asarray(input), np.asarray(index)
    return _one_gather("torch_take", input, index, None, data_shape=(-1,),
                       alignment=gather_alignment(1, index.ndim, 0))


def torch_take_along_dim(input, indices, dim=None):
    input, indices = np.asarray(input), np.asarray(indices)
    if dim is None:
        return _one_gather("torch_take_along_dim (dim=None)", input, indices, [0], data_shape=(-1,),
                           indices_shape=(-1,))
    return _one_gather("torch_take_along_dim", input, indices, None,
                       alignment=gather_elements_alignment(input.ndim, indices.ndim, dim))


def torch_index_select(input, dim, index):
    input, index = np.asarray(input), np.asarray(index)
    return _one_gather("torch_index_select", input, index, None, indices_shape=(-1,),
                       alignment=gather_alignment(input.ndim, 1, dim))


# -- TensorFlow ----------------------------------------------------------------------------------

def tf_gather(params, indices, axis=None, batch_dims=0):
    params, indices = np.asarray(params), np.asarray(indices)
    if batch_dims < 0:
        batch_dims += indices.ndim
    axis = batch_dims if axis is None else axis
    return _one_gather("tf_gather", params, indices, None,
                       alignment=gather_alignment(params.ndim, indices.ndim, axis, batch_dims))


def tf_gather_nd(params, indices, batch_dims=0):
    params, indices = np.asarray(params), np.asarray(indices)
    return _one_gather("tf_gather_nd", params, indices, None,
                       alignment=gather_nd_alignment(params.ndim, indices.ndim, indices.shape[-1], batch_dims))


# -- TOSA ----------------------------------------------------------------------------------------

def tosa_gather(values, indices):
    """TOSA gather: values [N, K, C], indices [N, W] -> [N, W, C], output[n, w, c] = values[n, indices[n, w], c]."""
    values, indices = np.asarray(values), np.asarray(indices)
    if values.ndim != 3 or indices.ndim != 2:
        raise ValueError(f"TOSA gather takes values [N, K, C] and indices [N, W], got {list(values.shape)} "
                         f"and {list(indices.shape)}")
    return _one_gather("tosa_gather", values, indices, [1], indices_shape=(*indices.shape, 1))


# -- the proposal's own multiaxis cases ----------------------------------------------------------

def gather_xy_nchw(images, points):
    """(x, y) points read from every channel of NCHW images: points [P, 2] -> output [N, C, P].
    The axes [3, 2] read each pair's x into W and y into H (non-contiguous, swapped coordinates)."""
    images, points = np.asarray(images), np.asarray(points)
    return _one_gather("gather_xy_nchw", images, points, [3, 2], indices_shape=(1, 1, points.shape[0], 2),
                       output_shape=(*images.shape[:2], points.shape[0]))


VARIANTS = {function.__name__: function for function in (
    onnx_gather, onnx_gather_elements, onnx_gather_nd, openvino_gather, openvino_gather_nd, numpy_take,
    numpy_take_along_axis, torch_gather, torch_take, torch_take_along_dim, torch_index_select, tf_gather,
    tf_gather_nd, tosa_gather, gather_xy_nchw)}


def _example_calls():
    """One representative call per variant, for the mapping table."""
    x, rng = np.arange(2 * 3 * 4).reshape(2, 3, 4), np.random.default_rng(0)
    return [
        ("onnx_gather", lambda: onnx_gather(x, np.zeros((5, 6), np.int64), axis=1)),
        ("onnx_gather_elements", lambda: onnx_gather_elements(x, np.zeros((2, 7, 4), np.int64), axis=1)),
        ("onnx_gather_nd", lambda: onnx_gather_nd(x, np.zeros((2, 5, 1), np.int64), batch_dims=1)),
        ("openvino_gather", lambda: openvino_gather(x, np.zeros((2, 5), np.int64), axis=2, batch_dims=1)),
        ("openvino_gather_nd", lambda: openvino_gather_nd(x, np.zeros((2, 3, 5, 1), np.int64), batch_dims=2, version=5)),
        ("numpy_take", lambda: numpy_take(x, np.zeros((5,), np.int64))),
        ("numpy_take_along_axis", lambda: numpy_take_along_axis(x, np.zeros((1, 3, 6), np.int64), axis=2)),
        ("torch_gather", lambda: torch_gather(x, 2, np.zeros((2, 2, 6), np.int64))),
        ("torch_take", lambda: torch_take(x, np.zeros((5, 6), np.int64))),
        ("torch_take_along_dim", lambda: torch_take_along_dim(x, np.zeros((2, 1, 4), np.int64), dim=1)),
        ("torch_index_select", lambda: torch_index_select(x, 0, np.zeros((5,), np.int64))),
        ("tf_gather", lambda: tf_gather(x, np.zeros((2, 3, 5), np.int64), axis=2, batch_dims=2)),
        ("tf_gather_nd", lambda: tf_gather_nd(x, np.zeros((5, 2), np.int64))),
        ("tosa_gather", lambda: tosa_gather(x, np.zeros((2, 5), np.int64))),
        ("gather_xy_nchw", lambda: gather_xy_nchw(rng.random((1, 3, 8, 8)), np.zeros((5, 2), np.int64))),
    ]


def mapping_table() -> str:
    """The Markdown table of how each variant maps onto gatherMultiaxis, traced from example calls."""
    def shape(s):
        return "[" + ", ".join(map(str, s)) + "]"

    rows = ["| function | data → aligned | indices → aligned | axes | mode | gatherMultiaxis output → result |",
            "|---|---|---|---|---|---|"]
    for name, call in _example_calls():
        with trace() as steps:
            call()
        (step,) = steps
        rows.append(f"| `{name}` | {shape(step.data[0])} → {shape(step.data[1])} | {shape(step.indices[0])} → "
                    f"{shape(step.indices[1])} | {list(step.axes)} | {step.mode} | {shape(step.output[0])} → "
                    f"{shape(step.output[1])} |")
    return "\n".join(rows)
