"""The report every node pass returns (one outcome per target node); its counting and serialising."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ..ranks.tensor_info import TensorInfo


class LeftUnchanged(Exception):
    """The node is kept as it is; the message says why (a pass's report row)."""


@dataclass
class PassReport:
    """One outcome per node a pass was asked to change; each row's ``DONE`` attribute says it was changed."""

    outcomes: list = field(default_factory=list)
    # ONNX shape inference's types of the main graph of the model the pass was given (its first layer),
    # for the command's load check of the written model (graphs.load_check) not to infer them again;
    # empty when the pass does not keep them (the rewrite does).
    main_graph_types: dict[str, TensorInfo] = field(default_factory=dict, repr=False)
    DONE: ClassVar[str] = "done"  # the outcome attribute that says the node was changed

    def done(self) -> int:
        """How many nodes the pass changed."""
        return sum(getattr(o, self.DONE) for o in self.outcomes)

    @property
    def left(self) -> int:
        """Nodes left as they were, each with its reason."""
        return sum(not getattr(o, self.DONE) for o in self.outcomes)

    def left_outcomes(self) -> list:
        """The nodes left as they were."""
        return [o for o in self.outcomes if not getattr(o, self.DONE)]

    def as_dict(self) -> dict:
        """The report as JSON-ready data (the commands' ``--json``)."""
        return {self.DONE: self.done(), "left": self.left, "nodes": [vars(o) for o in self.outcomes]}


__all__ = ["LeftUnchanged", "PassReport"]
