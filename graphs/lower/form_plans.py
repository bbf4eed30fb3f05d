"""Each single-gather form's plan (shape rules, no nodes): Gather, GatherElements, GatherND, for each lowering
target (``ONNX_TARGET``, ``WEBNN_TARGET``).

Each form takes only the modes whose raising it reproduces exactly, the statically known sizes deciding; where a
form does not fit, NoForm says why and the lowering falls back to the general decomposition with those reasons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

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
        raise NoForm(f"ORT's string {GATHER} is wrong for blocks of more than one element"
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
            raise NoForm(f"{GATHER} reads one axis")
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
            raise NoForm(f"mode 'error_nonempty' checks nothing when the output is empty, {GATHER} checks every "
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
            raise NoForm(f"{GATHER_ELEMENTS} reads one axis")
        if opset < GATHER_ELEMENTS_OPSET:
            raise NoForm(f"{GATHER_ELEMENTS} needs opset {GATHER_ELEMENTS_OPSET}")
        axis, roles = semantics.axes[0], semantics.roles()
        index = [d for d, role in roles.items() if role == Role.INDEX]
        if index:
            raise NoForm(f"on dimension {index[0]} the indices are larger than the input (size 1): {GATHER_ELEMENTS} "
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
            raise NoForm(f"{GATHER_ND} needs opset {GATHER_ELEMENTS_OPSET}")
        axes, rank, k = semantics.axes, semantics.rank, len(semantics.axes)
        low = min(axes)
        if sorted(axes) != list(range(low, low + k)):
            raise NoForm(f"axes {list(axes)} are not adjacent")
        if low and opset < GATHER_ND_BATCH_OPSET:
            raise NoForm(f"{GATHER_ND}'s batch_dims needs opset {GATHER_ND_BATCH_OPSET}")
        roles = semantics.roles()
        leading_index = [d for d in range(low) if roles[d] == Role.INDEX]
        if leading_index:
            raise NoForm(f"dimension {leading_index[0]}, before the axes, runs along the indices only")
        refuse_unknown_roles(roles)
        after = range(low + k, rank)
        late_batch = [d for d in after if roles[d] == Role.BATCH]
        if late_batch:
            raise NoForm(f"dimension {late_batch[0]}, after the axes, runs in both the input and the indices "
                         f"({GATHER_ND}'s batch dimensions lead)")
        last_index = max((d for d in after if roles[d] == Role.INDEX), default=low + k - 1)
        copied_between = [d for d in range(low + k, last_index) if roles[d] == Role.COPY]
        if copied_between:
            raise NoForm(f"dimension {copied_between[0]} copies the input before an index dimension")
        tail = range(last_index + 1, rank)
        expand = tuple(d for d in range(low) if roles[d] == Role.COPY)
        copies = [d for d in tail if roles[d] == Role.COPY] + list(expand)
        if semantics.mode.checks_when_empty and not semantics.copy_sizes_nonzero(copies):
            raise NoForm(f"mode 'error' checks every index, {GATHER_ND} nothing when the output is empty, and a "
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



@dataclass(frozen=True)
class CoordinatesPlan:
    """GatherND without batch_dims (WebNN's gatherND has none): tuples [the output position on each of the
    ``start`` leading dims, the node's components in the data's order]; where the indices vary after the axes
    (``indices_vary_after``), the data has size 1 there and is read without those dims."""

    start: int
    indices_vary_after: bool

    @classmethod
    def of(cls, semantics: Semantics, opset: int) -> "CoordinatesPlan":
        """The coordinates form of a node (static shapes)."""
        axes, rank, k = semantics.axes, semantics.rank, len(semantics.axes)
        start = min(axes)
        if sorted(axes) != list(range(start, start + k)):
            raise NoForm(f"the axes {list(axes)} are not one block of adjacent dims")
        varying = [d for d in range(start + k, rank) if semantics.logical_size(d) != 1]
        wide = [d for d in range(start + k, rank) if semantics.input_size(d) != 1]
        if varying and wide:
            raise NoForm(f"after the axes, the indices vary on dim(s) {varying} and the data has size > 1 on "
                         f"dim(s) {wide}")
        return cls(start, bool(varying))


def one_axis(semantics: Semantics) -> None:
    """WebNN's refusal of several axes for its one-axis forms."""
    if len(semantics.axes) != 1:
        raise NoForm("several axes")


def webnn_gather(semantics: Semantics, opset: int) -> GatherPlan:
    """``GatherPlan.of`` on static shapes, refusing in WebNN's words."""
    one_axis(semantics)
    axis = semantics.axes[0]
    varying = [d for d in range(semantics.rank) if d != axis and semantics.logical_size(d) != 1]
    start, end = min(varying + [axis]), max(varying + [axis]) + 1
    wide = [d for d in range(start, end) if d != axis and semantics.input_size(d) != 1]
    if wide:
        raise NoForm(f"the indices vary on dims {varying} and the data has size > 1 on dim(s) {wide} between "
                     f"them and the axis")
    return GatherPlan.of(semantics)


def webnn_gather_elements(semantics: Semantics, opset: int) -> ElementsPlan:
    """``ElementsPlan.of`` on static shapes, refusing in WebNN's words."""
    one_axis(semantics)
    axis = semantics.axes[0]
    broadcast = [d for d in range(semantics.rank)
                 if d != axis and semantics.logical_size(d) not in (1, semantics.input_size(d))]
    if broadcast:
        raise NoForm(f"the data has size 1 where the indices do not on dim(s) {broadcast}")
    return ElementsPlan.of(semantics, opset)


Plan = GatherPlan | ElementsPlan | NDPlan | CoordinatesPlan


class FormTarget(NamedTuple):
    """What a lowering target's single-gather forms are: each form's planner in the order tried, how a refusal
    reads (``reason``, with ``form`` and ``why``), and the target's own refusals of a mode: ``where_types``, the
    element types mode "zero" can zero (None: it zeroes without Where), ``bounds_opset``, the opset from which
    the integer bounds of the non-checking modes exist (None: it has another way)."""

    name: str
    forms: tuple[tuple[str, Callable[[Semantics, int], Plan]], ...]
    reason: str
    where_types: tuple[int, ...] | None
    bounds_opset: int | None


# ONNX with ORT's kernels: GatherND with batch_dims, the ORT guards' refusals
ONNX_TARGET = FormTarget("onnx", ((GATHER, lambda semantics, opset: GatherPlan.of(semantics)),
                                  (GATHER_ELEMENTS, ElementsPlan.of), (GATHER_ND, NDPlan.of)),
                         "{form}: {why}", WHERE_TYPES, BOUNDS_OPSET)
# WebNN: static shapes (no size-0 dims, no strings), gatherND without batch_dims, "zero" by a zero slice
WEBNN_TARGET = FormTarget("webnn", ((GATHER, webnn_gather), (GATHER_ELEMENTS, webnn_gather_elements),
                                    (GATHER_ND, CoordinatesPlan.of)),
                          "not one {form}: {why}", None, None)


def form_choices(semantics: Semantics, opset: int, target: FormTarget = ONNX_TARGET) -> list[Plan | str]:
    """Each of ``target``'s forms in the order tried: its plan, or why it does not compute the node exactly
    (``opset``: the model's default-domain opset). A refusal of every form is one reason."""
    if not semantics.axes:
        return ["no axes: the node broadcasts the input to the indices' shape, it gathers nothing"]
    unproven = [what for what, info in (("input", semantics.data), ("indices", semantics.indices)) if info.shape is None]
    if unproven:  # the op requires equal ranks: one known rank proves nothing of the other
        return [f"the rank of the {' and the '.join(unproven)} is not known"]
    last, k = semantics.indices_size(semantics.rank - 1), len(semantics.axes)
    if k > 1 and last is not None and last % k:
        return [f"the last indices dimension ({last}) is not a multiple of the {k} axes (the op raises)"]
    zero = semantics.mode.out_of_range is OutOfRange.ZERO
    if zero and target.where_types is not None and semantics.data.elem_type not in (*target.where_types,
                                                                                    TensorProto.BOOL):
        return [f"ORT's Where has no kernel for {TensorProto.DataType.Name(semantics.data.elem_type)} (mode 'zero')"]
    if not semantics.mode.checks_indices and target.bounds_opset is not None and opset < target.bounds_opset:
        return [f"mode {semantics.mode.value!r} needs Min / Max on integers (opset {target.bounds_opset})"]
    choices: list[Plan | str] = []
    for name, make in target.forms:
        try:
            choices.append(make(semantics, opset))
        except NoForm as why:
            choices.append(target.reason.format(form=name, why=why))
    return choices


def plan_forms(semantics: Semantics, opset: int) -> tuple[list[GatherPlan | ElementsPlan | NDPlan], list[str]]:
    """ONNX's forms that compute the node exactly, in the order tried (``form_choices``), and why each of the
    others does not."""
    choices = form_choices(semantics, opset, ONNX_TARGET)
    return ([choice for choice in choices if isinstance(choice, (GatherPlan, ElementsPlan, NDPlan))],
            [choice for choice in choices if isinstance(choice, str)])


FORM_NAMES = {GatherPlan: GATHER, ElementsPlan: GATHER_ELEMENTS, NDPlan: GATHER_ND, CoordinatesPlan: GATHER_ND}

__all__ = ["BOUNDS_OPSET", "FORM_NAMES", "GATHER_ELEMENTS_OPSET", "GATHER_ND_BATCH_OPSET", "ONNX_TARGET",
           "WEBNN_TARGET", "WHERE_TYPES", "CoordinatesPlan", "ElementsPlan", "FormTarget", "GatherPlan", "NDPlan",
           "Plan", "form_choices", "plan_forms"]
