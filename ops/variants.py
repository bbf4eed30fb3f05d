"""Every gather the seeds name, as gatherMultiaxis: each function keeps its framework's argument order
and defaults, aligns ranks with reshapes only (``np.reshape``, ``np.expand_dims``, ``np.squeeze``,
flattening, and for torch-style gathers a crop view of the data) and makes exactly one
``gather_multiaxis`` call. ``jax_gather`` (StableHLO gather) also transposes the operand and computes
its indices (clamped starts plus window iotas) and, in fill mode, a mask. ``trace()`` records the
shapes each call goes through.
"""

from __future__ import annotations

import contextlib
import enum
import operator
from dataclasses import dataclass
from math import prod
from typing import Iterator, Sequence, SupportsIndex

import numpy as np
from numpy.typing import ArrayLike

from .alignment import Alignment, gather_alignment, gather_elements_alignment, gather_nd_alignment
from .contract import GatherIndexError, GatherShapeError
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
def trace() -> Iterator[list[Step]]:
    """Collect a ``Step`` for every variant call made inside the ``with`` block.

    Returns:
        A context manager; ``with trace() as steps`` gives the list the ``Step`` records are appended to.
    """
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
        assert alignment is not None  # crop: GatherElements' variants, which pass their alignment
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
    _record(variant, data, aligned_data, indices, aligned_indices, axes, mode, gathered, result)
    return result


def _record(variant, data, aligned_data, indices, aligned_indices, axes, mode, gathered, result):
    """Append the shapes of one variant call to every open ``trace()``."""
    for steps in _tracing:
        steps.append(Step(variant, (data.shape, aligned_data.shape), (indices.shape, aligned_indices.shape),
                          tuple(axes), mode, (gathered.shape, result.shape)))


def _crop(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """A view of ``data`` cut to the indices' extents on every dimension but ``axis`` (torch.gather
    and ORT's GatherElements accept indices smaller than the data there)."""
    return data[tuple(slice(None) if d == axis else slice(0, size) for d, size in enumerate(indices.shape))]


# -- ONNX ----------------------------------------------------------------------------------------

def onnx_gather(data: ArrayLike, indices: ArrayLike, axis: int = 0) -> np.ndarray:
    """ONNX ``Gather`` (opset 13): ``output = data`` indexed by ``indices`` on ``axis``; negative indices count
    from the end, out-of-range ones raise.

    Args:
        data: the data tensor, rank r >= 1.
        indices: int32 or int64 tensor of any rank q.
        axis: the axis of ``data`` to gather on, in ``[-r, r - 1]``.

    Returns:
        An array of rank q + r - 1 and ``data``'s dtype.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    data, indices = np.asarray(data), np.asarray(indices)
    return _one_gather("onnx_gather", data, indices, None,
                       alignment=gather_alignment(data.ndim, indices.ndim, axis))


def onnx_gather_elements(data: ArrayLike, indices: ArrayLike, axis: int = 0) -> np.ndarray:
    """ONNX ``GatherElements`` (opset 13): ``output[i][j][k] = data[index[i][j][k]][j][k]`` for ``axis=0``, and
    so on; ``indices`` may be smaller than ``data`` on the other axes.

    Args:
        data: the data tensor, rank r >= 1.
        indices: int32 or int64 tensor of rank r.
        axis: the axis of ``data`` to gather on, in ``[-r, r - 1]``.

    Returns:
        An array of ``indices``' shape and ``data``'s dtype.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    data, indices = np.asarray(data), np.asarray(indices)
    return _one_gather("onnx_gather_elements", data, indices, None, crop=True,
                       alignment=gather_elements_alignment(data.ndim, indices.ndim, axis))


def onnx_gather_nd(data: ArrayLike, indices: ArrayLike, batch_dims: int = 0) -> np.ndarray:
    """ONNX ``GatherND`` (opset 13): the last dimension of ``indices`` holds coordinate tuples into ``data``
    after its first ``batch_dims`` dimensions.

    Args:
        data: the data tensor, rank r >= 1.
        indices: int64 (or int32) tensor of rank q >= 1; ``indices.shape[-1]`` <= r - batch_dims.
        batch_dims: the number of leading batch dimensions ``data`` and ``indices`` share.

    Returns:
        An array of shape ``indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:]`` and ``data``'s
        dtype.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    data, indices = np.asarray(data), np.asarray(indices)
    alignment = gather_nd_alignment(data.ndim, indices.ndim, indices.shape[-1] if indices.ndim else 0, batch_dims)
    return _one_gather("onnx_gather_nd", data, indices, None, alignment=alignment)


# -- OpenVINO ------------------------------------------------------------------------------------

def openvino_gather(data: ArrayLike, indices: ArrayLike, axis: int, batch_dims: int = 0,
                    version: int = 8) -> np.ndarray:
    """Gather-1 (no batch_dims), Gather-7 (batch_dims, negative ones counted from the indices rank) and
    Gather-8 (also negative indices, and out-of-range indices give 0). For Gather-1/7 the specs allow
    indices in [0, dim-1] only; others raise here (OpenVINO's CPU plugin returns 0 for them).

    Args:
        data: the data tensor.
        indices: the integer indices tensor.
        axis: the axis of ``data`` to gather on.
        batch_dims: the number of leading batch dimensions (Gather-7 and -8; negative counts from the rank
            of ``indices``).
        version: the OpenVINO opset version of Gather: 1, 7 or 8.

    Returns:
        An array of ``data``'s dtype.

    Raises:
        ValueError: ``version`` is not 1, 7 or 8, or ``batch_dims`` is given to Gather-1.
        GatherIndexError: an index is out of range (Gather-1 and -7).
        GatherShapeError: the shapes or the axis do not fit together.
    """
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


def openvino_gather_nd(data: ArrayLike, indices: ArrayLike, batch_dims: int = 0, version: int = 8) -> np.ndarray:
    """GatherND-8 keeps the batch dimensions; GatherND-5 flattens them into one. Negative indices count
    from the end, as in OpenVINO's CPU plugin; out-of-range ones raise (the spec requires indices in
    range, and the CPU plugin reads outside the data for them).

    Args:
        data: the data tensor.
        indices: the integer indices tensor; its last dimension holds the coordinate tuples.
        batch_dims: the number of leading batch dimensions ``data`` and ``indices`` share.
        version: the OpenVINO opset version of GatherND: 5 or 8.

    Returns:
        An array of ``data``'s dtype (GatherND-5 with batch_dims: the batch dimensions flattened into one).

    Raises:
        ValueError: ``version`` is not 5 or 8.
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes do not fit together.
    """
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

def numpy_take(a: ArrayLike, indices: ArrayLike, axis: int | None = None) -> np.ndarray:
    """``numpy.take(a, indices, axis)`` (its default ``mode="raise"``): negative indices count from the end.

    Args:
        a: the source array.
        indices: the integer indices, of any shape.
        axis: the axis to take along; None: ``a`` flattened.

    Returns:
        An array of ``a``'s dtype: ``a.shape[:axis] + indices.shape + a.shape[axis + 1:]`` (``indices``'
        shape when ``axis`` is None).

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    a, indices = np.asarray(a), np.asarray(indices)
    if axis is None:
        return _one_gather("numpy_take (axis=None)", a, indices, None, data_shape=(-1,),
                           alignment=gather_alignment(1, indices.ndim, 0))
    return _one_gather("numpy_take", a, indices, None, alignment=gather_alignment(a.ndim, indices.ndim, axis))


def numpy_take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None) -> np.ndarray:
    """``numpy.take_along_axis(arr, indices, axis)``.

    Args:
        arr: the source array.
        indices: integer indices of ``arr``'s rank (1-D when ``axis`` is None), broadcast against ``arr``.
        axis: the axis to take along; None: ``arr`` flattened.

    Returns:
        An array of ``arr``'s dtype.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    arr, indices = np.asarray(arr), np.asarray(indices)
    if axis is None:
        return _one_gather("numpy_take_along_axis (axis=None)", arr, indices, [0], data_shape=(-1,))
    return _one_gather("numpy_take_along_axis", arr, indices, None,
                       alignment=gather_elements_alignment(arr.ndim, indices.ndim, axis))


# -- PyTorch (NumPy arrays in, NumPy arrays out) --------------------------------------------------

def torch_gather(input: ArrayLike, dim: int, index: ArrayLike) -> np.ndarray:
    """``torch.gather(input, dim, index)``: ``out[i][j][k] = input[index[i][j][k]][j][k]`` for ``dim=0``, and so
    on; ``index`` may be smaller than ``input`` on the other dimensions.

    Args:
        input: the source tensor (a NumPy array here).
        dim: the dimension to index along.
        index: integer indices of ``input``'s rank.

    Returns:
        An array of ``index``' shape and ``input``'s dtype.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    input, index = np.asarray(input), np.asarray(index)
    return _one_gather("torch_gather", input, index, None, crop=True,
                       alignment=gather_elements_alignment(input.ndim, index.ndim, dim))


def torch_take(input: ArrayLike, index: ArrayLike) -> np.ndarray:
    """``torch.take(input, index)``: ``input`` seen as 1-D.

    Args:
        input: the source tensor (a NumPy array here).
        index: integer indices into the flattened ``input``, of any shape.

    Returns:
        An array of ``index``' shape and ``input``'s dtype.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    input, index = np.asarray(input), np.asarray(index)
    return _one_gather("torch_take", input, index, None, data_shape=(-1,),
                       alignment=gather_alignment(1, index.ndim, 0))


def torch_take_along_dim(input: ArrayLike, indices: ArrayLike, dim: int | None = None) -> np.ndarray:
    """``torch.take_along_dim(input, indices, dim)``.

    Args:
        input: the source tensor (a NumPy array here).
        indices: integer indices of ``input``'s rank (any shape when ``dim`` is None).
        dim: the dimension to take along; None: ``input`` and ``indices`` flattened.

    Returns:
        An array of ``input``'s dtype.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    input, indices = np.asarray(input), np.asarray(indices)
    if dim is None:
        return _one_gather("torch_take_along_dim (dim=None)", input, indices, [0], data_shape=(-1,),
                           indices_shape=(-1,))
    return _one_gather("torch_take_along_dim", input, indices, None,
                       alignment=gather_elements_alignment(input.ndim, indices.ndim, dim))


def torch_index_select(input: ArrayLike, dim: int, index: ArrayLike) -> np.ndarray:
    """``torch.index_select(input, dim, index)``.

    Args:
        input: the source tensor (a NumPy array here).
        dim: the dimension to select along.
        index: 1-D (or scalar) integer indices.

    Returns:
        An array of ``input``'s rank and dtype, of size ``index.size`` on ``dim``.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    input, index = np.asarray(input), np.asarray(index)
    return _one_gather("torch_index_select", input, index, None, indices_shape=(-1,),
                       alignment=gather_alignment(input.ndim, 1, dim))


# -- TensorFlow ----------------------------------------------------------------------------------

def tf_gather(params: ArrayLike, indices: ArrayLike, axis: int | None = None, batch_dims: int = 0) -> np.ndarray:
    """``tf.gather(params, indices, axis, batch_dims)``.

    Args:
        params: the source tensor.
        indices: integer indices, of any rank >= ``batch_dims``.
        axis: the axis of ``params`` to gather on; None: ``batch_dims``.
        batch_dims: the number of leading batch dimensions (negative counts from the rank of ``indices``).

    Returns:
        An array of shape ``params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]`` and
        ``params``' dtype.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    params, indices = np.asarray(params), np.asarray(indices)
    if batch_dims < 0:
        batch_dims += indices.ndim
    axis = batch_dims if axis is None else axis
    return _one_gather("tf_gather", params, indices, None,
                       alignment=gather_alignment(params.ndim, indices.ndim, axis, batch_dims))


def tf_gather_nd(params: ArrayLike, indices: ArrayLike, batch_dims: int = 0) -> np.ndarray:
    """``tf.gather_nd(params, indices, batch_dims)``.

    Args:
        params: the source tensor.
        indices: integer indices; the last dimension holds the coordinate tuples.
        batch_dims: the number of leading batch dimensions.

    Returns:
        An array of shape ``indices.shape[:-1] + params.shape[batch_dims + indices.shape[-1]:]`` and
        ``params``' dtype.

    Raises:
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    params, indices = np.asarray(params), np.asarray(indices)
    return _one_gather("tf_gather_nd", params, indices, None,
                       alignment=gather_nd_alignment(params.ndim, indices.ndim, indices.shape[-1], batch_dims))


# -- TOSA ----------------------------------------------------------------------------------------

def tosa_gather(values: ArrayLike, indices: ArrayLike) -> np.ndarray:
    """TOSA gather: values [N, K, C], indices [N, W] -> [N, W, C], output[n, w, c] = values[n, indices[n, w], c].

    Args:
        values: the data, shape [N, K, C].
        indices: integer indices into K, shape [N, W].

    Returns:
        An array of shape [N, W, C] and ``values``' dtype.

    Raises:
        ValueError: ``values`` is not rank 3 or ``indices`` not rank 2.
        GatherIndexError: an index is out of range.
    """
    values, indices = np.asarray(values), np.asarray(indices)
    if values.ndim != 3 or indices.ndim != 2:
        raise ValueError(f"TOSA gather takes values [N, K, C] and indices [N, W], got {list(values.shape)} "
                         f"and {list(indices.shape)}")
    return _one_gather("tosa_gather", values, indices, [1], indices_shape=(*indices.shape, 1))


# -- CoreML (coremltools MIL) ---------------------------------------------------------------------

def _coreml_indices(indices: ArrayLike, validate_indices: bool) -> np.ndarray:
    """CoreML indices are int32, int16, uint16, int8 or uint8 (widened to int32 for the kernel). Negative
    ones count from the end, as coremltools' value inference (``np.take``) and the iOS15/iOS16 docs say;
    with ``validate_indices`` they are out of bounds, as the iOS17 check says (its docs say both)."""
    indices = np.asarray(indices)
    if indices.dtype.kind not in "iu" or indices.dtype == np.uint32:  # coremltools refuses uint32 in every opset
        raise TypeError(f"CoreML gather indices must be int32, int16, uint16, int8 or uint8, got {indices.dtype}")
    if validate_indices and (indices < 0).any():
        raise GatherIndexError(f"validate_indices: CoreML (iOS17) treats negative indices as out of bounds, got "
                               f"{indices[indices < 0][0]}")
    if indices.dtype == np.uint64:  # a MIL constant (coremltools narrows it to int32, clamping): no index
        # at or above 2**63 is in range, and below it int64 is exact (astype(int32) wrapped 2**32 + 1 to 1)
        too_large = indices > np.iinfo(np.int64).max
        if too_large.any():
            raise GatherIndexError(f"index {indices[too_large][0]} is out of range (above int64)")
        return indices.astype(np.int64)
    return indices if indices.dtype in (np.int32, np.int64) else indices.astype(np.int32)  # 8/16-bit: exact


def coreml_gather(x: ArrayLike, indices: ArrayLike, axis: int = 0, batch_dims: int = 0,
                  validate_indices: bool = False) -> np.ndarray:
    """MIL ``gather`` (iOS15-iOS17): output shape ``D[:axis] + N[batch_dims:] + D[axis+1:]``, the first
    ``batch_dims`` dims of ``x`` and ``indices`` paired (tf.gather's rule, a count in [0, axis]).
    Out-of-range indices raise (CoreML leaves them undefined unless ``validate_indices``).

    Args:
        x: the data tensor.
        indices: int32, int16, uint16, int8 or uint8 indices.
        axis: the axis of ``x`` to gather on.
        batch_dims: the number of leading batch dimensions, >= 0.
        validate_indices: True: negative indices are out of bounds (iOS17's check).

    Returns:
        An array of ``x``'s dtype.

    Raises:
        TypeError: ``indices`` has another dtype.
        ValueError: ``batch_dims`` is negative.
        GatherIndexError: an index is out of range.
        GatherShapeError: the shapes or the axis do not fit together.
    """
    x = np.asarray(x)
    indices = _coreml_indices(indices, validate_indices)
    if batch_dims < 0:
        raise ValueError(f"CoreML's batch_dims is a count of leading dims, got {batch_dims}")
    return _one_gather("coreml_gather", x, indices, None,
                       alignment=gather_alignment(x.ndim, indices.ndim, axis, batch_dims))


def coreml_gather_along_axis(x: ArrayLike, indices: ArrayLike, axis: int = 0,
                             validate_indices: bool = False) -> np.ndarray:
    """MIL ``gather_along_axis``: take_along_axis with indices of x's rank and x's sizes on every dim
    but ``axis`` (CoreML's type inference refuses smaller or broadcast ones).

    Args:
        x: the data tensor.
        indices: int32, int16, uint16, int8 or uint8 indices, of ``x``'s rank.
        axis: the axis of ``x`` to gather along.
        validate_indices: True: negative indices are out of bounds (iOS17's check).

    Returns:
        An array of ``indices``' shape and ``x``'s dtype.

    Raises:
        TypeError: ``indices`` has another dtype.
        GatherShapeError: ``indices`` differs from ``x`` in size on a dimension other than ``axis``.
        GatherIndexError: an index is out of range.
    """
    x = np.asarray(x)
    indices = _coreml_indices(indices, validate_indices)
    alignment = gather_elements_alignment(x.ndim, indices.ndim, axis)
    (read,) = alignment.axes
    if any(i != n for d, (i, n) in enumerate(zip(indices.shape, x.shape)) if d != read):
        raise GatherShapeError(f"CoreML gather_along_axis needs indices of x's sizes on every dim but axis {axis}: "
                               f"x {list(x.shape)}, indices {list(indices.shape)}")
    return _one_gather("coreml_gather_along_axis", x, indices, None, alignment=alignment)


def coreml_gather_nd(x: ArrayLike, indices: ArrayLike, batch_dims: int = 0,
                     validate_indices: bool = False) -> np.ndarray:
    """MIL ``gather_nd`` (batch_dims since iOS16): output shape ``K[:-1] + D[batch_dims + K[-1]:]``.

    Args:
        x: the data tensor.
        indices: int32, int16, uint16, int8 or uint8 indices, rank >= 1; the last dimension holds the
            coordinate tuples.
        batch_dims: the number of leading batch dimensions.
        validate_indices: True: negative indices are out of bounds (iOS17's check).

    Returns:
        An array of ``x``'s dtype.

    Raises:
        TypeError: ``indices`` has another dtype.
        GatherShapeError: ``indices`` is a scalar, or the shapes do not fit together.
        GatherIndexError: an index is out of range.
    """
    x = np.asarray(x)
    indices = _coreml_indices(indices, validate_indices)
    if indices.ndim == 0:
        raise GatherShapeError("CoreML gather_nd needs indices of rank >= 1 (the last dim holds the coordinates)")
    return _one_gather("coreml_gather_nd", x, indices, None,
                       alignment=gather_nd_alignment(x.ndim, indices.ndim, indices.shape[-1], batch_dims))


# -- JAX / StableHLO ------------------------------------------------------------------------------

class JaxGatherMode(enum.Enum):
    """Out-of-bounds handling of ``jax_gather``, named like ``jax.lax.GatherScatterMode``'s members.
    ``from_any`` also takes the strings JAX takes and JAX's own enum members (by name, so jax is never
    imported)."""

    CLIP = "clip"  # each start index is clamped to [0, dim - slice size]: the window lies inside the operand
    FILL_OR_DROP = "fill"  # a window with any part out of bounds is fill_value, all of it

    @classmethod
    def from_any(cls, mode) -> "JaxGatherMode":
        """``mode`` as a JaxGatherMode.

        Args:
            mode: "clip", "fill" or "drop", or a member (of this enum or JAX's) named CLIP or FILL_OR_DROP.

        Returns:
            The JaxGatherMode.

        Raises:
            ValueError: any other mode, PROMISE_IN_BOUNDS and None included.
        """
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
    """The five fields of ``jax.lax.GatherDimensionNumbers`` (JAX's own, or any object with these
    attributes, is accepted as well). The index vector is the last dimension of ``start_indices``."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()

    @classmethod
    def from_any(cls, dimension_numbers) -> "GatherDimensionNumbers":
        """Read the fields as tuples of ints; the two batching fields may be absent (older JAX).

        Args:
            dimension_numbers: ``jax.lax.GatherDimensionNumbers``, a GatherDimensionNumbers, or any object with
                these attributes.

        Returns:
            A GatherDimensionNumbers.

        Raises:
            TypeError: a required field is missing or is not a sequence of ints.
        """
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


@dataclass(frozen=True)
class JaxGatherLayout:
    """Where the dimensions of one ``jax.lax.gather`` go in its gatherMultiaxis call.

    The aligned rank is the output's rank plus one size-1 dimension per collapsed operand dimension
    (appended, squeezed afterwards). An offset operand dimension sits at its entry of ``offset_dims``,
    an operand batching dimension at the output batch dimension of its start_indices batching
    dimension (gatherMultiaxis broadcasting pairs them), and start_indices' batch dimensions at the
    output batch dimensions, in order. The axes are the aligned places of ``start_index_map``.
    """

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
        """Check the call as JAX's shape rule does (StableHLO gather's constraints, with the index
        vector last) and lay it out; raises GatherShapeError naming the field and the shapes.

        Args:
            operand_shape: the operand's shape.
            indices_shape: ``start_indices``' shape (the index vector last).
            dimension_numbers: the call's GatherDimensionNumbers.
            slice_sizes: the window size on each operand dimension.

        Returns:
            The JaxGatherLayout.

        Raises:
            GatherShapeError: the call breaks one of StableHLO gather's constraints.
        """
        dn, rank = dimension_numbers, len(operand_shape)
        context = (f"(operand shape {list(operand_shape)}, start_indices shape {list(indices_shape)}, "
                   f"slice_sizes {list(slice_sizes)}, {dn})")

        def fail(message):
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
    """JAX's default fill: NaN for floats (and complex), the most negative value for signed ints, the
    largest for unsigned ones, True for bool."""
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
    """``jax.lax.gather`` (StableHLO gather with the index vector last) as one gatherMultiaxis call.

    ``output[batch..., offset...]`` is the window of ``slice_sizes`` that starts, on each operand
    dimension ``start_index_map[j]``, at ``start_indices[batch..., j]`` (at 0 on the others, at the batch
    index on operand batching dimensions); ``offset_dims`` place the window's dimensions that are neither
    collapsed nor batching in the output, the batch dimensions of ``start_indices`` fill the rest in
    order. ``mode``: "clip" (default here; JAX's own default PROMISE_IN_BOUNDS is refused) clamps each
    start to ``[0, dim - slice size]``; "fill" returns ``fill_value`` for every window with any part out
    of bounds (by default NaN for floats, the most negative value for signed ints, the largest for
    unsigned ones, True for bool). ``indices_are_sorted`` and ``unique_indices`` are
    promises that only let a compiler choose a faster path: accepted and not needed here.
    Returns a new array of the operand's dtype.

    Args:
        operand: the source array.
        start_indices: integer start indices; the last dimension holds the index vectors.
        dimension_numbers: ``jax.lax.GatherDimensionNumbers`` (or a GatherDimensionNumbers, or any object
            with its fields).
        slice_sizes: the window size on each operand dimension.
        mode: "clip" or "fill" (or a ``GatherScatterMode``/JaxGatherMode member).
        fill_value: the value of out-of-bounds windows in "fill" mode; None: JAX's default for the dtype.
        indices_are_sorted: JAX's promise that the indices are sorted (unused).
        unique_indices: JAX's promise that the indices are unique (unused).

    Returns:
        A new array of the operand's dtype.

    Raises:
        ValueError: ``mode`` is not "clip" or "fill".
        TypeError: ``start_indices`` is not integer, ``dimension_numbers`` lacks a field, or "fill" mode has
            no default fill value for the dtype.
        GatherShapeError: the call breaks one of StableHLO gather's constraints.
    """
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
    gathered = gather_multiaxis(data, indices, layout.axes, "error")  # clamped: always in range
    result = gathered.reshape(layout.output_shape)
    if mode is JaxGatherMode.FILL_OR_DROP:
        outside = ((starts < 0) | (starts > np.array(layout.upper_bounds, np.int64))).any(axis=-1)
        if outside.any():
            fill = np.array(_jax_fill_value(operand.dtype) if fill_value is None else fill_value, operand.dtype)
            np.copyto(result, fill, where=outside.reshape(layout.start_shape[:len(layout.output_shape)]))
    _record(f"jax_gather ({mode.value})", operand, data, start_indices, indices, layout.axes, "error", gathered,
            result)
    return result


# -- the proposal's own multiaxis cases ----------------------------------------------------------

def gather_xy_nchw(images: ArrayLike, points: ArrayLike) -> np.ndarray:
    """(x, y) points read from every channel of NCHW images: points [P, 2] -> output [N, C, P].
    The axes [3, 2] read each pair's x into W and y into H (non-contiguous, swapped coordinates).

    Args:
        images: the NCHW images, shape [N, C, H, W].
        points: int32 or int64 (x, y) pairs, shape [P, 2].

    Returns:
        An array of shape [N, C, P] and ``images``' dtype.

    Raises:
        GatherIndexError: a point lies outside the images.
    """
    images, points = np.asarray(images), np.asarray(points)
    return _one_gather("gather_xy_nchw", images, points, [3, 2], indices_shape=(1, 1, points.shape[0], 2),
                       output_shape=(*images.shape[:2], points.shape[0]))


VARIANTS = {function.__name__: function for function in (
    onnx_gather, onnx_gather_elements, onnx_gather_nd, openvino_gather, openvino_gather_nd, numpy_take,
    numpy_take_along_axis, torch_gather, torch_take, torch_take_along_dim, torch_index_select, tf_gather,
    tf_gather_nd, tosa_gather, coreml_gather, coreml_gather_along_axis, coreml_gather_nd, jax_gather,
    gather_xy_nchw)}


def example_calls():
    """One representative call per variant, for the mapping table.

    Returns:
        A list of ``(variant name, callable taking no arguments)`` pairs, one per variant in ``VARIANTS``.
    """
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
        ("coreml_gather", lambda: coreml_gather(x, np.zeros((2, 5), np.int32), axis=-1, batch_dims=1)),
        ("coreml_gather_along_axis", lambda: coreml_gather_along_axis(x, np.zeros((2, 6, 4), np.int32), axis=1)),
        ("coreml_gather_nd", lambda: coreml_gather_nd(x, np.zeros((2, 5, 2), np.int32), batch_dims=1)),
        ("jax_gather", lambda: jax_gather(x, np.zeros((2, 5, 2), np.int64), GatherDimensionNumbers(
            offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1, 2), operand_batching_dims=(0,),
            start_indices_batching_dims=(0,)), slice_sizes=(1, 1, 2))),
        ("gather_xy_nchw", lambda: gather_xy_nchw(rng.random((1, 3, 8, 8)), np.zeros((5, 2), np.int64))),
    ]


def mapping_table() -> str:
    """The Markdown table of how each variant maps onto gatherMultiaxis, traced from example calls.

    Returns:
        The table as one string, a row per variant.
    """
    def shape(s):
        return "[" + ", ".join(map(str, s)) + "]"

    rows = ["| function | data → aligned | indices → aligned | axes | mode | gatherMultiaxis output → result |",
            "|---|---|---|---|---|---|"]
    for name, call in example_calls():
        with trace() as steps:
            call()
        (step,) = steps
        rows.append(f"| `{name}` | {shape(step.data[0])} → {shape(step.data[1])} | {shape(step.indices[0])} → "
                    f"{shape(step.indices[1])} | {list(step.axes)} | {step.mode} | {shape(step.output[0])} → "
                    f"{shape(step.output[1])} |")
    return "\n".join(rows)
