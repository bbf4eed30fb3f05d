"""The rewrite's report: one NodeOutcome per gather node, counted per op type."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

from onnx import ModelProto, NodeProto

from ..ir.walk import ONNX_DOMAINS, any_node
from ..passes.pass_report import PassReport
from ..sources.registry import GATHER_OPS


@dataclass
class NodeOutcome:
    """What the rewrite did to one gather node: rewritten or left (with the reason), and whether it was aligned at
    run time."""

    op_type: str
    node: str
    graph: str
    rewritten: bool
    reason: str = ""              # why it was left, or why it was aligned at run time
    runtime_aligned: bool = False  # rewritten with the run-time alignment (the last resort)


@dataclass
class RewriteReport(PassReport):
    """The rewrite's report: one NodeOutcome per gather node."""

    outcomes: list[NodeOutcome] = field(default_factory=list)
    # How the value_info of replaced main-graph outputs is typed: ORT's types of the original, or why not
    value_types: str = ""
    DONE: ClassVar[str] = "rewritten"

    @property
    def rewritten(self) -> int:
        """How many gathers were rewritten."""
        return self.done()

    @property
    def runtime_aligned(self) -> int:
        """How many of the rewritten gathers were aligned at run time."""
        return sum(o.runtime_aligned for o in self.outcomes)

    def counts(self) -> dict[str, dict[str, int]]:
        """``{op_type: {"rewritten": n, "left": m}}``, op types sorted."""
        table: dict[str, Counter] = {}
        for outcome in self.outcomes:
            table.setdefault(outcome.op_type, Counter())["rewritten" if outcome.rewritten else "left"] += 1
        return {op: {"rewritten": c["rewritten"], "left": c["left"]} for op, c in sorted(table.items())}

    def as_dict(self) -> dict:
        """The report as JSON-ready data (the commands' ``--json``)."""
        return {"rewritten": self.rewritten, "left": self.left, "runtime_aligned": self.runtime_aligned,
                "by_op": self.counts(), "value_types": self.value_types,
                "nodes": [vars(o) for o in self.outcomes]}

    def table(self) -> str:
        """The report as text: one row per op type, the total, then each left or run-time-aligned node."""
        counts = self.counts()
        width = max([16, *(len(op) + 2 for op in counts)])
        lines = [f"{'op type':<{width}}{'rewritten':>10}{'left':>6}"]
        for op, row in counts.items():
            lines.append(f"{op:<{width}}{row['rewritten']:>10}{row['left']:>6}")
        lines.append(f"{'total':<{width}}{self.rewritten:>10}{self.left:>6}")
        for outcome in self.outcomes:
            if not outcome.rewritten:
                lines.append(f"  left {outcome.op_type} {outcome.node!r} in {outcome.graph}: {outcome.reason}")
            elif outcome.runtime_aligned:
                lines.append(f"  aligned at run time: {outcome.op_type} {outcome.node!r} in {outcome.graph}: "
                             f"{outcome.reason}")
        return "\n".join(lines)


def holds_gather(model: ModelProto, ops: tuple[str, ...] = GATHER_OPS) -> bool:
    """Whether any graph of the model (main graph, subgraphs, model-local functions) holds one of ``ops``.

    Args:
        model: the model to search.
        ops: the op types that count (ONNX domain only).

    Returns:
        True when at least one node of those op types is found.
    """
    return any_node(model, lambda node: is_target(node, ops))


def is_target(node: NodeProto, ops: tuple[str, ...]) -> bool:
    """Whether ``node`` is one of ``ops`` in the ONNX domain."""
    return node.op_type in ops and node.domain in ONNX_DOMAINS


__all__ = ["NodeOutcome", "RewriteReport", "holds_gather", "is_target"]
