"""The bind step as a node pass: every GatherMultiaxis node gets the run token; constant tables are bound."""


from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, ClassVar, NamedTuple

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper

from ...contract import DOMAIN, OP_TYPE, is_gather_multiaxis
from ..run_ops import (FIXED_RUN_OP_TYPE, NARROWING_AXES_RUN_OP_TYPE, NARROWING_RUN_OP_TYPE, RECORDED_OP_TYPE,
                       RUN_OP_TYPE, BoundTable, axes_attribute, bound_op_type)
from ....graphs.passes import GraphScope, NodePass, Visit
from ....graphs.passes.pass_report import PassReport
from ....graphs.ir.walk import ONNX_DOMAINS, attribute
from .bound_operands import (Deferred, fixed_axes, float16_cast_after, narrowed_output, resolve,
                             unsqueezed_indices, widened_float16)
from .recorded_nodes import aligned_at_run_time, recorded_node


RUN_TOKEN = "gathermultiaxis::run_token"
_session_numbers = itertools.count(1)  # bound tables are keyed "session<n>/<node number>"


@dataclass
class PreparedModel:
    """The in-memory model a session runs and the tables it binds."""

    model: ModelProto
    tokened: bool = False                                   # has the hidden run-token input
    token: str = ""                                         # its name (RUN_TOKEN, or RUN_TOKEN_n if taken)
    tables: dict[str, BoundTable] = field(default_factory=dict)
    string_inputs: list[str] = field(default_factory=list)  # checked for NUL when data crosses the bridge
    shared: dict[str, tuple[np.ndarray, int]] = field(default_factory=dict)  # bound initializers ORT still
    # reads elsewhere: (array, ONNX type), handed to ORT with SessionOptions.add_initializer (one buffer)
    crossings: int = 0  # GatherMultiaxis nodes of the model, each a bridge crossing per call (counted in the
    # graph: a node in a Loop body counts once, both branches of an If count)
    builtin_gathers: int = 0  # GatherMultiaxis nodes that became one standard gather (``builtin_gathers``)


class BindOptions(NamedTuple):
    """Node forms of the bind step, each on by default (``bench runtime`` switches them off one at a time)."""

    fixed_axes: bool = True  # constant axes as an attribute
    absorb_alignment: bool = True  # the indices' alignment Unsqueeze absorbed into bound nodes
    float16_output: bool = True  # float16 outputs instead of widened float32
    group_shared_indices: bool = True  # bound gathers sharing their indices in one call
    recorded_form: bool = True  # run-time-aligned nodes whose record holds as one GatherMultiaxisRecorded node


# ---------------------------------------------------------------- the visit

@dataclass
class BoundNode:
    """What the bind step did to one GatherMultiaxis node: bound or not, the op type it became, or why it was left."""

    node: str
    graph: str
    bound: bool        # its table is bound (GatherMultiaxisBound<Type>)
    op_type: str = ""  # what it became
    reason: str = ""


@dataclass
class BindReport(PassReport):
    """The bind step's report: one BoundNode per GatherMultiaxis node."""

    outcomes: list[BoundNode] = field(default_factory=list)
    DONE: ClassVar[str] = "bound"


class BindDetail(NamedTuple):
    """What the visit made of a node: bound or not, and the op type it became."""

    bound: bool
    op_type: str


@dataclass
class BindPass(NodePass[BindDetail]):
    """The bind step's visit, on the session's own copy (``in_place``), without inference."""

    base_dir: str | None
    bind: bool
    float16_outputs: bool | Callable[[], bool]  # a callable is asked only when a node could narrow
    options: BindOptions = BindOptions()
    report: BindReport = field(default_factory=BindReport)
    prepared: PreparedModel | None = None
    chain: list = field(default_factory=list)          # the nodes passed through to bound operands
    dropped_value_info: set = field(default_factory=set)
    bound_initializers: dict = field(default_factory=dict)
    freed_axes: set = field(default_factory=set)       # axes operands no node reads any more
    recorded_freed: set = field(default_factory=set)   # what recorded nodes' old inputs were (maybe dead now)
    evaluate: Callable[[ModelProto, str | None], list[np.ndarray]] | None = None  # see prepare_model
    prefetched: bool = False
    crosses_bridge: bool = False
    session_number: int = 0
    visited: int = 0
    in_place: ClassVar[bool] = True
    infers_types: ClassVar[bool] = False

    @property
    def narrow_float16(self) -> bool:
        """Whether the op may return float16 and the ``float16_output`` bind form is on."""
        if not self.options.float16_output:
            return False
        return self.float16_outputs() if callable(self.float16_outputs) else self.float16_outputs

    def targets(self, node: onnx.NodeProto) -> bool:
        """Whether the pass visits ``node``."""
        return is_gather_multiaxis(node)

    def begin(self, model: ModelProto, typing_copy: ModelProto | None) -> None:
        """Makes the PreparedModel the visits fill in."""
        if self.report.outcomes:  # the driver could not inline a function holding GatherMultiaxis
            holding = sorted(f.name for f in model.functions if any(is_gather_multiaxis(n) for n in f.node))
            raise ValueError(f"{OP_TYPE} inside model-local functions {holding}: {self.report.outcomes[0].reason}")
        self.prepared = PreparedModel(model)

    def outcome(self, node: onnx.NodeProto, path: str, detail: BindDetail | None, reason: str) -> BoundNode:
        """The report's row for a visited node."""
        if detail is None:
            return BoundNode(node.name, path, False, reason=reason)
        return BoundNode(node.name, path, detail.bound, detail.op_type)

    def evaluate_subgraph(self, nodes: list, initializers: list, outputs: list[str]) -> list[np.ndarray]:
        """``outputs`` computed by ``self.evaluate`` from ``nodes`` (standard ONNX, inputs first) and the
        ``initializers`` they read, as a model of the prepared model's opsets."""
        assert self.prepared is not None and self.evaluate is not None  # called only while binding with evaluate
        model = self.prepared.model
        graph = helper.make_graph(nodes, "bind_constants", [],
                                  [helper.make_empty_tensor_value_info(name) for name in outputs], initializers)
        folded = helper.make_model(graph, opset_imports=[o for o in model.opset_import if o.domain in ONNX_DOMAINS])
        folded.ir_version = model.ir_version
        return self.evaluate(folded, self.base_dir)

    def evaluate_table(self, nodes: list, initializers: list, output: str) -> np.ndarray:
        """``evaluate_subgraph`` for one output."""
        return self.evaluate_subgraph(nodes, initializers, [output])[0]

    def prefetch(self, scope: GraphScope) -> None:
        """Compute every main-graph table in one ORT session (each creation costs ~10 ms) into ``computed``'s
        cache; a batch ORT refuses is left to the visits, table by table."""
        requests = {}

        def note(nodes, initializers, output):
            requests[output] = (nodes, initializers)
            raise Deferred

        for node in scope.own_nodes():
            if not (is_gather_multiaxis(node) and attribute(node, "mode") is not None and len(node.input) > 2
                    and fixed_axes(scope, node.input[2]) is not None):
                continue
            try:
                resolve(scope, node.input[0], self.base_dir, evaluate=note)
            except (Deferred, ValueError):
                pass
        if len(requests) < 2:
            return
        nodes = list({id(node): node for wanted, _ in requests.values() for node in wanted}.values())
        position = {id(node): number for number, node in enumerate(scope.own_nodes())}
        nodes.sort(key=lambda node: position[id(node)])  # the graph's order: inputs first
        initializers = list({tensor.name: tensor for _, tensors in requests.values() for tensor in tensors}.values())
        try:
            arrays = self.evaluate_subgraph(nodes, initializers, list(requests))
        except Exception:  # noqa: BLE001 - one chain ORT refuses: each on its own in the visits
            return
        results = scope.cache.setdefault("computed constants", {})
        for (output, (wanted, _)), array in zip(requests.items(), arrays):
            results[output] = (array, wanted)

    def _token(self, scope: GraphScope) -> str:
        """The hidden run-token input, added with the first node (a name no value of the model has)."""
        prepared = self.prepared
        assert prepared is not None  # made by begin(), which the driver calls first
        if not prepared.tokened:
            prepared.tokened = True
            prepared.token = scope.names.fresh(RUN_TOKEN)
            prepared.model.graph.input.append(helper.make_tensor_value_info(prepared.token, TensorProto.INT64, []))
            self.session_number = next(_session_numbers)
        return prepared.token

    def visit(self, node: onnx.NodeProto, scope: GraphScope) -> Visit[BindDetail]:
        """The node changed in place (``Visit.in_place``): the scope's producers and readers (the main graph's,
        and every scope's for the recorded form) are read first, so that they describe the graph before its first
        change."""
        scope.producers  # noqa: B018 - computed (and cached) before any node of the scope changes
        if scope.main or self.options.recorded_form:
            scope.readers  # noqa: B018 - with ``consumers``
        token = self._token(scope)
        number, self.visited = self.visited, self.visited + 1
        mode = attribute(node, "mode")
        axes = fixed_axes(scope, node.input[2]) if len(node.input) > 2 and node.input[2] else None
        bound = None
        if self.bind and scope.main and axes is not None and mode is not None:
            passed: list = []
            reached: dict = {}
            try:
                if self.evaluate is not None and not self.prefetched:
                    self.prefetched = True
                    self.prefetch(scope)
                bound = resolve(scope, node.input[0], self.base_dir, passed, reached,
                                 self.evaluate_table if self.evaluate is not None else None)
            except ValueError:  # a view NumPy refuses (a Reshape to a wrong size): left to the run, which reports it
                bound = None
            if bound is not None:
                self.chain.extend(passed)
                self.bound_initializers.update(reached)
        if axes is not None:  # the axes operand is read by no node now (an attribute, or in the bound table)
            self.freed_axes.add(node.input[2])
        if bound is None:
            self.crosses_bridge = True
            recorded = (recorded_node(node, scope, token, mode) if self.options.recorded_form
                        and (axes is None or aligned_at_run_time(node, scope)) else None)
            if recorded is not None:  # its alignment goes after the identity-based removals (RemoveRecordedAlignments)
                self.recorded_freed |= recorded.freed
                return Visit(None, removes=recorded.tail, in_place=True, detail=BindDetail(False, RECORDED_OP_TYPE))
            found = (float16_cast_after(scope, node.output[0])
                     if scope.main and self.narrow_float16 and widened_float16(scope, node.input[0]) else None)
            if axes is None or not self.options.fixed_axes:
                removes: list[onnx.NodeProto] = []
                node.op_type = RUN_OP_TYPE
                if found is not None and len(node.input) == 3:  # float16 data, widened: back to float16 in the op
                    node.op_type = NARROWING_AXES_RUN_OP_TYPE
                    outputs, removes = narrowed_output(found, node.output[0], self.dropped_value_info)
                    node.output[0] = outputs[0]
                node.input.append(token)
                return Visit(None, removes=removes, in_place=True, detail=BindDetail(False, node.op_type))
            # constant axes travel as an attribute: one input less to copy per call
            op_type, outputs, removes = FIXED_RUN_OP_TYPE, list(node.output), []
            if found is not None:  # float16 data, widened to cross the bridge: back to float16 in the op
                op_type = NARROWING_RUN_OP_TYPE
                outputs, removes = narrowed_output(found, node.output[0], self.dropped_value_info)
            replacement = helper.make_node(op_type, [node.input[0], node.input[1], token], outputs, name=node.name,
                                           domain=DOMAIN, axes=axes_attribute(axes),
                                           **({} if mode is None else {"mode": mode}))
            node.CopyFrom(replacement)
            return Visit(None, removes=removes, in_place=True, detail=BindDetail(False, op_type))
        array, widen = bound
        indices_axes: tuple[int, ...]
        indices, indices_axes = node.input[1], ()
        unsqueezed = unsqueezed_indices(scope, indices) if self.options.absorb_alignment else None
        if unsqueezed is not None:  # the alignment Unsqueeze of the indices: a free view in the kernel
            indices, indices_axes = unsqueezed
            self.chain.append(scope.producers[node.input[1]])
        outputs, removes = list(node.output), []
        found = float16_cast_after(scope, outputs[0]) if widen == "float16" and self.narrow_float16 else None
        if found is not None:  # the gathered rows stay float16: no widening, no Cast back
            widen = None
            outputs, removes = narrowed_output(found, node.output[0], self.dropped_value_info)
        assert axes is not None and self.prepared is not None  # bound: constant axes; prepared by begin()
        table = BoundTable(array, widen, axes, mode, indices_axes)
        key = f"session{self.session_number}/{number}"
        self.prepared.tables[key] = table
        output_type = (TensorProto.STRING if array.dtype == object
                       else helper.np_dtype_to_tensor_dtype(table.output_dtype()))
        op_type = bound_op_type(output_type)
        replacement = helper.make_node(op_type, [indices, token], outputs, name=node.name, domain=DOMAIN, table=key)
        node.CopyFrom(replacement)
        return Visit(None, removes=removes, in_place=True, detail=BindDetail(True, op_type))
