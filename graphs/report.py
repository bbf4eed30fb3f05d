"""The report every pass returns: one outcome per node it was asked to change (changed, or left as it
is with the reason). The rewrite (``RewriteReport``) and the lowering (``LowerReport``) name the change
after what they do ("rewritten", "lowered"); counting and serialising are shared here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar


@dataclass
class PassReport:
    outcomes: list = field(default_factory=list)
    DONE: ClassVar[str] = "done"  # the outcome attribute that says the node was changed

    def done(self) -> int:
        return sum(getattr(o, self.DONE) for o in self.outcomes)

    @property
    def left(self) -> int:
        """Nodes left as they were, each with its reason."""
        return sum(not getattr(o, self.DONE) for o in self.outcomes)

    def left_outcomes(self) -> list:
        return [o for o in self.outcomes if not getattr(o, self.DONE)]

    def as_dict(self) -> dict:
        return {self.DONE: self.done(), "left": self.left, "nodes": [vars(o) for o in self.outcomes]}


__all__ = ["PassReport"]
