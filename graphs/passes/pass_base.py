"""The declared pass base, in onnx-ir's manner (``onnx_ir.passes``): a ``ModelPass`` turns a model into a
``PassResult``; a ``NodePass`` is one visit per target node, walked by the driver; ``Sequential`` and ``Repeat``
compose passes. The contract of a node pass's hooks is stated here, once."""

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
    """What a pass made of a model.

    Attributes:
        model: the resulting model (the given one itself for a pass that works in place).
        modified: whether the pass changed anything.
        report: the pass's report, for a node pass (None for a composition).
    """

    model: ModelProto
    modified: bool
    report: PassReport | None = None


class ModelPass(ABC):
    """One step over a whole model. ``pass_(model)`` checks ``requires``, runs ``call`` and checks ``ensures``.

    Attributes:
        in_place: the pass changes the model it is given (its result's model may be that model); otherwise it
            leaves it unchanged and works on a copy.
    """

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
    """A visit's change of one node.

    Attributes:
        nodes: the nodes that replace it, in its place; None when the visit built them at the end of
            ``scope.graph.node`` itself (one protobuf arena).
        removes: other nodes of its graph that the replacement supersedes (removed).
        freed: names whose producers may be dead now: removed at the end when nothing reads them, and what only
            they read.
        detail: what the report's row says of the change (the pass's own type).
        in_place: the visit changed the node itself, which stays where it is (``nodes`` is then ignored: no
            splice; such a visit reads the scope's producers and readers before its first change).
    """

    nodes: Sequence[NodeProto] | None
    removes: list[NodeProto] = field(default_factory=list)
    freed: set[str] = field(default_factory=set)
    # A dict until every pass is a NodePass (the passes of run_pass read ``visit.detail`` by key)
    detail: D = field(default_factory=dict)  # type: ignore[assignment]
    in_place: bool = False


class NodePass(ModelPass, Generic[D]):
    """A pass that changes target nodes one at a time, in every graph scope of a model (the main graph, If /
    Loop / Scan bodies at any depth), each replacement spliced where its node was; its report gets one outcome
    per target node. What the driver (``driver.run_node_pass``) does, in order:

    1. The pass's model: a copy (or the given model itself, with ``in_place``), the model-local functions that
       hold a node ``copy_targets`` accepts inlined; a target left in a function that could not be inlined is
       reported as left, with the inliner's reason. ``prepare(model)`` is then called with it.
    2. With ``infers_types``, ONNX's inference of a typing copy (``graphs.ranks.typing_copy``); ``begin``
       gets the model and that copy (None without ``infers_types``), which is dropped after it.
    3. The walk: every scope in graph order, a node's subgraphs before the node. ``scope_infos`` gives a
       scope's types; ``observe(node, scope)`` sees every node in order; ``visit(node, scope)`` runs for each
       node ``targets`` accepts and returns a ``Visit``, or raises ``NotChanged`` with the reason; ``outcome``
       makes the report's row of it.
    4. With ``repeat``, the walk runs again while it changes some nodes and leaves others (ONNX's inference
       stops at a custom op under onnx < 1.19: ranks behind one are known once it is replaced).
    5. What the visits freed and nothing reads any more is removed; with ``drops_domain``, the GatherMultiaxis
       domain's import goes when nothing uses it; with ``keeps_types``, the report keeps the main graph's
       inferred types. The counts are logged (``gathermultiaxis.graphs.passes``: INFO, one line a node at DEBUG).

    Hooks that are not overridden cost nothing per node (the driver skips them).

    Attributes:
        report: where the outcomes go (``PassReport.DONE`` names the attribute that says a node was changed).
        infers_types: infer types (else every type is unknown unless ``scope_infos`` says it).
        keeps_types: the report keeps the main graph's inferred types.
        drops_domain: drop the GatherMultiaxis domain's opset import when nothing uses it any more.
        repeat: walk again while something changes and something is left.
        skip_without_targets: a model without a target node is returned as it is (no copy, no walk).
        external_data_folder: where the scopes' constants read external data (the model's folder), or None.
    """

    report: PassReport
    infers_types: ClassVar[bool] = True
    keeps_types: ClassVar[bool] = False
    drops_domain: ClassVar[bool] = False
    repeat: ClassVar[bool] = False
    skip_without_targets: ClassVar[bool] = False
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

    @abstractmethod
    def visit(self, node: NodeProto, scope: GraphScope) -> Visit[D]:
        """The pass's change of a target node.

        Raises:
            NotChanged: the node is kept as it is (the message is the reason); what the visit appended to
                ``scope.graph.node`` is discarded.
        """

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
