"""Each single-gather form's plan (shape rules, no nodes): Gather, GatherElements, GatherND.

Each form takes only the modes whose raising it reproduces exactly, the statically known sizes deciding; where a
form does not fit, NoForm says why and the lowering falls back to the general decomposition with those reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnx import TensorProto

from ...ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ...ops.contract import OutOfRange
from .ort_guards import possibly_string
from .form_semantics import NoForm, Role, Semantics, refuse_unknown_roles

GATHER_ELEMENTS_OPSET = 11  # GatherElements and GatherND
GATHER_ND_BATCH_OPSET = 12  # GatherND's batch_dims
BOUNDS_OPSET = 12           # Min / Max on integers (clamp, zero)
# The element types ORT's Where has a kernel for (1.32, opsets 9 to 21, measured): "zero" zeroes the read
# values with it; booleans take And / Not instead, and the other types the general form.
WHERE_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.INT32,
               TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT32, TensorProto.STRING)


def refuse_string_blocks(semantics: Semantics, after: int) -> None:
    """ORT's string Gather copies only the first string of each block (docs/upstream.md); an element type
    the graph does not prove may be string."""
    if possibly_string(semantics.data.elem_type) and any(
            semantics.input_size(d) != 1 for d in range(after + 1, semantics.rank)):
        raise NoForm("ORT's string Gather is wrong for blocks of more than one element"
                     + ("" if semantics.data.elem_type else ", and the input's element type is not known"))


@dataclass(frozen=True)
class GatherPlan:
    """Gather(X squeezed at ``data_squeeze``, I squeezed at ``indices_squeeze``, axis=``axis``)."""

    axis: int
    data_squeeze: tuple[int, ...]
    indices_squeeze: tuple[int, ...]

    @classmethod
    def of(cls, semantics: Semantics) -> "GatherPlan":
        """The Gather form of a node."""
        if len(semantics.axes) != 1:
            raise NoForm("Gather reads one axis")
        axis, roles = semantics.axes[0], semantics.roles()
        batch = [d for d, role in roles.items() if role == Role.BATCH]
        if batch:
            raise NoForm(f"dimension {batch[0]} runs in both the input and the indices (a batch dimension)")
        refuse_unknown_roles(roles)
        indexed = [d for d, role in roles.items() if role == Role.INDEX] + [axis]
        low, high = min(indexed), max(indexed)
        apart = [d for d in range(low, high + 1) if d != axis and roles[d] not in (Role.INDEX, Role.ONE)]
        if apart:
            raise NoForm(f"the indices' own dimensions and the axis are not adjacent (dimension {apart[0]} "
                         f"copies the input between them)")
        refuse_string_blocks(semantics, high)
        copies = [d for d, role in roles.items() if role == Role.COPY]
        # error_nonempty: checks every index, but none when the output is empty
        if semantics.mode.checks_indices and not semantics.mode.checks_when_empty \
                and not semantics.copy_sizes_nonzero(copies):
            raise NoForm("mode 'error_nonempty' checks nothing when the output is empty, Gather checks every "
                         "index, and a copied dimension's size is not known to be above 0")
        return cls(low, tuple(d for d in range(low, high + 1) if d != axis),
                   tuple(d for d in range(semantics.rank) if not low <= d <= high))


@dataclass(frozen=True)
class ElementsPlan:
    """GatherElements(X, Expand(I) on ``expand``, axis=``axis``)."""

    axis: int
    expand: tuple[int, ...]

    @classmethod
    def of(cls, semantics: Semantics, opset: int) -> "ElementsPlan":
        """The GatherElements form of a node."""
        if len(semantics.axes) != 1:
            raise NoForm("GatherElements reads one axis")
        if opset < GATHER_ELEMENTS_OPSET:
            raise NoForm(f"GatherElements needs opset {GATHER_ELEMENTS_OPSET}")
        axis, roles = semantics.axes[0], semantics.roles()
        index = [d for d, role in roles.items() if role == Role.INDEX]
        if index:
            raise NoForm(f"on dimension {index[0]} the indices are larger than the input (size 1): GatherElements "
                         f"reads indices no larger than the input")
        refuse_unknown_roles(roles)
        expand = tuple(d for d, role in roles.items() if role == Role.COPY)
        if semantics.mode.checks_when_empty and not semantics.copy_sizes_nonzero(expand):
            raise NoForm("mode 'error' checks every index, and an expanded dimension's size is not known to be "
                         "above 0 (an empty Expand would check none)")
        return cls(axis, expand)


@dataclass(frozen=True)
class NDPlan:
    """GatherND(X squeezed at ``data_squeeze``, tuples, batch_dims=``batch_dims``), the tuples being I
    with ``expand`` dims expanded, ``indices_squeeze`` squeezed, the last dimension unfolded to
    ``[unfold, k]`` (when ``unfold``) or given a trailing 1 (``unfold`` 1 with one axis), and the
    components reordered by ``permutation``."""

    batch_dims: int
    data_squeeze: tuple[int, ...]
    indices_squeeze: tuple[int, ...]
    unfold: int | None
    permutation: tuple[int, ...] | None
    expand: tuple[int, ...]
    trailing: int  # dimensions copied whole at the end (the mask of "zero" is unsqueezed over them)

    @classmethod
    def of(cls, semantics: Semantics, opset: int) -> "NDPlan":
        """The GatherND form of a node."""
        if opset < GATHER_ELEMENTS_OPSET:
            raise NoForm(f"GatherND needs opset {GATHER_ELEMENTS_OPSET}")
        axes, rank, k = semantics.axes, semantics.rank, len(semantics.axes)
        low = min(axes)
        if sorted(axes) != list(range(low, low + k)):
            raise NoForm(f"axes {list(axes)} are not adjacent")
        if low and opset < GATHER_ND_BATCH_OPSET:
            raise NoForm(f"GatherND's batch_dims needs opset {GATHER_ND_BATCH_OPSET}")
        roles = semantics.roles()
        leading_index = [d for d in range(low) if roles[d] == Role.INDEX]
        if leading_index:
            raise NoForm(f"dimension {leading_index[0]}, before the axes, runs along the indices only")
        refuse_unknown_roles(roles)
        after = range(low + k, rank)
        late_batch = [d for d in after if roles[d] == Role.BATCH]
        if late_batch:
            raise NoForm(f"dimension {late_batch[0]}, after the axes, runs in both the input and the indices "
                         f"(GatherND's batch dimensions lead)")
        last_index = max((d for d in after if roles[d] == Role.INDEX), default=low + k - 1)
        copied_between = [d for d in range(low + k, last_index) if roles[d] == Role.COPY]
        if copied_between:
            raise NoForm(f"dimension {copied_between[0]} copies the input before an index dimension")
        tail = range(last_index + 1, rank)
        expand = tuple(d for d in range(low) if roles[d] == Role.COPY)
        copies = [d for d in tail if roles[d] == Role.COPY] + list(expand)
        if semantics.mode.checks_when_empty and not semantics.copy_sizes_nonzero(copies):
            raise NoForm("mode 'error' checks every index, GatherND nothing when the output is empty, and a "
                         "copied dimension's size is not known to be above 0")
        if last_index < rank - 1:  # the last indices dimension holds exactly the k components
            squeeze, unfold = tuple(range(last_index + 1, rank - 1)), None
        else:  # the last dimension is an index one: [.., l * k] -> [.., l, k]
            squeeze, unfold = (), semantics.logical_size(rank - 1) if k > 1 else 1
            if unfold is None:
                raise NoForm("the last indices dimension's size is not known (its tuples cannot be unfolded)")
        order = tuple(axes.index(low + i) for i in range(k))
        return cls(low, tuple(range(low + k, last_index + 1)), squeeze, unfold,
                   None if order == tuple(range(k)) else order, expand, len(tail))



def plan_forms(semantics: Semantics, opset: int) -> tuple[list[GatherPlan | ElementsPlan | NDPlan], list[str]]:
    """Every form that computes the node exactly, in the order tried (Gather, GatherElements, GatherND), and
    why each of the others does not (``opset``: the model's default-domain opset)."""
    if not semantics.axes:
        return [], ["no axes: the node broadcasts the input to the indices' shape, it gathers nothing"]
    unproven = [what for what, info in (("input", semantics.data), ("indices", semantics.indices)) if info.shape is None]
    if unproven:  # the op requires equal ranks: one known rank proves nothing of the other
        return [], [f"the rank of the {' and the '.join(unproven)} is not known"]
    last, k = semantics.indices_size(semantics.rank - 1), len(semantics.axes)
    if k > 1 and last is not None and last % k:
        return [], [f"the last indices dimension ({last}) is not a multiple of the {k} axes (the op raises)"]
    zero = semantics.mode.out_of_range is OutOfRange.ZERO
    if zero and semantics.data.elem_type not in (*WHERE_TYPES, TensorProto.BOOL):
        return [], [f"ORT's Where has no kernel for {TensorProto.DataType.Name(semantics.data.elem_type)} (mode 'zero')"]
    if not semantics.mode.checks_indices and opset < BOUNDS_OPSET:
        return [], [f"mode {semantics.mode.value!r} needs Min / Max on integers (opset {BOUNDS_OPSET})"]
    plans: list[GatherPlan | ElementsPlan | NDPlan] = []
    reasons: list[str] = []
    for name, make in ((GATHER, lambda: GatherPlan.of(semantics)),
                       (GATHER_ELEMENTS, lambda: ElementsPlan.of(semantics, opset)),
                       (GATHER_ND, lambda: NDPlan.of(semantics, opset))):
        try:
            plans.append(make())
        except NoForm as why:
            reasons.append(f"{name}: {why}")
    return plans, reasons



FORM_NAMES = {GatherPlan: GATHER, ElementsPlan: GATHER_ELEMENTS, NDPlan: GATHER_ND}

__all__ = ["BOUNDS_OPSET", "FORM_NAMES", "GATHER_ELEMENTS_OPSET", "GATHER_ND_BATCH_OPSET", "WHERE_TYPES", "ElementsPlan",
           "GatherPlan", "NDPlan", "plan_forms"]
