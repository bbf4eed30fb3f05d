"""How the classic gathers map onto gatherMultiaxis: rank alignment from ranks and attributes alone, one
piece of math for the graph rewriter (Unsqueeze/Squeeze) and the NumPy variants (expand_dims/squeeze)."""

from __future__ import annotations

from dataclasses import dataclass

# The classic gathers' ONNX op types (domain ""), spelled here once for the library
GATHER = "Gather"
GATHER_ELEMENTS = "GatherElements"
GATHER_ND = "GatherND"


class AlignmentError(ValueError):
    """The ranks and attributes do not describe a valid gather."""


@dataclass(frozen=True)
class Alignment:
    """One classic gather as gatherMultiaxis: what to insert, read and drop.

    Attributes:
        axes: the axes gatherMultiaxis reads, in the aligned rank.
        data_unsqueeze: positions of the size-1 dimensions inserted into the data.
        indices_unsqueeze: positions of the size-1 dimensions inserted into the indices.
        output_squeeze: size-1 dimensions removed from the result.
    """

    axes: tuple[int, ...]
    data_unsqueeze: tuple[int, ...] = ()     # positions of the ones inserted into the data
    indices_unsqueeze: tuple[int, ...] = ()  # positions of the ones inserted into the indices
    output_squeeze: tuple[int, ...] = ()     # size-1 dimensions removed from the result


def normalized_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` counted from the front.

    Raises:
        AlignmentError: the axis is out of range."""
    if not -rank <= axis < rank:
        raise AlignmentError(f"{what} {axis} is out of range for data rank {rank}")
    return axis % rank


def gather_alignment(data_rank: int, indices_rank: int, axis: int, batch_dims: int = 0) -> Alignment:
    """Gather with ``b`` batch dims (ONNX: b = 0; OpenVINO Gather-7/8, tf.gather: b <= axis).

    The indices' other q-b dims go in front of the data axis (q-b-1 size-1 dims inserted into the data) and
    the last of them is read; with q = b a size-1 indices dim is read and squeezed away.

    Raises:
        AlignmentError: a scalar data, an axis out of range, or ``batch_dims`` out of its range."""
    r, q, b = data_rank, indices_rank, batch_dims
    if r == 0:
        raise AlignmentError(f"{GATHER} of a scalar")
    axis = normalized_axis(axis, r)
    if not 0 <= b <= min(axis, q):
        raise AlignmentError(f"batch_dims {b} must lie in [0, min(axis={axis}, indices rank={q})]")
    index_dims = q - b
    if index_dims == 0:
        return Alignment(axes=(axis,), indices_unsqueeze=tuple(range(b, r)), output_squeeze=(axis,))
    return Alignment(axes=(axis + index_dims - 1,), data_unsqueeze=tuple(range(axis, axis + index_dims - 1)),
                     indices_unsqueeze=tuple(range(b, axis)) + tuple(range(axis + index_dims, r + index_dims - 1)))


def gather_elements_alignment(data_rank: int, indices_rank: int, axis: int) -> Alignment:
    """GatherElements / take_along_axis / torch.gather: the same rank, read along ``axis``.

    Raises:
        AlignmentError: ranks that differ, a scalar, or an axis out of range.
    """
    if indices_rank != data_rank:
        raise AlignmentError(f"{GATHER_ELEMENTS} with data rank {data_rank} and indices rank {indices_rank}")
    if data_rank == 0:
        raise AlignmentError(f"{GATHER_ELEMENTS} of a scalar")
    return Alignment(axes=(normalized_axis(axis, data_rank),))


def gather_nd_alignment(data_rank: int, indices_rank: int, k: int, batch_dims: int = 0) -> Alignment:
    """GatherND with b batch dims and k-tuples: output = indices.shape[:-1] + data.shape[b+k:].

    Aligned: b batch dims, an index region of max(k, q-1-b) dims padded with ones, the data's r-b-k trailing
    dims. The tuples sit in the last indices dim, which must be padding; if none, one is added and squeezed.

    Raises:
        AlignmentError: scalar indices, empty tuples, or ``batch_dims`` and ``k`` that do not fit the ranks."""
    r, q, b = data_rank, indices_rank, batch_dims
    if q == 0:
        raise AlignmentError(f"{GATHER_ND} with scalar indices")
    if k == 0:
        raise AlignmentError(f"{GATHER_ND} with empty coordinate tuples (last indices dimension 0)")
    if not (0 <= b < min(r, q) and b + k <= r):
        raise AlignmentError(f"batch_dims {b} and coordinate size {k} do not fit data rank {r}, indices rank {q}")
    trailing = r - b - k
    region = max(k, q - 1 - b)
    aligned_rank = b + region + trailing
    data_unsqueeze = tuple(range(b + k, b + region))
    output_squeeze = tuple(range(q - 1, b + region))
    if aligned_rank < q:  # no padding dimension left for the folded coordinates
        data_unsqueeze += (aligned_rank,)
        output_squeeze += (aligned_rank,)
        aligned_rank += 1
    return Alignment(axes=tuple(range(b, b + k)), data_unsqueeze=data_unsqueeze,
                     indices_unsqueeze=tuple(range(q - 1, aligned_rank - 1)), output_squeeze=output_squeeze)
