"""The single standard gathers a GatherMultiaxis node can be, chosen from its own semantics (issue 27).

``output = GatherMultiaxis(X, I, axes, mode)`` reads, for every output position, the input at the
position's own coordinates off the axes (0 where X has size 1 there) and at the coordinates the indices
give on the axes. Off the axes, each dimension ``d`` plays one role, decided by what is known statically
of the input size ``x_d`` and the logical indices size ``l_d`` (``ops.contract.logical_indices_dims``):

    ONE    x_d = 1 and l_d = 1
    COPY   l_d = 1, x_d not 1 (or unknown)    the output copies X along d
    INDEX  x_d = 1, l_d not 1 (or unknown)    the output runs along the indices only
    BATCH  x_d = l_d, both known, not 1        input and indices run together
    (both unknown: the role is decided at run time, and no single gather can be chosen)

Each form is a plan (shape rules, no nodes) and an emitter:

* ``Gather``: one axis, no BATCH dimension, the INDEX dimensions and the axis adjacent. ``Gather(X', J,
  axis)`` with X' = X squeezed at those INDEX dimensions (size 1) and J = I squeezed everywhere else.
* ``GatherElements``: one axis, every other dimension ONE, BATCH or COPY (an ``Expand`` of the indices
  to the input's size on COPY dimensions, the only extra node).
* ``GatherND``: the axes adjacent after leading ONE / BATCH / COPY dimensions (``batch_dims``; COPY ones
  expanded in the indices), then INDEX dimensions, then COPY ones. The tuples are unfolded from the
  last indices dimension (a Squeeze or Reshape) and put in axis order (one ``Gather`` of a constant
  permutation where the axes are not ascending).

Modes: "error" is the builtin op's own raising (ORT checks every index of Gather and GatherElements);
"error_nonempty" is GatherND's own rule (nothing is checked when the output is empty); each form takes
only the mode whose raising it reproduces exactly, the statically known sizes deciding (a COPY dimension
of size 0 empties the output while coordinates remain to be checked). "clamp" is Max/Min of the indices
with the axis sizes (the gathers count negatives from the end themselves). "zero" sets out-of-range
indices to 0 and the read values to 0 with a ``Where`` on the mask. Where a form does not fit, its plan
says why; ``graphs.lower`` falls back to the general decomposition (``graphs.lower_general``) with
those reasons.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto

from ..ops.contract import Mode
from .lower.ort_guards import possibly_string
from .ranks.tensor_info import TensorInfo
from .lower.lowering_builder import LoweringBuilder

GATHER_ELEMENTS_OPSET = 11  # GatherElements and GatherND
GATHER_ND_BATCH_OPSET = 12  # GatherND's batch_dims
BOUNDS_OPSET = 12           # Min / Max on integers (clamp, zero)
# The element types ORT's Where has a kernel for (1.32, opsets 9 to 21, measured): "zero" zeroes the read
# values with it; booleans take And / Not instead, and the other types the general form.
WHERE_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.INT32,
               TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT32, TensorProto.STRING)


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
    """One node's statically known facts: its rank, axes (non-negative, in the node's order), mode,
    and what is known of its input and indices."""

    rank: int
    axes: tuple[int, ...]
    mode: Mode
    data: TensorInfo
    indices: TensorInfo

    def input_size(self, d: int) -> int | None:
        """The input's size on ``d``, where it is a known integer.

        Args:
            d: a dimension in ``[0, rank - 1]``.

        Returns:
            The size, or None (symbolic or unknown).
        """
        size = self.data.shape[d] if self.data.shape is not None else None
        return size if isinstance(size, int) else None

    def indices_size(self, d: int) -> int | None:
        """The indices' size on ``d`` (coordinate tuples unfolded), where it is a known integer.

        Args:
            d: a dimension in ``[0, rank - 1]``.

        Returns:
            The size, or None.
        """
        size = self.indices.shape[d] if self.indices.shape is not None else None
        return size if isinstance(size, int) else None

    def logical_size(self, d: int) -> int | None:
        """The logical indices' size on ``d``: the last dimension divided by the number of axes.

        Args:
            d: a dimension in ``[0, rank - 1]``.

        Returns:
            The size, or None.
        """
        size = self.indices_size(d)
        k = len(self.axes)
        if size is not None and d == self.rank - 1 and k > 1:
            return size // k
        return size

    def role(self, d: int) -> Role:
        """The role of a dimension off the axes, from its known sizes.

        Args:
            d: a dimension in ``[0, rank - 1]``.

        Returns:
            ONE (both 1), COPY (indices 1), INDEX (input 1), BATCH (equal), else UNKNOWN.
        """
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
        """The role of every dimension off the axes.

        Returns:
            The role by dimension.
        """
        return {d: self.role(d) for d in range(self.rank) if d not in self.axes}

    def copy_sizes_nonzero(self, dims) -> bool:
        """Whether every one of ``dims`` has a known input size above 0 (an output emptied by a COPY
        dimension of size 0 still has coordinates, which "error" checks and GatherND does not).

        Args:
            dims: dimensions.

        Returns:
            Whether every input size there is known and positive.
        """
        return all((self.input_size(d) or 0) > 0 for d in dims)


def _unknown(semantics: Semantics, roles: dict[int, Role]) -> None:
    unknown = [d for d, role in roles.items() if role == Role.UNKNOWN]
    if unknown:
        raise NoForm(f"the input and indices sizes of dimension{'s' if len(unknown) > 1 else ''} "
                     f"{', '.join(map(str, unknown))} are not known statically (which one broadcasts is decided "
                     f"at run time)")


def _string_block(semantics: Semantics, after: int) -> None:
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
        """The Gather form of a node.

        Args:
            semantics: the node's facts.

        Returns:
            The plan.

        Raises:
            NoForm: one Gather does not compute the node exactly; the message says why.
        """
        if len(semantics.axes) != 1:
            raise NoForm("Gather reads one axis")
        axis, roles = semantics.axes[0], semantics.roles()
        batch = [d for d, role in roles.items() if role == Role.BATCH]
        if batch:
            raise NoForm(f"dimension {batch[0]} runs in both the input and the indices (a batch dimension)")
        _unknown(semantics, roles)
        indexed = [d for d, role in roles.items() if role == Role.INDEX] + [axis]
        low, high = min(indexed), max(indexed)
        apart = [d for d in range(low, high + 1) if d != axis and roles[d] not in (Role.INDEX, Role.ONE)]
        if apart:
            raise NoForm(f"the indices' own dimensions and the axis are not adjacent (dimension {apart[0]} "
                         f"copies the input between them)")
        _string_block(semantics, high)
        copies = [d for d, role in roles.items() if role == Role.COPY]
        if semantics.mode == Mode.ERROR_NONEMPTY and not semantics.copy_sizes_nonzero(copies):
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
        """The GatherElements form of a node.

        Args:
            semantics: the node's facts.
            opset: the model's default-domain opset.

        Returns:
            The plan.

        Raises:
            NoForm: one GatherElements does not compute the node exactly; the message says why.
        """
        if len(semantics.axes) != 1:
            raise NoForm("GatherElements reads one axis")
        if opset < GATHER_ELEMENTS_OPSET:
            raise NoForm(f"GatherElements needs opset {GATHER_ELEMENTS_OPSET}")
        axis, roles = semantics.axes[0], semantics.roles()
        index = [d for d, role in roles.items() if role == Role.INDEX]
        if index:
            raise NoForm(f"on dimension {index[0]} the indices are larger than the input (size 1): GatherElements "
                         f"reads indices no larger than the input")
        _unknown(semantics, roles)
        expand = tuple(d for d, role in roles.items() if role == Role.COPY)
        if semantics.mode == Mode.ERROR and not semantics.copy_sizes_nonzero(expand):
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
        """The GatherND form of a node.

        Args:
            semantics: the node's facts.
            opset: the model's default-domain opset.

        Returns:
            The plan.

        Raises:
            NoForm: one GatherND does not compute the node exactly; the message says why.
        """
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
        _unknown(semantics, roles)
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
        if semantics.mode == Mode.ERROR and not semantics.copy_sizes_nonzero(copies):
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


# -- emission -------------------------------------------------------------------------------------------


@dataclass
class FormEmitter:
    """Emits one planned form into ``b``: ``x`` the input (or its narrow source), ``idx`` the indices,
    ``constants`` the scope's constant view (``graphs.walk.ConstantView``: constant indices are prepared
    here, not in the graph)."""

    b: LoweringBuilder
    semantics: Semantics
    x: str
    idx: str
    constants: Mapping[str, np.ndarray]
    elem_type: int  # of ``x`` (the zero of "zero" mode)
    index_type: int = 0  # of ``idx`` as emitted so far (0: the node's indices' own type)
    folded: dict[str, np.ndarray] = field(default_factory=dict)  # the indices this emitter made constants

    @property
    def index_dtype(self) -> np.dtype:
        """The NumPy type of the indices as emitted so far (int32 or int64)."""
        index_type = self.index_type or self.semantics.indices.elem_type
        return np.dtype(np.int32 if index_type == TensorProto.INT32 else np.int64)

    def _constant_indices(self) -> np.ndarray | None:
        value = self.folded.get(self.idx)
        if value is None and self.idx in self.constants:
            value = self.constants[self.idx]
        return value if value is not None and value.dtype.kind == "i" else None

    def _index(self, fold, emit, role: str) -> None:
        """Transform the indices: ``fold`` (an array function, or None) where they are a constant, else the
        nodes ``emit()`` makes (it returns their output; what it needs is made only then)."""
        value = self._constant_indices()
        if value is not None and fold is not None:
            folded = np.ascontiguousarray(fold(value))
            if self.folded.pop(self.idx, None) is not None:  # a step before folded them: that constant goes
                self.b.nodes[:] = [node for node in self.b.nodes if node.output[0] != self.idx]
            self.idx = self.b.tensor(folded, role)
            self.folded[self.idx] = folded
        else:
            self.idx = emit()

    def squeeze_indices(self, dims: tuple[int, ...], role: str) -> None:
        """Squeeze ``dims`` out of the indices (folded where they are a constant).

        Args:
            dims: size-1 dimensions of the indices; none: nothing.
            role: what the result is, for its name.
        """
        if dims:
            self._index(lambda v: np.squeeze(v, axis=dims), lambda: self.b.squeeze(self.idx, list(dims), role), role)

    def expand_indices(self, dims: tuple[int, ...]) -> None:
        """Expand the indices to the input's size on ``dims`` (COPY dimensions): to a constant shape where
        those sizes are known, else to the input's own sizes there (``Where`` on its ``Shape``).

        Args:
            dims: the COPY dimensions.
        """
        b, rank = self.b, self.semantics.rank
        sizes = [self.semantics.input_size(d) if d in dims else 1 for d in range(rank)]
        known = [size for size in sizes if size is not None]
        if len(known) == len(sizes):
            self._index(lambda v: np.broadcast_to(v, np.broadcast_shapes(v.shape, tuple(known))),
                        lambda: b.op("Expand", [self.idx, b.constant(known, "expanded_shape")], "indices_expanded"),
                        "indices_expanded")
            return
        chosen = np.array([d in dims for d in range(rank)])
        shape = b.op("Where", [b.tensor(chosen, "expanded_dims"), b.op("Shape", [self.x], "input_shape"),
                               b.constant([1] * rank, "ones")], "expanded_shape")
        self.idx = b.op("Expand", [self.idx, shape], "indices_expanded")

    def bounds(self, axes: tuple[int, ...], vector: bool) -> tuple[str, str]:
        """(low, high) = (-n, n - 1) of each axis' size n, in the indices' type: a scalar for one axis
        (``vector`` False) or a vector over the tuples' last dimension.

        Args:
            axes: the node's axes.
            vector: one bound per axis (a vector) instead of a scalar for one axis.

        Returns:
            The names of the low and high bounds.
        """
        sizes = [self.semantics.input_size(a) for a in axes]
        shape = [len(axes)] if vector else []
        if all(size is not None for size in sizes):
            n = np.array(sizes, dtype=self.index_dtype).reshape(shape)
            return self.b.tensor(-n, "low_bound"), self.b.tensor(n - 1, "high_bound")
        dims = self.b.op("Gather", [self.b.op("Shape", [self.x], "input_shape"), self.b.constant(list(axes), "axes")],
                         "axis_sizes", axis=0)
        if not vector:
            dims = self.b.scalar(dims, "axis_size")
        if self.index_dtype == np.int32:
            dims = self.b.cast(dims, TensorProto.INT32, "axis_sizes_int32")
        one = self.b.tensor(np.array(1, self.index_dtype), "one")
        return self.b.op("Neg", [dims], "low_bound"), self.b.op("Sub", [dims, one], "high_bound")

    def prepare(self, axes: tuple[int, ...], vector: bool) -> str | None:
        """The mode's treatment of the indices: clamp, or zero's masking (out-of-range indices set to 0).

        Args:
            axes: the node's axes.
            vector: bounds per tuple component (GatherND) instead of one scalar.

        Returns:
            The name of zero's out-of-range mask, or None for the other modes.
        """
        mode = self.semantics.mode
        if mode not in (Mode.CLAMP, Mode.ZERO):
            return None
        low, high = self.bounds(axes, vector)
        b = self.b
        if mode == Mode.CLAMP:
            self.idx = b.op("Min", [b.op("Max", [self.idx, low], "clamped_low"), high], "clamped")
            return None
        mask = b.op("Or", [b.op("Less", [self.idx, low], "below"), b.op("Greater", [self.idx, high], "above")],
                    "out_of_range")
        self.idx = b.op("Where", [mask, b.tensor(np.array(0, self.index_dtype), "index_zero"), self.idx], "masked")
        return mask

    def zeroed(self, values: str, mask: str | None) -> str:
        """Mode zero's result: 0 (False for bool) where ``mask`` is set.

        Args:
            values: the gathered values' name.
            mask: ``prepare``'s mask, or None (then ``values`` as they are).

        Returns:
            The name of the result.
        """
        if mask is None:
            return values
        if self.elem_type == TensorProto.BOOL:
            return self.b.op("And", [values, self.b.op("Not", [mask], "in_range")], "zeroed")
        return self.b.op("Where", [mask, self.b.typed_zero(self.elem_type, "zero_element"), values], "zeroed")

    def gather(self, plan: GatherPlan) -> str:
        """Emit the Gather form.

        Args:
            plan: from ``GatherPlan.of``.

        Returns:
            The name of the output.
        """
        b = self.b
        mask = self.prepare(self.semantics.axes, vector=False)  # on I itself: it broadcasts to the output
        x = b.squeeze(self.x, list(plan.data_squeeze), "input_aligned") if plan.data_squeeze else self.x
        self.squeeze_indices(plan.indices_squeeze, "indices_aligned")
        return self.zeroed(b.op("Gather", [x, self.idx], "gathered", axis=plan.axis), mask)

    def gather_elements(self, plan: ElementsPlan) -> str:
        """Emit the GatherElements form.

        Args:
            plan: from ``ElementsPlan.of``.

        Returns:
            The name of the output.
        """
        b = self.b
        mask = self.prepare(self.semantics.axes, vector=False)
        if plan.expand:
            self.expand_indices(plan.expand)
        return self.zeroed(b.op("GatherElements", [self.x, self.idx], "gathered", axis=plan.axis), mask)

    def gather_nd(self, plan: NDPlan) -> str:
        """Emit the GatherND form.

        Args:
            plan: from ``NDPlan.of``.

        Returns:
            The name of the output.
        """
        b, semantics = self.b, self.semantics
        rank, k = semantics.rank, len(semantics.axes)
        if semantics.indices.elem_type != TensorProto.INT64:  # GatherND takes int64 tuples only
            self._index(lambda v: v.astype(np.int64), lambda: b.cast(self.idx, TensorProto.INT64, "tuples_int64"),
                        "tuples_int64")
            self.index_type = TensorProto.INT64
        if plan.expand:
            self.expand_indices(plan.expand)
        self.squeeze_indices(plan.indices_squeeze, "tuples_aligned")
        if plan.unfold is not None:
            kept = rank - 1 - len(plan.indices_squeeze)
            if k == 1 or plan.unfold == 1:  # [.., l] -> [.., l, 1], or [.., k] -> [.., 1, k]
                at = kept + 1 if k == 1 else kept
                self._index(lambda v: np.expand_dims(v, at), lambda: b.unsqueeze(self.idx, [at], "tuples"), "tuples")
            else:
                self._index(lambda v: v.reshape(v.shape[:kept] + (plan.unfold, k)),
                            lambda: b.op("Reshape", [self.idx, b.constant([0] * kept + [plan.unfold, k], "tuples_shape")],
                                         "tuples"), "tuples")
        mask = self.prepare(semantics.axes, vector=True)  # components still in the node's axis order
        if mask is not None:
            any_out = b.cast(b.reduce("ReduceMax", b.cast(mask, TensorProto.INT32, "out_of_range_01"), [-1],
                                      "out_of_range_any"), TensorProto.BOOL, "tuple_out_of_range")
            mask = b.unsqueeze(any_out, list(range(rank - plan.trailing, rank)), "tuple_mask") if plan.trailing \
                else any_out
        if plan.permutation is not None:
            self._index(lambda v: v[..., list(plan.permutation)],
                        lambda: b.op("Gather", [self.idx, b.constant(list(plan.permutation), "axis_order")],
                                     "tuples_ordered", axis=-1), "tuples_ordered")
        x = b.squeeze(self.x, list(plan.data_squeeze), "input_aligned") if plan.data_squeeze else self.x
        attributes = {"batch_dims": plan.batch_dims} if plan.batch_dims else {}
        return self.zeroed(b.op("GatherND", [x, self.idx], "gathered", **attributes), mask)


def plan_forms(semantics: Semantics, opset: int) -> tuple[list[GatherPlan | ElementsPlan | NDPlan], list[str]]:
    """Every form that computes the node exactly, in the order tried (Gather, GatherElements, GatherND), and
    why each of the others does not. The lowering emits the first whose nodes pass
    ``graphs.form_check.check_emitted``.

    Args:
        semantics: the node's facts.
        opset: the model's default-domain opset.

    Returns:
        The plans (none when no form fits) and the reasons of the forms that do not fit.
    """
    if not semantics.axes:
        return [], ["no axes: the node broadcasts the input to the indices' shape, it gathers nothing"]
    unproven = [what for what, info in (("input", semantics.data), ("indices", semantics.indices)) if info.shape is None]
    if unproven:  # the op requires equal ranks: one known rank proves nothing of the other
        return [], [f"the rank of the {' and the '.join(unproven)} is not known"]
    last, k = semantics.indices_size(semantics.rank - 1), len(semantics.axes)
    if k > 1 and last is not None and last % k:
        return [], [f"the last indices dimension ({last}) is not a multiple of the {k} axes (the op raises)"]
    if semantics.mode == Mode.ZERO and semantics.data.elem_type not in (*WHERE_TYPES, TensorProto.BOOL):
        return [], [f"ORT's Where has no kernel for {TensorProto.DataType.Name(semantics.data.elem_type)} (mode 'zero')"]
    if semantics.mode in (Mode.CLAMP, Mode.ZERO) and opset < BOUNDS_OPSET:
        return [], [f"mode {semantics.mode.value!r} needs Min / Max on integers (opset {BOUNDS_OPSET})"]
    plans: list[GatherPlan | ElementsPlan | NDPlan] = []
    reasons: list[str] = []
    for name, make in (("Gather", lambda: GatherPlan.of(semantics)),
                       ("GatherElements", lambda: ElementsPlan.of(semantics, opset)),
                       ("GatherND", lambda: NDPlan.of(semantics, opset))):
        try:
            plans.append(make())
        except NoForm as why:
            reasons.append(f"{name}: {why}")
    return plans, reasons


def emit_form(plan: GatherPlan | ElementsPlan | NDPlan, emitter: FormEmitter) -> str:
    """Emit the nodes of a plan.

    Args:
        plan: from ``plan_forms``.
        emitter: the node's emitter.

    Returns:
        The name of the output.
    """
    if isinstance(plan, GatherPlan):
        return emitter.gather(plan)
    if isinstance(plan, ElementsPlan):
        return emitter.gather_elements(plan)
    return emitter.gather_nd(plan)


FORM_NAMES = {GatherPlan: "Gather", ElementsPlan: "GatherElements", NDPlan: "GatherND"}

__all__ = ["FORM_NAMES", "WHERE_TYPES", "ElementsPlan", "FormEmitter", "GatherPlan", "NDPlan", "NoForm", "Role", "Semantics",
           "emit_form", "plan_forms"]
