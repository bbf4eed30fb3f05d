"""The pass driver. What every pass (the rewrite, the lowering, the session's bind step) starts from is
its own copy of the model, with the model-local functions that hold one of its target nodes inlined, so
that every such node sits in a graph, where the pass can see its types and replace it (``pass_copy``).

``run_pass`` is the rest of the job for a pass written as a ``GraphPass``: which nodes it targets and a
visit function (a node and its ``GraphScope`` in; a ``Visit``, the replacement nodes, or ``NotChanged``
with the reason out), and the type of its report. The driver infers the types of the pass's typing copy
once (``graphs.inference``), walks every graph scope (the main graph, If / Loop / Scan bodies at any
depth) beside its twin in that inference (``InferredGraph``), gives each visit the types, one constant
view (``ConstantView``), the producers and readers of its scope, builds replacements in the graph's own
node field and sorts them into place (nodes are moved, never copied: a graph may hold Constant nodes of
gigabytes), removes what the replacements made dead once at the end, drops the custom domain's opset
import when nothing uses it any more, and appends one outcome per target node to the pass's report.

A pass may also say how a scope's types are gathered (``scope_infos``: the rewrite adds its further
inference layers) and look at every node in order before its visit (``observe``: the rewrite's rank
rules, which type what later nodes read). The session's bind step (``graphs.bind.BindPass``) runs on
the session's own copy (``copies`` False), infers nothing (``infers_types`` False) and changes each node
in place (``Visit.in_place``): the session's start-up pays for no copy, inference or splice."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterator, Protocol, Sequence

import onnx
import onnx.defs
import onnx.inliner
from onnx import GraphProto, ModelProto, NodeProto

from ..ops.contract import DOMAIN
from .ir.builder import NameScope
from .inference import TensorInfo, graph_infos, induced_names, inferred, typing_copy
from .report import PassReport
from .ir.constant_view import ConstantView
from .ir.dead_nodes import remove_dead
from .ir.walk import all_names, default_opset, holds_subgraph, node_holders, nodes_within, subgraphs

_log = logging.getLogger(__name__)  # silent unless the application configures logging (see the package root)


def pass_copy(model: ModelProto, is_target: Callable[[NodeProto], bool]) -> tuple[ModelProto, str]:
    """A copy of ``model`` for a pass, with the functions holding a target node inlined (the IR version
    kept: the inliner may write its own); and "" or, when onnx's inliner fails, the reason (the copy then
    comes back not inlined, and the pass reports the target nodes left in functions).

    Args:
        model: the model; it is not changed.
        is_target: whether a node is one the pass changes.

    Returns:
        The copy, and the inliner's failure ("" when none).
    """
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
    inliner fails, the reason (the model then comes back not inlined). Shared by rewrite and lower.

    Args:
        model: the model (attribute defaults are written into its function calls).
        is_target: whether a node is one the pass changes.

    Returns:
        The model (inlined, or ``model`` itself when nothing is to inline or inlining fails), and the
        inliner's failure ("" when none).
    """
    holding = _functions_holding(model, is_target)
    if not holding:
        return model, ""
    _apply_attribute_defaults(model)
    # onnx's inliner refuses the whole model when any function imports a domain at another version than the
    # model; ORT runs a function's ONNX ops at the model's opset whatever the function imports, so that is the
    # version to inline at. A function importing another domain at another version is set aside meanwhile.
    set_aside = functions_at_model_opset(model)
    blocked = sorted(key for key in holding if key in set_aside)
    if set_aside:
        kept = [f for f in model.functions if (f.domain, f.name) not in set_aside]
        aside = [f for f in model.functions if (f.domain, f.name) in set_aside]
        del model.functions[:]
        model.functions.extend(kept)
    try:
        result = onnx.inliner.inline_selected_functions(model, sorted(holding - set_aside.keys()))
    except Exception as error:  # noqa: BLE001
        result, failure = model, f"the function could not be inlined: {error}"
    else:
        failure = "; ".join(f"the function {name} could not be inlined: {set_aside[domain, name]}"
                            for domain, name in blocked)
    if set_aside:
        result.functions.extend(aside)
    return result, failure


def functions_at_model_opset(model: ModelProto) -> dict[tuple[str, str], str]:
    """Bring every model-local function's opset imports to the model's versions, as ORT reads function
    bodies: the ONNX domain always (ORT resolves a function's ONNX ops at the model's opset); another
    domain only when none of the function's ops of that domain changed between the two versions. A domain
    the model does not import is added to the model's imports.

    Args:
        model: the model, changed in place.

    Returns:
        (domain, name) to the reason, for each function left at another version than the model's.
    """
    imports = {_domain_key(o.domain): o.version for o in model.opset_import}
    set_aside: dict[tuple[str, str], str] = {}
    for function in model.functions:
        for opset in function.opset_import:
            domain = _domain_key(opset.domain)
            want = imports.get(domain)
            if want is None:
                model.opset_import.add(domain=opset.domain, version=opset.version)
                imports[domain] = opset.version
            elif want != opset.version:
                changed = "" if domain == "" else _changed_op(function, domain, opset.version, want)
                if changed:
                    set_aside[function.domain, function.name] = (
                        f"it imports {domain} version {opset.version}, the model {want}, and {changed}")
                else:
                    opset.version = want
    return set_aside


def _domain_key(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _changed_op(function: onnx.FunctionProto, domain: str, have: int, want: int) -> str:
    """"" when every op of ``domain`` in ``function`` has the same schema at versions ``have`` and ``want``,
    else which one differs."""
    for node in nodes_within(function.node):
        if _domain_key(node.domain) != domain:
            continue
        try:
            versions = {onnx.defs.get_schema(node.op_type, version, domain).since_version for version in (have, want)}
        except onnx.defs.SchemaError:
            return f"{node.op_type} has no schema at one of them"
        if len(versions) > 1:
            return f"{node.op_type} differs between them"
    return ""


class NotChanged(Exception):
    """The visited node is kept as it is; the message says why."""


@dataclass
class InferredGraph:
    """What ONNX's inference of the typing copy says of one graph: the type of each name, and the inferred
    copy of each node holding subgraphs (by position), for their own walk. Kept instead of the inferred
    model, which is as large as the model."""

    infos: dict[str, TensorInfo]
    holders: dict[int, NodeProto]
    typed: bool = True  # False: no inference (a pass without ``infers_types``); subgraphs are walked as they are
    induced: set[str] = field(default_factory=set)  # names ranked only by the Loop induction (inference.induced_names)

    @classmethod
    def untyped(cls) -> "InferredGraph":
        """The stand-in for a pass without inference: no types, no inferred holders.

        Returns:
            An InferredGraph with ``typed`` False.
        """
        return cls({}, {}, False)

    @classmethod
    def of(cls, inferred_graph: GraphProto, main: bool) -> "InferredGraph":
        """What inference says of one graph of the inferred typing copy.

        Args:
            inferred_graph: the graph, from the inferred model.
            main: whether it is the main graph.

        Returns:
            The InferredGraph (types, copies of the subgraph holders, the induced names).
        """
        holders = {}
        for position, node in enumerate(inferred_graph.node):
            if holds_subgraph(node):
                holders[position] = NodeProto()
                holders[position].CopyFrom(node)
        return cls(graph_infos(inferred_graph, main), holders, induced=induced_names(inferred_graph))

    def sub(self, position: int, node: NodeProto) -> Iterator[tuple[str, GraphProto, "InferredGraph"]]:
        """(attribute name, subgraph, its twin) for each subgraph of ``node``, the node at ``position``.

        Args:
            position: the node's position in its graph.
            node: the node holding subgraphs, of the original graph.

        Returns:
            An iterator of (attribute name, subgraph, InferredGraph of it).
        """
        if not self.typed:
            for attribute in node.attribute:
                for graph in subgraphs(attribute):
                    yield attribute.name, graph, self
            return
        twin = self.holders.get(position)
        for attribute, twin_attribute in zip(node.attribute, twin.attribute if twin is not None else ()):
            for graph, twin_graph in zip(subgraphs(attribute), subgraphs(twin_attribute)):
                yield attribute.name, graph, InferredGraph.of(twin_graph, False)


@dataclass
class GraphScope:
    """One graph as a visit sees it. ``infos`` holds the enclosing scopes' names too; ``original`` is
    how many of ``graph.node`` are the graph's own (replacements are appended after them until the
    splice). Producers and readers are of those nodes, computed on first use: ``readers`` counts, per
    name, the nodes that read it (directly or in a subgraph, once a node) plus one for a graph output."""

    graph: GraphProto
    path: str
    opset: int
    names: NameScope
    infos: dict[str, TensorInfo]
    constants: ConstantView
    original: int
    main: bool
    outcomes: list = field(default_factory=list)  # the report's rows, in walk order (``observe`` may add)
    cache: dict = field(default_factory=dict)     # a pass's own per-graph memo

    UNKNOWN = TensorInfo(0, None)

    def info(self, name: str) -> TensorInfo:
        """What the scope knows of ``name``.

        Args:
            name: a value's name.

        Returns:
            Its TensorInfo, or ``UNKNOWN`` (element type 0, no shape).
        """
        return self.infos.get(name, self.UNKNOWN)

    def own_nodes(self) -> Iterator[NodeProto]:
        """The graph's own nodes (the first ``original``; not the replacements appended after them).

        Returns:
            An iterator over them, in graph order.
        """
        return itertools.islice(self.graph.node, self.original)

    @cached_property
    def producers(self) -> dict[str, NodeProto]:
        """The graph's own node that writes each name."""
        return {output: node for node in self.own_nodes() for output in node.output if output}

    @cached_property
    def consumers(self) -> dict[str, list[NodeProto]]:
        """The nodes that take a name as a direct input."""
        return self._direct_reads[0]

    @cached_property
    def _direct_reads(self) -> tuple[dict[str, list[NodeProto]], list[NodeProto]]:
        """``consumers``, and the nodes holding subgraphs (one walk for both: the session's start-up)."""
        consumers: dict[str, list[NodeProto]] = {}
        holders = []
        for node in self.own_nodes():
            inputs = node.input
            for name in (dict.fromkeys(inputs) if len(inputs) > 1 else inputs):
                if name in consumers:
                    consumers[name].append(node)
                else:
                    consumers[name] = [node]
            if node.attribute and holds_subgraph(node):
                holders.append(node)
        return consumers, holders

    @cached_property
    def readers(self) -> dict[str, int]:
        """Per name, how many nodes read it (see the class docstring)."""
        consumers, holders = self._direct_reads
        readers = {name: len(nodes) for name, nodes in consumers.items()}
        for node in holders:  # a name its subgraphs read and it does not read itself: one more reader
            direct = set(node.input)
            for name in {n for a in node.attribute for sub in subgraphs(a) for inner in nodes_within(sub.node)
                         for n in inner.input}:
                if name not in direct:
                    readers[name] = readers.get(name, 0) + 1
        for value in self.graph.output:
            readers[value.name] = readers.get(value.name, 0) + 1
        return readers


@dataclass
class Visit:
    """A visit's change of one node: the nodes that replace it (in its place; None when the visit built
    them at the end of ``scope.graph.node`` itself), the other nodes of its graph that the replacement
    supersedes (removed), the names whose producers may be dead now (removed at the end when nothing
    reads them, and what only they read), and what the report says of it. ``in_place``: the visit
    changed the node itself, which stays where it is (``nodes`` is then ignored: the session's bind step,
    whose replacements are one small node each, and which must not slow the session's start-up with a
    splice; a visit that does this reads the scope's producers and readers before its first change)."""

    nodes: Sequence[NodeProto] | None
    removes: list[NodeProto] = field(default_factory=list)
    freed: set[str] = field(default_factory=set)
    detail: dict = field(default_factory=dict)
    in_place: bool = False


class GraphPass(Protocol):
    """What ``run_pass`` needs of a pass: its report, which nodes it visits, the visit, and the report's row."""

    @property
    def report(self) -> PassReport:  # read-only here, so that a pass's report may be a PassReport subclass
        """The report the pass's outcomes go to."""

    def targets(self, node: NodeProto) -> bool:
        """Whether the pass visits ``node``.

        Args:
            node: a node of any graph.

        Returns:
            True for a node to visit.
        """

    def visit(self, node: NodeProto, scope: GraphScope) -> Visit:
        """The pass's change of a target node.

        Args:
            node: a node ``targets`` accepts.
            scope: its graph's scope.

        Returns:
            The Visit.

        Raises:
            NotChanged: the node is kept as it is (the message is the reason).
        """

    def outcome(self, node: NodeProto, path: str, visit: Visit | None, reason: str):
        """The report's row for a target node.

        Args:
            node: the node.
            path: the path of its graph in the model.
            visit: the visit's change, or None when the node was left.
            reason: why it was left (used when ``visit`` is None).

        Returns:
            The report's outcome object (the pass's own type).
        """


@dataclass
class _Driver:
    graph_pass: GraphPass
    opset: int
    names: NameScope
    outcomes: list = field(default_factory=list)
    freed: set[str] = field(default_factory=set)

    def graph(self, graph: GraphProto, twin: InferredGraph, outer_infos: dict, outer_constants: ConstantView | None,
              path: str, main: bool) -> None:
        scope_infos = getattr(self.graph_pass, "scope_infos", None)
        infos = scope_infos(graph, twin, outer_infos, main) if scope_infos else {**outer_infos, **twin.infos}
        constants = ConstantView(graph, outer_constants, getattr(self.graph_pass, "external_data_folder", None))
        original = len(graph.node)
        scope = GraphScope(graph, path, self.opset, self.names, infos, constants, original, main, self.outcomes)
        observe, targets = getattr(self.graph_pass, "observe", None), self.graph_pass.targets
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
                visit = self.graph_pass.visit(node, scope)
            except NotChanged as reason:
                del graph.node[start:]  # what the visit built before it gave up
                self.outcomes.append(self.graph_pass.outcome(node, path, None, str(reason)))
                continue
            if visit.in_place:
                del graph.node[start:]  # (nothing to splice: the node itself is its replacement)
            else:
                if visit.nodes is not None:
                    graph.node.extend(visit.nodes)  # copied into the graph's own field (one protobuf arena)
                counts[position] = len(graph.node) - start
            removed.update(id(other) for other in visit.removes)
            self.freed |= visit.freed
            self.outcomes.append(self.graph_pass.outcome(node, path, visit, ""))
        splice(graph, original, counts, removed)


def splice(graph: GraphProto, original: int, counts: dict[int, int], removed: AbstractSet[int] = frozenset()) -> None:
    """Put each replacement where its node was: the graph's first ``original`` nodes are its own, the
    rest their replacements, in position order, ``counts[position]`` nodes replacing the node at
    ``position``; the nodes whose ids are in ``removed`` go. Nodes are moved by an in-place sort, not
    copied: a graph may hold Constant nodes of gigabytes.

    Args:
        graph: the graph, changed in place.
        original: how many of its first nodes are its own.
        counts: position of a replaced node to the number of its replacement nodes.
        removed: the ``id()`` of the own nodes to remove.
    """
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


def drop_freed(model: ModelProto, names: set[str]) -> None:
    """Remove what produces ``names`` when nothing reads it any more, and then what only that read, graph
    by graph until nothing changes (a subgraph may hold the last reader of an outer name). Graph inputs
    and outputs stay; initializers go only where a removed node was their last reader.

    Args:
        model: the model, changed in place.
        names: the names whose producers may now be unused.
    """
    changed = bool(names)  # nothing freed: no graph to scan (the session's bind step frees nothing here)
    while changed:
        changed = False
        # holders found afresh after each change: drop_unused rebuilds a node list, which detaches the
        # subgraphs found before
        for graph in (holder for holder in node_holders(model) if isinstance(holder, GraphProto)):
            candidates = [node for node in graph.node if any(name in names for name in node.output)]
            freed = remove_dead(graph, candidates, names, cascade=True, initializers="freed")
            if freed:
                changed, names = True, names | freed
                break


def drop_unused_domain(model: ModelProto, domain: str = DOMAIN) -> None:
    """Drop the opset import of ``domain`` when no node or function uses it any more.

    Args:
        model: the model, changed in place.
        domain: the opset domain (by default the GatherMultiaxis domain).
    """
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
    at a custom op, so ranks behind one are known only once it is replaced). A pass may have ``begin(model,
    light)``, called with the copy and its typing copy before the walk (the typing copy is dropped
    after it); ``prepare(model)``, called with the copy first (the WebNN target fixes its input shapes
    there); ``copy_targets`` (the nodes functions are inlined for, if not its targets);
    ``keeps_types`` (the report then keeps the main graph's layer-1 types); ``drops_domain`` (the
    custom domain's import goes when nothing uses it any more); ``copies`` False (the pass works on
    ``model`` itself, its functions inlined, and the result may be ``model``: the session's bind step,
    whose caller made the copy); ``infers_types`` False (no typing copy, no inference: every type is
    unknown unless ``scope_infos`` says it, ``begin`` gets None for the typing copy; the bind step, which
    must not slow the session's start-up).

    Args:
        model: the model (changed only by a pass with ``copies`` False).
        graph_pass: the pass (see GraphPass and the optional members above).
        repeat: run the walk again while it changes something and leaves something.

    Returns:
        The changed copy (or ``model`` itself, for a pass with ``copies`` False).
    """
    copy_targets = getattr(graph_pass, "copy_targets", graph_pass.targets)
    first_outcome = len(graph_pass.report.outcomes)
    if getattr(graph_pass, "copies", True):
        result, failure = pass_copy(model, copy_targets)
    else:
        ir_version = model.ir_version
        result, failure = inline_functions_holding(model, copy_targets)
        result.ir_version = ir_version
    infers_types = getattr(graph_pass, "infers_types", True)
    report = graph_pass.report
    prepare = getattr(graph_pass, "prepare", None)
    if prepare is not None:
        prepare(result)
    if failure:
        for function in result.functions:
            for node in nodes_within(function.node):
                if copy_targets(node):
                    report.outcomes.append(graph_pass.outcome(node, f"function {function.name}", None, failure))
    names, freed = NameScope(all_names(result)), set()
    while True:
        light = typing_copy(result) if infers_types else None
        main = InferredGraph.of(inferred(light).graph, True) if light is not None else InferredGraph.untyped()
        begin = getattr(graph_pass, "begin", None)
        if begin is not None:
            begin(result, light)
        del light
        driver = _Driver(graph_pass, default_opset(result), names)
        driver.graph(result.graph, main, {}, None, "main graph", True)
        if getattr(graph_pass, "keeps_types", False):
            report.main_graph_types = main.infos
        freed |= driver.freed
        if not repeat:
            report.outcomes.extend(driver.outcomes)
            break
        done = [o for o in driver.outcomes if getattr(o, report.DONE)]
        report.outcomes.extend(done)
        if not (done and len(done) < len(driver.outcomes)):
            report.outcomes.extend(o for o in driver.outcomes if not getattr(o, report.DONE))
            break
    drop_freed(result, freed)
    if getattr(graph_pass, "drops_domain", False):
        drop_unused_domain(result)
    _log_outcomes(type(graph_pass).__name__, report, report.outcomes[first_outcome:])
    return result


def _log_outcomes(pass_name: str, report: PassReport, outcomes: list) -> None:
    """What a pass did, for ``logging``: the counts at INFO, one line per node at DEBUG (``-v``, ``-vv``)."""
    if not _log.isEnabledFor(logging.INFO):
        return
    done = sum(bool(getattr(o, report.DONE)) for o in outcomes)
    _log.info("%s: %d %s, %d left as they were", pass_name, done, report.DONE, len(outcomes) - done)
    for outcome in outcomes:
        _log.debug("%s: %s", pass_name, ", ".join(f"{key}={value!r}" for key, value in vars(outcome).items()
                                                  if value not in ("", None)))


__all__ = ["ConstantView", "GraphPass", "GraphScope", "InferredGraph", "NotChanged", "Visit", "drop_freed",
           "drop_unused_domain", "functions_at_model_opset", "inline_functions_holding", "pass_copy", "run_pass", "splice"]
