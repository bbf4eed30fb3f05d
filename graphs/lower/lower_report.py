"""What the lowering did to each GatherMultiaxis node."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..passes.pass_report import PassReport

GENERAL = "general"  # the form name of the general decomposition
KEPT_FOR_KERNEL = "kept for the GatherMultiaxis kernel"  # lower_single_gathers' reason for a node it leaves


@dataclass
class LoweredNode:
    """What the lowering did to one GatherMultiaxis node: lowered or left (with the reason), its form and where the
    form came from."""

    node: str
    graph: str
    lowered: bool
    reason: str = ""  # why it was left; for the general form, why no single gather computes it
    form: str = ""    # Gather, GatherElements, GatherND, Identity or general
    source: str = ""  # "rewrite record" (step 1) or "semantics" (steps 2-3)


@dataclass
class LowerReport(PassReport):
    """The lowering's report: one LoweredNode per GatherMultiaxis node."""

    outcomes: list[LoweredNode] = field(default_factory=list)
    DONE: ClassVar[str] = "lowered"

    @property
    def lowered(self) -> int:
        """How many nodes were lowered."""
        return self.done()

    def forms(self) -> dict[str, int]:
        """``{form: count}`` over the lowered nodes, forms sorted."""
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            if outcome.lowered:
                counts[outcome.form] = counts.get(outcome.form, 0) + 1
        return dict(sorted(counts.items()))

    def as_dict(self) -> dict:
        """PassReport's dict plus ``forms``."""
        return {**super().as_dict(), "forms": self.forms()}

    def table(self) -> str:
        """The counts, the forms, then each general-form or left node with its reason."""
        lines = [f"GatherMultiaxis lowered: {self.lowered}, left: {self.left}"]
        if self.forms():
            lines.append("  forms: " + ", ".join(f"{form} {count}" for form, count in self.forms().items()))
        lines += [f"  general form for {o.node!r} in {o.graph}: {o.reason}" for o in self.outcomes
                  if o.lowered and o.form == GENERAL]
        lines += [f"  left {o.node!r} in {o.graph}: {o.reason}" for o in self.left_outcomes()]
        return "\n".join(lines)



__all__ = ["GENERAL", "KEPT_FOR_KERNEL", "LowerReport", "LoweredNode"]
