"""What a GatherMultiaxis node computes, as the single-gather forms read it: off the axes each dimension is
ONE (input and logical indices size 1), COPY (indices 1), INDEX (input 1), BATCH (equal, known) or UNKNOWN."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ...ops.contract import Mode
from ..ranks.tensor_info import TensorInfo


class Role(enum.Enum):
    ONE = "one"
    COPY = "copy"
    INDEX = "index"
    BATCH = "batch"
    UNKNOWN = "unknown"


class NoForm(Exception):
    """This form does not compute the node exactly; the message says why."""


@dataclass(frozen=True)
class Semantics:
    """One node's statically known facts: rank, axes (non-negative, in the node's order), mode, input and indices."""

    rank: int
    axes: tuple[int, ...]
    mode: Mode
    data: TensorInfo
    indices: TensorInfo

    def input_size(self, d: int) -> int | None:
        """The input's size on ``d`` where it is a known integer, else None."""
        size = self.data.shape[d] if self.data.shape is not None else None
        return size if isinstance(size, int) else None

    def indices_size(self, d: int) -> int | None:
        """The indices' size on ``d`` (tuples unfolded) where it is a known integer, else None."""
        size = self.indices.shape[d] if self.indices.shape is not None else None
        return size if isinstance(size, int) else None

    def logical_size(self, d: int) -> int | None:
        """The logical indices' size on ``d``: the last dimension divided by the number of axes."""
        size = self.indices_size(d)
        k = len(self.axes)
        if size is not None and d == self.rank - 1 and k > 1:
            return size // k
        return size

    def role(self, d: int) -> Role:
        """The role of dimension ``d`` off the axes, from its known sizes."""
        x, n = self.input_size(d), self.logical_size(d)
        if x == 1 and n == 1:
            return Role.ONE
        if n == 1:
            return Role.COPY
        if x == 1:
            return Role.INDEX
        if x is not None and x == n:
            return Role.BATCH
        return Role.UNKNOWN

    def roles(self) -> dict[int, Role]:
        """The role of every dimension off the axes."""
        return {d: self.role(d) for d in range(self.rank) if d not in self.axes}

    def copy_sizes_nonzero(self, dims) -> bool:
        """Whether every one of ``dims`` has a known input size above 0."""
        # an output emptied by a COPY dimension of size 0 still has coordinates ("error" checks them, GatherND not)
        return all((self.input_size(d) or 0) > 0 for d in dims)


def refuse_unknown_roles(roles: dict[int, Role]) -> None:
    """Raises NoForm where a dimension's role is decided only at run time."""
    unknown = [d for d, role in roles.items() if role == Role.UNKNOWN]
    if unknown:
        raise NoForm(f"the input and indices sizes of dimension{'s' if len(unknown) > 1 else ''} "
                     f"{', '.join(map(str, unknown))} are not known statically (which one broadcasts is decided "
                     f"at run time)")


__all__ = ["NoForm", "Role", "Semantics", "refuse_unknown_roles"]
