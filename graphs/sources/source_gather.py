"""The record of one source gather: everything the rewrite, the rank layers and the lowering know of an op that
gathers. One record per op lives in its own module of this package; ``registry.SOURCES`` lists them once."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

from onnx import NodeProto

from ...ops.alignment import Alignment
from ...ops.contract import Mode
from ..ranks.tensor_info import TensorInfo
from ..ir.builder import NodeBuilder
from ..ranks.rank_rules import RankRule

if TYPE_CHECKING:
    from .run_time_shapes import RuntimeAlignment


class Rewrite(enum.Enum):
    """Whether the rewrite replaces a source op."""

    DEFAULT = "default"  # every rewrite (``GATHER_OPS``)
    OPT_IN = "opt_in"    # only where the caller names the op (``OPT_IN_OPS``)
    NEVER = "never"      # gathers inside another op's kernel: reported, never rewritten (``INTERNAL_GATHERS``)


class NeedsRunTime(Exception):
    """No static alignment: what is missing (a rank, GatherND's coordinate size) is known only at run time."""


@dataclass(frozen=True)
class Replacement:
    """What a static alignment decides for one node: the alignment, plus the graph-only details."""

    alignment: Alignment
    slice_data_except: int | None = None  # GatherElements: cut data to the indices' extents but on this axis
    mode: Mode = Mode.ERROR               # Mode.ERROR_NONEMPTY for GatherND: ORT checks nothing when nothing is read


# (node, data, indices) -> Replacement, on known ranks; raises NeedsRunTime or ops.alignment.AlignmentError
StaticAlign = Callable[[NodeProto, TensorInfo, TensorInfo], Replacement]
# (builder, data name, indices name, node) -> the alignment computed by the model at run time
RunTimeAlign = Callable[[NodeBuilder, str, str, NodeProto], "RuntimeAlignment"]
# (data, indices) -> the same with what the op's rank constraint tells (GatherElements: equal ranks)
CompleteRanks = Callable[[TensorInfo, TensorInfo], tuple[TensorInfo, TensorInfo]]
# (node, data, indices, builder) -> the replacement of a builtin-gather node, as the rewrite emits it
GatherEmitter = Callable[[NodeProto, TensorInfo, TensorInfo, NodeBuilder], object]


class OptInEmitter(Protocol):
    """Appends the whole replacement of an opt-in op's node to ``builder`` and returns its output's TensorInfo;
    raises graphs.passes.pass_report.LeftUnchanged where it cannot. ``infos``: what is known of every value by
    name; ``emit_gather``: the rewrite's replacement of a builtin gather, for the gathers inside the op."""

    def __call__(self, node: NodeProto, infos: dict[str, TensorInfo], builder: NodeBuilder,
                 emit_gather: GatherEmitter) -> TensorInfo: ...


@dataclass(frozen=True)
class OptInRule:
    """An entry of ``RULES`` for an op of another domain that gathers inside its kernel, rewritten only when
    the caller names it: no single alignment replaces it, ``emitter`` builds the whole replacement."""

    domain: str
    emitter: OptInEmitter

    def emit(self, node: NodeProto, infos: dict[str, TensorInfo], builder: NodeBuilder,
             emit_gather: GatherEmitter) -> TensorInfo:
        """Append the replacement of ``node`` to ``builder`` (``OptInEmitter``)."""
        return self.emitter(node, infos, builder, emit_gather)


@dataclass(frozen=True)
class SourceGather:
    """One source gather: how the rewrite replaces it, how ranks flow through it, how ``lower`` gives it back."""

    domain: str                      # "" for the ONNX domain
    op_type: str
    rewrite: Rewrite
    first_opset: int = 1             # the first opset of its domain that has the op (lower gives it back from there)
    mode: Mode | None = None         # the mode of the one GatherMultiaxis the rewrite writes (None: not one)
    why_not: str = ""                # Rewrite.NEVER (and an opt-in op not asked for): the report's reason
    align: StaticAlign | None = None
    align_at_run_time: RunTimeAlign | None = None
    complete_ranks: CompleteRanks | None = None
    rank_rule: RankRule | None = None
    recorded_attributes: tuple[str, ...] = ()  # the integer attributes a provenance record carries
    opt_in: OptInRule | None = None  # Rewrite.OPT_IN: the emitter of the whole replacement

    @property
    def rule(self) -> StaticAlign | OptInRule | None:
        """The entry of ``RULES`` for this op: its static alignment or its opt-in rule."""
        return self.opt_in if self.rewrite is Rewrite.OPT_IN else self.align


__all__ = ["CompleteRanks", "GatherEmitter", "NeedsRunTime", "OptInEmitter", "OptInRule", "Replacement", "Rewrite",
           "RunTimeAlign", "SourceGather", "StaticAlign"]
