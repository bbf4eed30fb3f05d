"""Emission of a planned single-gather form: the nodes of Gather, GatherElements or GatherND, the indices
prepared for the node's mode (constant indices folded here, not in the graph)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import assert_never

import numpy as np
from onnx import TensorProto

from ...ops.alignment import GATHER_ELEMENTS, GATHER_ND
from ...ops.contract import OutOfRange
from .lowering_builder import LoweringBuilder
from .form_plans import ElementsPlan, GatherPlan, NDPlan
from .form_semantics import Semantics


@dataclass
class FormEmitter:
    """Emits one planned form into ``b``: ``x`` the input (or its narrow source), ``idx`` the indices,
    ``constants`` the scope's constant view (``graphs.ir.constant_view.ConstantView``: constant indices are prepared
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
        """Squeeze ``dims`` out of the indices (folded where they are a constant)."""
        if dims:
            self._index(lambda v: np.squeeze(v, axis=dims), lambda: self.b.squeeze(self.idx, list(dims), role), role)

    def expand_indices(self, dims: tuple[int, ...]) -> None:
        """Expand the indices to the input's size on ``dims`` (COPY dimensions): to a constant shape where
        those sizes are known, else to the input's own sizes there (``Where`` on its ``Shape``)."""
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
        (``vector`` False) or a vector over the tuples' last dimension."""
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
        """The mode's treatment of the indices: clamp, or zero's masking (out-of-range indices set to 0)."""
        b = self.b
        match self.semantics.mode.out_of_range:
            case OutOfRange.RAISE:
                return None
            case OutOfRange.CLAMP:
                low, high = self.bounds(axes, vector)
                self.idx = b.op("Min", [b.op("Max", [self.idx, low], "clamped_low"), high], "clamped")
                return None
            case OutOfRange.ZERO:
                low, high = self.bounds(axes, vector)
                mask = b.op("Or", [b.op("Less", [self.idx, low], "below"), b.op("Greater", [self.idx, high], "above")],
                            "out_of_range")
                self.idx = b.op("Where", [mask, b.tensor(np.array(0, self.index_dtype), "index_zero"), self.idx],
                                "masked")
                return mask
            case unknown:
                assert_never(unknown)

    def zeroed(self, values: str, mask: str | None) -> str:
        """Mode zero's result: 0 (False for bool) where ``mask`` is set."""
        if mask is None:
            return values
        if self.elem_type == TensorProto.BOOL:
            return self.b.op("And", [values, self.b.op("Not", [mask], "in_range")], "zeroed")
        return self.b.op("Where", [mask, self.b.typed_zero(self.elem_type, "zero_element"), values], "zeroed")

    def gather(self, plan: GatherPlan) -> str:
        """Emit the Gather form."""
        b = self.b
        mask = self.prepare(self.semantics.axes, vector=False)  # on I itself: it broadcasts to the output
        x = b.squeeze(self.x, list(plan.data_squeeze), "input_aligned") if plan.data_squeeze else self.x
        self.squeeze_indices(plan.indices_squeeze, "indices_aligned")
        return self.zeroed(b.op("Gather", [x, self.idx], "gathered", axis=plan.axis), mask)

    def gather_elements(self, plan: ElementsPlan) -> str:
        """Emit the GatherElements form."""
        b = self.b
        mask = self.prepare(self.semantics.axes, vector=False)
        if plan.expand:
            self.expand_indices(plan.expand)
        return self.zeroed(b.op(GATHER_ELEMENTS, [self.x, self.idx], "gathered", axis=plan.axis), mask)

    def gather_nd(self, plan: NDPlan) -> str:
        """Emit the GatherND form."""
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
        return self.zeroed(b.op(GATHER_ND, [x, self.idx], "gathered", **attributes), mask)



def emit_form(plan: GatherPlan | ElementsPlan | NDPlan, emitter: FormEmitter) -> str:
    """Emit the nodes of a plan; the name of its output."""
    if isinstance(plan, GatherPlan):
        return emitter.gather(plan)
    if isinstance(plan, ElementsPlan):
        return emitter.gather_elements(plan)
    return emitter.gather_nd(plan)



__all__ = ["FormEmitter", "emit_form"]
