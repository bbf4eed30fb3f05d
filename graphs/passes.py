"""The pass driver. What every pass (the rewrite, the lowering, the session's bind step) starts from is
its own copy of the model, with the model-local functions that hold one of its target nodes inlined, so
that every such node sits in a graph, where the pass can see its types and replace it (``pass_copy``).

``run_pass`` is the rest of the job for a pass written as a ``GraphPass``: which nodes it targets and a
visit function (a node and its ``GraphScope`` in; a ``Visit``, the replacement nodes, or ``NotChanged``
with the reason out). The driver walks every graph scope (the main graph, If / Loop / Scan bodies at
any depth) beside its twin in ONNX's inference of the pass's typing copy, gives each visit the types,
the constants, the producers and readers of its scope, splices replacements in place, removes what the
replacements made dead once at the end, drops the custom domain's opset import when nothing uses it any
more, and appends one outcome per target node to the pass's report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np
import onnx
import onnx.inliner
from onnx import GraphProto, ModelProto, NodeProto

from ..ops.contract import DOMAIN
from .builder import NameScope
from .inference import TensorInfo, graph_infos, inferred, typing_copy
from .report import PassReport
from .walk import all_names, constant_arrays, default_opset, drop_unused, node_holders, nodes_within, subgraphs


def pass_copy(model: ModelProto, is_target: Callable[[NodeProto], bool]) -> tuple[ModelProto, str]:
    """A copy of ``model`` for a pass, with the functions holding a target node inlined (the IR version
    kept: the inliner may write its own); and "" or, when onnx's inliner fails, the reason (the copy then
    comes back not inlined, and the pass reports the target nodes left in functions)."""
    result = ModelProto()
    result.CopyFrom(model)
    ir_version = result.ir_version
    result, failure = inline_functions_holding(result, is_target)
    result.ir_version = ir_version
    return result, failure


def _functions_holding(model: ModelProto, is_target: Callable[[NodeProto], bool]) -> set[tuple[str, str]]:
    """Model-local functions holding a target node anywhere: in their body, its subgraphs, or a function
    they call."""
    bodies = {(f.domain, f.name): list(nodes_within(f.node)) for f in model.functions}
    holding = {key for key, nodes in bodies.items() if any(is_target(n) for n in nodes)}
    grown = True
    while grown:
        grown = False
        for key, nodes in bodies.items():
            if key not in holding and any((n.domain, n.op_type) in holding for n in nodes):
                holding.add(key)
                grown = True
    return holding


def _apply_attribute_defaults(model: ModelProto) -> None:
    """Give every call of a model-local function the defaults of the attributes it does not set
    (``onnx.inliner`` drops FunctionProto.attribute_proto defaults)."""
    defaults = {(f.domain, f.name): list(f.attribute_proto) for f in model.functions if len(f.attribute_proto)}
    if not defaults:
        return
    nodes = list(nodes_within(model.graph.node))
    for function in model.functions:
        nodes.extend(nodes_within(function.node))
    for node in nodes:
        for default in defaults.get((node.domain, node.op_type), ()):
            if not any(attribute.name == default.name for attribute in node.attribute):
                node.attribute.append(default)


def inline_functions_holding(model: ModelProto, is_target: Callable[[NodeProto], bool]) -> tuple[ModelProto, str]:
    """``model`` with every model-local function that holds a target node (see _functions_holding)
    inlined, attribute defaults applied first (``model`` is changed for that); and "" or, when onnx's
    inliner fails, the reason (the model then comes back not inlined). Shared by rewrite and lower."""
    holding = _functions_holding(model, is_target)
    if not holding:
        return model, ""
    _apply_attribute_defaults(model)
    try:
        return onnx.inliner.inline_selected_functions(model, sorted(holding)), ""
    except Exception as error:  # noqa: BLE001
        return model, f"the function could not be inlined: {error}"


class NotChanged(Exception):
    """The visited node is kept as it is; the message says why."""


@dataclass
class GraphScope:
    """One graph as a visit sees it. ``infos`` and ``constants`` hold the enclosing scopes' names too (a
    graph input hides an outer constant of its name); ``readers`` counts, per name, the nodes of this
    graph that read it (directly or in a subgraph, once a node) plus one for a graph output."""

    graph: GraphProto
    path: str
    opset: int
    names: NameScope
    infos: dict[str, TensorInfo]
    constants: dict[str, np.ndarray]
    producers: dict[str, NodeProto]
    consumers: dict[str, list[NodeProto]]  # the nodes of this graph that take a name as an input
    readers: dict[str, int]

    UNKNOWN = TensorInfo(0, None)

    def info(self, name: str) -> TensorInfo:
        return self.infos.get(name, self.UNKNOWN)


@dataclass
class Visit:
    """A visit's change of one node: the nodes that replace it (in its place), the other nodes of its
    graph that the replacement supersedes (removed), the names whose producers may be dead now (removed
    at the end when nothing reads them, and what only they read), and what the report says of it."""

    nodes: list[NodeProto]
    removes: list[NodeProto] = field(default_factory=list)
    freed: set[str] = field(default_factory=set)
    detail: dict = field(default_factory=dict)


class GraphPass(Protocol):
    report: PassReport

    def targets(self, node: NodeProto) -> bool: ...

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit: ...

    def outcome(self, node: NodeProto, path: str, visit: Visit | None, reason: str): ...


def _readers(graph: GraphProto) -> dict[str, int]:
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in {*node.input, *(n for a in node.attribute for sub in subgraphs(a) for n in _outer_reads(sub))}:
            readers[name] = readers.get(name, 0) + 1
    for value in graph.output:
        readers[value.name] = readers.get(value.name, 0) + 1
    return readers


def _outer_reads(graph: GraphProto):
    for node in nodes_within(graph.node):
        yield from node.input


@dataclass
class _Driver:
    graph_pass: GraphPass
    opset: int
    names: NameScope
    outcomes: list = field(default_factory=list)
    freed: set[str] = field(default_factory=set)
    changed: int = 0

    def graph(self, graph: GraphProto, inferred_graph: GraphProto, scope_infos: dict, scope_constants: dict,
              path: str, main: bool) -> None:
        infos = {**scope_infos, **graph_infos(inferred_graph, main)}
        shadowed = {value.name for value in graph.input}
        constants = {**{k: v for k, v in scope_constants.items() if k not in shadowed}, **constant_arrays(graph)}
        for node, inferred_node in zip(graph.node, inferred_graph.node):
            for attribute, inferred_attribute in zip(node.attribute, inferred_node.attribute):
                for sub, inferred_sub in zip(subgraphs(attribute), subgraphs(inferred_attribute)):
                    self.graph(sub, inferred_sub, infos, constants,
                               f"{path}/{node.name or node.op_type}.{attribute.name}", False)
        targets = [node for node in graph.node if self.graph_pass.targets(node)]
        if not targets:
            return
        consumers: dict[str, list[NodeProto]] = {}
        for node in graph.node:
            for name in set(node.input):
                consumers.setdefault(name, []).append(node)
        scope = GraphScope(graph, path, self.opset, self.names, infos, constants,
                           {output: node for node in graph.node for output in node.output if output}, consumers,
                           _readers(graph))
        replacements: dict[int, list[NodeProto]] = {}
        removed: set[int] = set()
        for node in targets:
            if id(node) in removed:
                continue
            try:
                visit = self.graph_pass.visit(node, scope)
            except NotChanged as reason:
                self.outcomes.append(self.graph_pass.outcome(node, path, None, str(reason)))
                continue
            self.outcomes.append(self.graph_pass.outcome(node, path, visit, ""))
            self.changed += 1
            replacements[id(node)] = visit.nodes
            removed.update(id(other) for other in visit.removes)
            self.freed |= visit.freed
        if replacements or removed:
            _splice(graph, replacements, removed)


def _splice(graph: GraphProto, replacements: dict[int, list[NodeProto]], removed: set[int]) -> None:
    """Each replaced node's replacement in its place, removed nodes out; the list rebuilt once."""
    nodes = []
    for node in graph.node:
        if id(node) in replacements:
            nodes.extend(replacements[id(node)])
        elif id(node) not in removed:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)


def drop_freed(model: ModelProto, names: set[str]) -> None:
    """Remove what produces ``names`` when nothing reads it any more, and then what only that read, graph
    by graph until nothing changes (a subgraph may hold the last reader of an outer name). Graph inputs
    and outputs stay; initializers go only where a removed node was their last reader."""
    changed = True
    while changed:
        changed = False
        # holders found afresh after each change: drop_unused rebuilds a node list, which detaches the
        # subgraphs found before
        for graph in (holder for holder in node_holders(model) if isinstance(holder, GraphProto)):
            candidates = [node for node in graph.node if any(name in names for name in node.output)]
            freed = drop_unused(graph, candidates, names, cascade=True, all_initializers=False)
            if freed:
                changed, names = True, names | freed
                break


def drop_unused_domain(model: ModelProto, domain: str = DOMAIN) -> None:
    """Drop the opset import of ``domain`` when no node or function uses it any more."""
    used = any(node.domain == domain for holder in node_holders(model) for node in holder.node)
    if used or any(f.domain == domain for f in model.functions):
        return
    kept = [o for o in model.opset_import if o.domain != domain]
    del model.opset_import[:]
    model.opset_import.extend(kept)


def run_pass(model: ModelProto, graph_pass: GraphPass, repeat: bool = False) -> ModelProto:
    """Run ``graph_pass`` over a copy of ``model`` (see the module docstring) and return the copy; the
    outcomes go to ``graph_pass.report.outcomes``. A target node inside a model-local function that
    could not be inlined is reported as left, with the inliner's reason. With ``repeat``, the walk is
    run again while it changes something and leaves something (under onnx < 1.19 shape inference stops
    at a custom op, so ranks behind one are known only once it is replaced)."""
    result, failure = pass_copy(model, graph_pass.targets)
    report = graph_pass.report
    if failure:
        for function in result.functions:
            for node in nodes_within(function.node):
                if graph_pass.targets(node):
                    report.outcomes.append(graph_pass.outcome(node, f"function {function.name}", None, failure))
    names, freed = NameScope(all_names(result)), set()
    while True:
        driver = _Driver(graph_pass, default_opset(result), names)
        driver.graph(result.graph, inferred(typing_copy(result)).graph, {}, {}, "main graph", True)
        freed |= driver.freed
        done = [o for o in driver.outcomes if getattr(o, report.DONE)]
        report.outcomes.extend(done)
        if not (repeat and done and len(done) < len(driver.outcomes)):
            report.outcomes.extend(o for o in driver.outcomes if not getattr(o, report.DONE))
            break
    drop_freed(result, freed)
    drop_unused_domain(result)
    return result


__all__ = ["GraphPass", "GraphScope", "NotChanged", "Visit", "drop_freed", "drop_unused_domain",
           "inline_functions_holding", "pass_copy", "run_pass"]
