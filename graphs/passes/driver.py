"""The driver of every node pass: the walk and splice ``NodePass`` states."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Callable

from onnx import GraphProto, ModelProto, NodeProto

from ...ops.contract import DOMAIN
from ..ranks.tensor_info import TensorInfo
from ..ranks.shape_inference import inferred
from ..ranks.typing_copy import typing_copy
from ..ir.builder import NameScope
from ..ir.constant_view import ConstantView
from ..ir.dead_nodes import remove_dead_in_model
from ..ir.walk import all_names, any_node, default_opset, holds_subgraph, nodes_within
from .inlining import inline_functions_holding, pass_copy
from .pass_base import NodePass, NotChanged, PassResult, Visit
from .pass_report import PassReport
from .scopes import GraphScope, InferredGraph

# The package's name: the -v log lines read "gathermultiaxis.graphs.passes: RewritePass: ..."
_log = logging.getLogger(__package__)  # silent unless the application configures logging (see the package root)


@dataclass(frozen=True)
class _Hooks:
    """A pass's hooks as the driver calls them; None for a hook the pass does not have (nothing to call)."""

    name: str
    report: PassReport
    targets: Callable[[NodeProto], bool]
    copy_targets: Callable[[NodeProto], bool]
    visit: Callable[[NodeProto, GraphScope], Visit]
    outcome: Callable[[NodeProto, str, Visit | None, str], Any]
    prepare: Callable[[ModelProto], None] | None
    begin: Callable[[ModelProto, ModelProto | None], None] | None
    scope_infos: Callable[[GraphProto, InferredGraph, dict, bool], dict[str, TensorInfo]] | None
    observe: Callable[[NodeProto, GraphScope], None] | None
    walks_again: Callable[[ModelProto, list], bool] | None
    external_data_folder: Callable[[], Any]
    copies: bool
    infers_types: bool
    keeps_types: bool
    drops_domain: bool
    partial_types: bool

    @classmethod
    def of_node_pass(cls, node_pass: NodePass) -> "_Hooks":
        kind = type(node_pass)

        def own(name: str):  # the pass's method, or None where it keeps the base's default
            return None if getattr(kind, name) is getattr(NodePass, name) else getattr(node_pass, name)

        def outcome(node: NodeProto, path: str, visit: Visit | None, reason: str) -> Any:
            return node_pass.outcome(node, path, None if visit is None else visit.detail, reason)

        return cls(kind.__name__, node_pass.report, node_pass.targets, node_pass.copy_targets, node_pass.visit,
                   outcome, own("prepare"), own("begin"), own("scope_infos"), own("observe"), own("walks_again"),
                   lambda: node_pass.external_data_folder, not node_pass.in_place, node_pass.infers_types,
                   node_pass.keeps_types, node_pass.drops_domain, node_pass.partial_types)


@dataclass
class _Driver:
    hooks: _Hooks
    opset: int
    names: NameScope
    outcomes: list = field(default_factory=list)
    freed: set[str] = field(default_factory=set)

    def graph(self, graph: GraphProto, twin: InferredGraph, outer_infos: dict, outer_constants: ConstantView | None,
              path: str, main: bool) -> None:
        hooks = self.hooks
        infos = hooks.scope_infos(graph, twin, outer_infos, main) if hooks.scope_infos else {**outer_infos, **twin.infos}
        constants = ConstantView(graph, outer_constants, hooks.external_data_folder())
        original = len(graph.node)
        scope = GraphScope(graph, path, self.opset, self.names, infos, constants, original, main, self.outcomes,
                           partial_types=hooks.partial_types)
        observe, targets = hooks.observe, hooks.targets
        counts: dict[int, int] = {}  # position of a replaced node -> how many nodes replace it
        removed: set[int] = set()    # ids of superseded nodes
        for position in range(original):
            node = graph.node[position]
            if position in twin.holders if twin.typed else (node.attribute and holds_subgraph(node)):
                for attribute_name, sub, sub_twin in twin.sub(position, node):
                    self.graph(sub, sub_twin, infos, constants,
                               f"{path}/{node.name or node.op_type}.{attribute_name}", False)
            if observe is not None:
                observe(node, scope)
            if not targets(node) or id(node) in removed:
                continue
            start = len(graph.node)
            try:
                visit = hooks.visit(node, scope)
            except NotChanged as reason:
                del graph.node[start:]  # what the visit built before it gave up
                self.outcomes.append(hooks.outcome(node, path, None, str(reason)))
                continue
            if visit.in_place:
                del graph.node[start:]  # (nothing to splice: the node itself is its replacement)
            else:
                if visit.nodes is not None:
                    graph.node.extend(visit.nodes)  # copied into the graph's own field (one protobuf arena)
                counts[position] = len(graph.node) - start
            removed.update(id(other) for other in visit.removes)
            self.freed |= visit.freed
            self.outcomes.append(hooks.outcome(node, path, visit, ""))
        splice(graph, original, counts, removed)


def splice(graph: GraphProto, original: int, counts: dict[int, int], removed: AbstractSet[int] = frozenset()) -> None:
    """Put each replacement (``counts[position]`` nodes after the first ``original``) where its node was; drop
    ``removed`` ids. An in-place sort, no copy: a graph may hold Constant nodes of gigabytes."""
    if not counts and not removed:
        return
    if not counts:  # removals only (a few, where visits changed their nodes in place): no sort
        removed_positions = [position for position, node in enumerate(itertools.islice(graph.node, original))
                             if id(node) in removed]
        for position in reversed(removed_positions):
            del graph.node[position]
        return
    # The sort hands its key function the same message objects this list holds (they stay alive, and
    # protobuf keeps one Python object per live message), so a node's identity finds its rank.
    nodes = list(graph.node)
    gone = {position for position in range(original) if id(nodes[position]) in removed} | set(counts)
    end = len(nodes) - len(gone)  # the result's length: replaced and removed nodes sort after it
    place, rank, new = {}, 0, original
    for position in range(original):
        count = counts.get(position)
        if position in gone:
            place[id(nodes[position])] = end + position
        else:
            place[id(nodes[position])] = rank
            rank += 1
        if count is not None:
            for replacement in nodes[new:new + count]:
                place[id(replacement)] = rank
                rank += 1
            new += count
    graph.node.sort(key=lambda node: place[id(node)])
    del graph.node[end:]


def drop_unused_domain(model: ModelProto, domain: str = DOMAIN) -> None:
    """Drop the opset import of ``domain`` when no node or function uses it any more."""
    if any_node(model, lambda node: node.domain == domain) or any(f.domain == domain for f in model.functions):
        return
    kept = [o for o in model.opset_import if o.domain != domain]
    del model.opset_import[:]
    model.opset_import.extend(kept)


def _run(hooks: _Hooks, model: ModelProto, repeat: bool) -> ModelProto:
    """The walk of NodePass's contract over ``model``; returns the pass's model."""
    copy_targets = hooks.copy_targets
    report = hooks.report
    first_outcome = len(report.outcomes)
    if hooks.copies:
        result, failure = pass_copy(model, copy_targets)
    else:
        ir_version = model.ir_version
        result, failure = inline_functions_holding(model, copy_targets)
        result.ir_version = ir_version
    if hooks.prepare is not None:
        hooks.prepare(result)
    if failure:
        for function in result.functions:
            for node in nodes_within(function.node):
                if copy_targets(node):
                    report.outcomes.append(hooks.outcome(node, f"function {function.name}", None, failure))
    names, freed = NameScope(all_names(result)), set()
    while True:
        light = typing_copy(result) if hooks.infers_types else None
        main = InferredGraph.of(inferred(light).graph, True) if light is not None else InferredGraph.untyped()
        if hooks.begin is not None:
            hooks.begin(result, light)
        del light
        driver = _Driver(hooks, default_opset(result), names)
        driver.graph(result.graph, main, {}, None, "main graph", True)
        if hooks.keeps_types:
            report.main_graph_types = main.infos
        freed |= driver.freed
        if not repeat:
            report.outcomes.extend(driver.outcomes)
            break
        done = [o for o in driver.outcomes if getattr(o, report.DONE)]
        report.outcomes.extend(done)
        if not (done and len(done) < len(driver.outcomes)) or (
                hooks.walks_again is not None and not hooks.walks_again(result, driver.outcomes)):
            report.outcomes.extend(o for o in driver.outcomes if not getattr(o, report.DONE))
            break
    remove_dead_in_model(result, freed)
    if hooks.drops_domain:
        drop_unused_domain(result)
    _log_outcomes(hooks.name, report, report.outcomes[first_outcome:])
    return result


def run_node_pass(node_pass: NodePass, model: ModelProto) -> PassResult:
    """Run ``node_pass`` over ``model`` as NodePass states."""
    report = node_pass.report
    if node_pass.skip_without_targets and not any_node(model, node_pass.copy_targets):
        return PassResult(model, False, report)
    first_outcome = len(report.outcomes)
    result = _run(_Hooks.of_node_pass(node_pass), model, node_pass.repeat)
    modified = any(getattr(o, report.DONE) for o in report.outcomes[first_outcome:])
    return PassResult(result, modified, report)


def _log_outcomes(pass_name: str, report: PassReport, outcomes: list) -> None:
    """What a pass did, for ``logging``: the counts at INFO, one line per node at DEBUG (``-v``, ``-vv``)."""
    if not _log.isEnabledFor(logging.INFO):
        return
    done = sum(bool(getattr(o, report.DONE)) for o in outcomes)
    _log.info("%s: %d %s, %d left as they were", pass_name, done, report.DONE, len(outcomes) - done)
    for outcome in outcomes:
        _log.debug("%s: %s", pass_name, ", ".join(f"{key}={value!r}" for key, value in vars(outcome).items()
                                                  if value not in ("", None)))


__all__ = ["drop_unused_domain", "run_node_pass", "splice"]
