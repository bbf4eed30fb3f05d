"""The pass base, in onnx-ir's manner (``onnx_ir.passes``); the contract of a node pass's hooks is stated here."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Sequence, TypeVar

from onnx import GraphProto, ModelProto, NodeProto

from .pass_report import PassReport

if TYPE_CHECKING:
    from ..ranks.tensor_info import TensorInfo
    from .scopes import GraphScope, InferredGraph

D = TypeVar("D")  # what a node pass's visit says of a changed node, for its report's row


class NotChanged(Exception):
    """The visited node is kept as it is; the message says why."""


@dataclass
class PassResult:
    """What a pass made of a model; ``report`` is None for a composition."""

    model: ModelProto
    modified: bool
    report: PassReport | None = None


class ModelPass(ABC):
    """One step over a whole model: ``requires``, ``call``, ``ensures``. ``in_place``: it changes the model it
    is given (else it works on a copy)."""

    in_place: ClassVar[bool] = False

    def requires(self, model: ModelProto) -> None:
        """Check what the pass needs of ``model`` before it runs (raise if it is not met); by default nothing."""

    def ensures(self, model: ModelProto) -> None:
        """Check what the pass promises of its result (raise if it is not met); by default nothing."""

    @abstractmethod
    def call(self, model: ModelProto) -> PassResult:
        """Run the pass."""

    def __call__(self, model: ModelProto) -> PassResult:
        self.requires(model)
        result = self.call(model)
        self.ensures(result.model)
        return result


@dataclass
class Visit(Generic[D]):
    """A visit's change of one node. ``nodes``: its replacement, or None when the visit appended them to
    ``scope.graph.node`` itself (one protobuf arena). ``freed``: names whose producers may be dead now.
    ``in_place``: the node itself was changed (``nodes`` ignored; such a visit reads the scope's producers and
    readers before its first change)."""

    nodes: Sequence[NodeProto] | None
    removes: list[NodeProto] = field(default_factory=list)
    freed: set[str] = field(default_factory=set)
    detail: D = field(kw_only=True)  # what the pass's ``outcome`` reads (its own typed record)
    in_place: bool = False


class NodePass(ModelPass, Generic[D]):
    """Changes target nodes one at a time in every graph scope (If / Loop / Scan bodies at any depth), each
    replacement spliced where its node was; one report outcome per target. The driver (``driver.run_node_pass``):

    1. copies the model (unless ``in_place``), inlines the functions holding a ``copy_targets`` node (a target
       left in one is reported with the inliner's reason), calls ``prepare``;
    2. with ``infers_types``, infers a typing copy for ``begin`` (else ``begin`` gets None);
    3. walks each scope, subgraphs before their node: ``observe`` every node, ``visit`` each target (a ``Visit``
       or ``NotChanged``), ``outcome`` makes its row;
    4. with ``repeat``, walks again while some change, some are left and ``walks_again`` says so (onnx < 1.19
       stops inference at a custom op);
    5. removes what the visits freed and nothing reads; ``drops_domain`` drops the unused domain import;
       ``keeps_types`` keeps the main graph's types in the report. Hooks not overridden cost nothing.

    ``skip_without_targets``: a model without a target comes back as it is. ``external_data_folder``: where
    the scopes' constants read external data. ``partial_types``: the pass's ``scope_infos`` know less than
    the inference would (its scopes say so: a guard then decides what it does not know as refusing).
    """

    report: PassReport
    infers_types: ClassVar[bool] = True
    keeps_types: ClassVar[bool] = False
    drops_domain: ClassVar[bool] = False
    repeat: ClassVar[bool] = False
    skip_without_targets: ClassVar[bool] = False
    partial_types: ClassVar[bool] = False
    external_data_folder: str | os.PathLike | None = None

    @abstractmethod
    def targets(self, node: NodeProto) -> bool:
        """Whether the pass visits ``node``."""

    def copy_targets(self, node: NodeProto) -> bool:
        """Whether a model-local function holding ``node`` is inlined first; by default ``targets``."""
        return self.targets(node)

    def prepare(self, model: ModelProto) -> None:
        """Called with the pass's model before anything else reads it; by default nothing."""

    def begin(self, model: ModelProto, typing_copy: ModelProto | None) -> None:
        """Called before each walk; by default nothing."""

    def scope_infos(self, graph: GraphProto, twin: InferredGraph, outer: dict[str, TensorInfo],
                    main: bool) -> dict[str, TensorInfo]:
        """The types of the names visible in ``graph``; by default the enclosing scopes' and the inferred ones."""
        return {**outer, **twin.infos}

    def observe(self, node: NodeProto, scope: GraphScope) -> None:
        """Called for every node of a scope, in graph order, before its visit; by default nothing."""

    def walks_again(self, model: ModelProto, outcomes: list) -> bool:
        """With ``repeat``, after a walk that changed some targets and left others (``outcomes``: its rows):
        whether another walk of ``model`` may change more; by default yes."""
        return True

    @abstractmethod
    def visit(self, node: NodeProto, scope: GraphScope) -> Visit[D]:
        """The pass's change of a target node; on ``NotChanged`` what it appended to the graph is discarded."""

    @abstractmethod
    def outcome(self, node: NodeProto, path: str, detail: D | None, reason: str) -> Any:
        """The report's row for a target node."""

    def call(self, model: ModelProto) -> PassResult:
        """Run the pass through the driver (the class docstring)."""
        from .driver import run_node_pass  # (the driver imports this module)

        return run_node_pass(self, model)


class Sequential(ModelPass):
    """Passes run in order, each on the model the previous one made (``modified``: any of them changed it)."""

    def __init__(self, *passes: ModelPass):
        self.passes = passes

    def call(self, model: ModelProto) -> PassResult:
        """Run each pass in turn."""
        modified = False
        for step in self.passes:
            result = step(model)
            model, modified = result.model, modified or result.modified
        return PassResult(model, modified)


class Repeat(ModelPass):
    """A pass run again on its own result while it changes something, at most ``max_rounds`` times."""

    def __init__(self, inner: ModelPass, max_rounds: int):
        self.inner, self.max_rounds = inner, max_rounds

    def call(self, model: ModelProto) -> PassResult:
        """Run the pass up to ``max_rounds`` times, stopping after a round that changed nothing."""
        modified = False
        for _ in range(self.max_rounds):
            result = self.inner(model)
            model = result.model
            if not result.modified:
                break
            modified = True
        return PassResult(model, modified)


__all__ = ["ModelPass", "NodePass", "NotChanged", "PassResult", "Repeat", "Sequential", "Visit"]
