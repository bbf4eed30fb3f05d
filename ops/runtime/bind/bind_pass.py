"""The session's bind step: the in-memory model ``gathermultiaxis.InferenceSession`` runs, made from a
rewritten model (a pass over the graph, like the rewrite and the lowering; the session module only
runs what this returns).

What it changes in the session's in-memory copy of the model (the file stays standard and
self-contained):

* With ``builtin_gathers`` (the session's default), every node that one standard ONNX gather computes
  exactly becomes that gather first (``graphs.lower.lower_single_gathers``: the lowering's single-gather
  forms, bit-identical and raising ORT's own out-of-range errors), run by ORT's builtin kernels with no
  bridge crossing; what follows concerns the nodes left, those only the general decomposition computes.
* Every GatherMultiaxis node gets one more input, a hidden int64 scalar graph input (``RUN_TOKEN``, or
  ``RUN_TOKEN_n`` when the model already has that name), and becomes ``GatherMultiaxisRun``, or
  ``GatherMultiaxisRunFixedAxes`` when its axes are constant (they travel as an attribute). Each run
  feeds a fresh token; the op records an error under it; the run wrapper (``run``,
  ``run_with_ort_values``, ``run_with_iobinding``, ``run_with_ortvaluevector``, ``run_async``'s
  callback) pops that token's error and raises it (``run_async``: passes it as the callback's error
  argument). Neither ``get_inputs()`` nor ORT's missing-input message shows the token.
* A node of the main graph whose data operand is a constant (an initializer that is not a graph input,
  or a Constant node, seen through Unsqueeze with constant axes and through the rewriter's Cast of a
  float16/bfloat16 table to float) and whose axes are constant becomes
  ``GatherMultiaxisBound<Type>(indices, token)``: the table, axes, mode and the indices' alignment
  Unsqueeze (absorbed) are handed to the kernel once (``PreparedModel.tables``, which the session
  holds) instead of being copied through the bridge on every call. float16 tables are gathered and
  returned as float16 (the Cast back is dropped); bfloat16 tables are gathered as they are and only the
  gathered output is widened to float32, which the Cast after the op turns back exactly. A float16
  graph input crossing the bridge (widened by ORT's exact Cast) comes back as float16 from
  ``GatherMultiaxisRunFixedAxesToFloat16`` (``GatherMultiaxisRunToFloat16`` where the axes are computed at
  run time); the Cast back is found after moving ops (``walk.MOVING_OPS``: the rewrite's Squeeze of a
  GatherND or scalar-index Gather output), which then move float16 values. External-data tables are memory-mapped, after
  ``graphs.modelfile.check_external_data`` has checked their entry as ORT would (ORT never sees a bound
  table). A table computed from constants only is bound too: ``VIEW_OPS`` as NumPy views (a mapped table
  stays mapped), a chain holding ``COMPUTED_OPS`` (DequantizeLinear, Cast, Concat) computed once by the
  session's evaluator (ORT itself: bit for bit the run's values). Nodes and initializers that only fed a
  bound operand are dropped from the in-memory model.
* Bound nodes of the main graph that read the same indices (after the absorbed Unsqueeze) become
  ``GatherMultiaxisBoundGroup<Types>`` nodes, one call for up to ``GROUP_MAX`` float32/int64 tables.
* Constant nodes nothing reads and axes initializers no node reads any more are dropped in every graph
  (ORT warns about each unread initializer, and makes one of every Constant).
* Other external data is not read: the model ORT gets keeps its references, and ORT maps them itself
  from the model's folder (``EXTERNAL_DATA_FOLDER``), with its own checks.
* Model-local functions holding GatherMultiaxis are inlined first, so that every node takes the token.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field
from typing import Callable, ClassVar, NamedTuple, cast

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper
from onnx.external_data_helper import uses_external_data

from ...contract import DOMAIN, OP_TYPE, is_gather_multiaxis
from ..run_ops import (FIXED_RUN_OP_TYPE, GROUP_MAX, GROUP_TYPES, NARROWING_AXES_RUN_OP_TYPE, NARROWING_RUN_OP_TYPE,
                       RUN_OP_TYPE, BoundTable, axes_attribute, bound_op_type, group_attributes, group_op_type,
                       is_bridge_node)
from ....graphs.modelfile import ExternalDataError
from ....graphs.passes import GraphScope, Visit, run_pass
from ....graphs.passes.pass_report import PassReport
from ....graphs.ir.dead_nodes import remove_dead
from ....graphs.ir.tensors import read_tensor
from ....graphs.ir.walk import (MOVING_OPS, ONNX_DOMAINS, all_names, any_node, attribute, moves_elements,
                               names_read, node_holders, round_trip_cast, subgraphs)

RUN_TOKEN = "gathermultiaxis::run_token"
_session_numbers = itertools.count(1)  # bound tables are keyed "session<n>/<node number>"
_WIDENED: dict[int, str] = {TensorProto.FLOAT16: "float16", TensorProto.BFLOAT16: "bfloat16"}


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


# ---------------------------------------------------------------- constant operands

def _tensor_array(tensor: TensorProto, base_dir: str | None) -> tuple[np.ndarray, str | None] | None:
    """A tensor's values without an extra copy where possible, and the 16-bit float format of its raw values
    (None: not bound, external data with no folder or of strings)."""
    if uses_external_data(tensor) and (base_dir is None or tensor.data_type == TensorProto.STRING):
        return None
    return (read_tensor(tensor, base_dir, mmap=True, raw_16bit=True, lenient_strings=True),
            _WIDENED.get(tensor.data_type))


class BindOptions(NamedTuple):
    """Node forms of the bind step, each on by default (``bench runtime`` switches them off one at a time)."""

    fixed_axes: bool = True  # constant axes as an attribute
    absorb_alignment: bool = True  # the indices' alignment Unsqueeze absorbed into bound nodes
    float16_output: bool = True  # float16 outputs instead of widened float32
    group_shared_indices: bool = True  # bound gathers sharing their indices in one call


# ---------------------------------------------------------------- resolving through Unsqueeze and Cast
# Within one scope only (its own initializers and nodes: a subgraph's axes held by an enclosing scope stay
# an input), from the driver's producers and constant view of the scope.

def _constant_ints(scope: GraphScope, name: str) -> list[int] | None:
    resolved = _resolve(scope, name, base_dir=None)
    return None if resolved is None else [int(v) for v in np.asarray(resolved[0]).reshape(-1)]


def _unsqueeze_axes(scope: GraphScope, node: onnx.NodeProto) -> list[int] | None:
    """An Unsqueeze's axes when they are constant (its attribute before opset 13, its second input from 13
    on), else None."""
    axes = attribute(node, "axes")
    if axes is None and len(node.input) > 1:
        axes = _constant_ints(scope, node.input[1])
    return axes if isinstance(axes, list) else None  # not a list: an ill-typed attribute


# Nodes a constant data operand is seen through as a view of its table (NumPy, exact, no copy: a memory-mapped
# table stays mapped), and nodes whose result is computed once at bind time by ONNX Runtime itself (bit for bit
# what the unbound model computes at run time, DequantizeLinear's float rounding included).
VIEW_OPS = ("Identity", "Reshape", "Squeeze", "Transpose", "Unsqueeze")
COMPUTED_OPS = ("Cast", "Concat", "DequantizeLinear")


def _resolve(scope: GraphScope, name: str, base_dir: str | None, chain: list | None = None,
             bound_initializers: dict | None = None, evaluate=None):
    """(array, widen) when ``name`` is a constant seen through ``VIEW_OPS`` and a widening Cast, or (with
    ``evaluate``, ``BindPass.evaluate``) computed from constants by ``COMPUTED_OPS`` and ``VIEW_OPS``, else
    None. Appends the nodes passed through to ``chain``, and the initializer reached as a view (array, ONNX
    type) to ``bound_initializers``. A view that cannot be taken (a Reshape to a wrong size, say) raises:
    the caller leaves the node to the run, which reports it as ORT does."""
    initializer = scope.constants.initializer(name)
    if initializer is not None:
        found = _tensor_array(initializer, base_dir)
        if found is not None and bound_initializers is not None:
            bound_initializers[name] = (found[0], initializer.data_type)
        return found
    node = scope.producers.get(name)
    if node is None or node.domain not in ONNX_DOMAINS:
        return None
    found = None
    if node.op_type == "Constant":
        value = attribute(node, "value")
        if not isinstance(value, TensorProto):
            return None
        found = _tensor_array(value, base_dir)
    elif node.op_type in VIEW_OPS:
        passed, reached = list[onnx.NodeProto](), dict[str, tuple]()
        inner = _resolve(scope, node.input[0], base_dir, passed, reached, evaluate)
        view = None if inner is None else _view(scope, node, inner[0])
        if view is not None:
            found = (view, inner[1])
            if chain is not None:
                chain.extend(passed)
            if bound_initializers is not None:
                bound_initializers.update(reached)
    elif node.op_type == "Cast" and attribute(node, "to") == TensorProto.FLOAT:
        passed, reached = [], {}
        inner = _resolve(scope, node.input[0], base_dir, passed, reached, evaluate)
        if inner is not None and (inner[1] is not None or inner[0].dtype == np.float16):
            # the widening of a 16-bit float table is folded into the kernel (raw values, widened exactly)
            found = (inner[0], inner[1] or "float16")
            if chain is not None:
                chain.extend(passed)
            if bound_initializers is not None:
                bound_initializers.update(reached)
    if found is None:  # computed, or a view whose operands are (a Reshape to a shape a Concat makes, say)
        if node.op_type not in COMPUTED_OPS + VIEW_OPS or evaluate is None:
            return None
        found = _computed(scope, node, base_dir, chain, evaluate)
        return found  # its nodes are in ``chain`` already
    if chain is not None:
        chain.append(node)
    return found


def _view(scope: GraphScope, node: onnx.NodeProto, array: np.ndarray) -> np.ndarray | None:
    """``node`` (one of ``VIEW_OPS``) applied to ``array`` as a NumPy view, or None when its operands are not
    constant."""
    op_type = node.op_type
    if op_type == "Identity":
        return array
    if op_type == "Unsqueeze":
        axes = _unsqueeze_axes(scope, node)
        return None if axes is None else np.expand_dims(array, tuple(axes))
    if op_type == "Squeeze":
        axes = attribute(node, "axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = _constant_ints(scope, node.input[1])
            if axes is None:
                return None
        return np.squeeze(array, axis=None if axes is None else tuple(axes))
    if op_type == "Transpose":
        return np.transpose(array, attribute(node, "perm"))
    shape = _constant_ints(scope, node.input[1]) if len(node.input) > 1 else attribute(node, "shape")  # Reshape
    if shape is None:
        return None
    if not attribute(node, "allowzero", 0):  # 0 copies the input's dimension
        shape = [array.shape[axis] if size == 0 else size for axis, size in enumerate(shape)]
    return array.reshape(shape)


def _constant_subgraph(scope: GraphScope, node: onnx.NodeProto) -> tuple[list, list[str]] | None:
    """The nodes computing ``node``'s output from constants only (``COMPUTED_OPS``, ``VIEW_OPS``, Constant
    nodes), inputs first, and the initializers they read; None when anything else feeds it."""
    nodes, leaves, seen = [], [], set()

    def collect(name: str) -> bool:
        if not name or name in seen:
            return True
        seen.add(name)
        if scope.constants.initializer(name) is not None:
            leaves.append(name)
            return True
        producer = scope.producers.get(name)
        if producer is None or producer.domain not in ONNX_DOMAINS or (
                producer.op_type not in (*COMPUTED_OPS, *VIEW_OPS, "Constant")):
            return False
        if not all(collect(value) for value in producer.input):
            return False
        nodes.append(producer)
        return True

    return (nodes, leaves) if collect(node.output[0]) else None


class Deferred(Exception):
    """Raised by ``BindPass.prefetch``'s evaluator once it has noted what a gather's table is computed from."""


def _computed(scope: GraphScope, node: onnx.NodeProto, base_dir: str | None, chain: list | None, evaluate):
    """(array, None) computed once by ``evaluate`` from the constants ``node`` is computed from, or None.
    Several gathers of one computed table share one array."""
    results = scope.cache.setdefault("computed constants", {})
    name = node.output[0]
    if name not in results:
        results[name] = None
        collected = _constant_subgraph(scope, node)
        if collected is not None:
            nodes, leaves = collected
            # cast: the leaves are initializers (_constant_subgraph), so none is None
            tensors = cast(list[TensorProto], [scope.constants.initializer(leaf) for leaf in leaves])
            if base_dir is not None or not any(uses_external_data(tensor) for tensor in tensors):
                try:
                    results[name] = (evaluate(nodes, tensors, name), nodes)
                except Deferred:  # BindPass.prefetch collects it, to compute every table in one ORT session
                    del results[name]
                    raise
                except Exception:  # noqa: BLE001 - ORT refuses the chain: the run reports it, as it would unbound
                    results[name] = None
    if results[name] is None:
        return None
    array, nodes = results[name]
    if chain is not None:
        chain.extend(nodes)
    return array, None


def _fixed_axes(scope: GraphScope, name: str) -> tuple[int, ...] | None:
    """The constant axes ``name`` holds in the scope (seen by the graph itself), or None."""
    try:
        resolved = _resolve(scope, name, base_dir=None)
    except Exception:  # noqa: BLE001 - an unreadable constant: leave the axes to the run, which reports it
        return None
    if resolved is None:
        return None
    values = np.asarray(resolved[0])
    if values.dtype != np.int64 or values.ndim != 1:  # not the op's 1-D int64: stays an input, which ORT refuses
        return None
    return tuple(int(v) for v in values)


def _only_reader(scope: GraphScope, name: str) -> onnx.NodeProto | None:
    """The node of the scope that reads ``name`` once, directly, when nothing else reads it (no other node,
    no subgraph, no graph output), else None."""
    if scope.readers.get(name) != 1:
        return None
    readers = scope.consumers.get(name, [])
    if len(readers) != 1:  # read in a subgraph or as a graph output only
        return None
    reader = readers[0]
    if list(reader.input).count(name) != 1 or any(
            name in names_read(sub) for proto in reader.attribute for sub in subgraphs(proto)):
        return None
    return reader


def _unsqueezed(scope: GraphScope, name: str) -> tuple[str, tuple[int, ...]] | None:
    """(input, axes) when ``name`` is the output of an Unsqueeze with constant axes that nothing else reads
    (the rewriter's alignment of the indices), else None."""
    node = scope.producers.get(name)
    if (node is None or node.op_type != "Unsqueeze" or node.domain not in ONNX_DOMAINS
            or _only_reader(scope, name) is None):
        return None
    axes = _unsqueeze_axes(scope, node)
    return None if axes is None else (node.input[0], tuple(axes))


def _float16_cast_after(scope: GraphScope, name: str) -> tuple[onnx.NodeProto, list[onnx.NodeProto]] | None:
    """The Cast to float16 after ``name`` (the rewriter's way back from float32) and the moving ops before it
    (``MOVING_OPS``: the rewrite's Squeeze or Reshape of the output), each the only reader of the value
    before it."""
    moving: list[onnx.NodeProto] = []
    reader = _only_reader(scope, name)
    while moves_elements(reader, TensorProto.FLOAT16) and reader.input[0] == name and len(moving) < len(MOVING_OPS):
        moving.append(reader)
        name = reader.output[0]
        reader = _only_reader(scope, name)
    return (reader, moving) if round_trip_cast(reader, TensorProto.FLOAT16) else None


def _narrowed_output(found: tuple[onnx.NodeProto, list[onnx.NodeProto]], output: str,
                     dropped_value_info: set[str]) -> tuple[list[str], list[onnx.NodeProto]]:
    """A float16 node writing ``output`` then: the node's outputs and the nodes that go. The Cast back goes; the
    moving ops after the node move float16 values, the last writing the Cast's output (their float32 types
    declared in value_info go)."""
    cast, moving = found
    dropped_value_info.add(output)
    if not moving:
        return [cast.output[0]], [cast]
    for node in moving:
        dropped_value_info.add(node.output[0])
    moving[-1].output[0] = cast.output[0]
    return [output], [cast]


def _declared_types(scope: GraphScope) -> dict[str, int]:
    """The element types the scope's graph declares (inputs, value_info, outputs, initializers), read on
    first need: the bind step infers none (the session's start-up)."""
    types = scope.cache.get("declared types")
    if types is None:
        graph = scope.graph
        types = {value.name: value.type.tensor_type.elem_type for values in (graph.input, graph.value_info, graph.output)
                 for value in values if value.type.HasField("tensor_type")}
        types.update((tensor.name, tensor.data_type) for tensor in graph.initializer)
        scope.cache["declared types"] = types
    return types


def _widened_float16(scope: GraphScope, name: str) -> bool:
    """Whether ``name`` is a Cast to float of a float16 value, or moving ops (``MOVING_OPS``: the rewrite's
    alignment) of one (exact: every value it holds is a float16 one)."""
    cast = scope.producers.get(name)
    for _ in MOVING_OPS:
        if not moves_elements(cast, TensorProto.FLOAT16):
            break
        cast = scope.producers.get(cast.input[0])
    return round_trip_cast(cast) and _float16_value(scope, cast.input[0])


# Contrib ops whose output holds input 0's elements, of its type (ORT's contrib_defs): the lowering's rank rules
# type them so, and the kernel path must narrow what the lowering narrows
_TYPE_KEEPING_CONTRIB_OPS = frozenset({("com.microsoft", "ExpandDims")})


def _float16_value(scope: GraphScope, name: str) -> bool:
    """Whether ``name`` holds float16 values: so declared, or made by a Cast to float16, or by ops that keep
    their input's type (``MOVING_OPS``, Slice: the rewrite's GatherElements Slice) from such a value."""
    for _ in range(len(MOVING_OPS) + 2):
        declared = _declared_types(scope).get(name)
        if declared:
            return declared == TensorProto.FLOAT16
        producer = scope.producers.get(name)
        if producer is not None and (producer.domain, producer.op_type) in _TYPE_KEEPING_CONTRIB_OPS:
            name = producer.input[0]
            continue
        if producer is None or producer.domain not in ONNX_DOMAINS:
            return False
        if producer.op_type == "Cast":
            return attribute(producer, "to") == TensorProto.FLOAT16
        if producer.op_type not in (*MOVING_OPS, "Slice"):
            return False
        name = producer.input[0]
    return False


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


@dataclass
class BindPass:
    """The bind step as a visit over ``graphs.passes.run_pass``: on the session's own copy (no copy here),
    without inference. Every GatherMultiaxis node is changed (the run token); the report says which were
    bound."""

    base_dir: str | None
    bind: bool
    float16_outputs: bool
    options: BindOptions = BindOptions()
    report: BindReport = field(default_factory=BindReport)
    prepared: PreparedModel | None = None
    chain: list = field(default_factory=list)          # the nodes passed through to bound operands
    dropped_value_info: set = field(default_factory=set)
    bound_initializers: dict = field(default_factory=dict)
    freed_axes: set = field(default_factory=set)       # axes operands no node reads any more
    evaluate: Callable[[ModelProto, str | None], list[np.ndarray]] | None = None  # see prepare_model
    prefetched: bool = False
    crosses_bridge: bool = False
    session_number: int = 0
    visited: int = 0
    copies: ClassVar[bool] = False
    infers_types: ClassVar[bool] = False

    @property
    def narrow_float16(self) -> bool:
        """Whether the op may return float16 and the ``float16_output`` bind form is on."""
        return self.float16_outputs and self.options.float16_output

    def targets(self, node: onnx.NodeProto) -> bool:
        """Whether the pass visits ``node``.

        Args:
            node: a node of any graph.

        Returns:
            True for a GatherMultiaxis node.
        """
        return is_gather_multiaxis(node)

    def begin(self, model: ModelProto, light: None) -> None:
        """Makes the PreparedModel the visits fill in.

        Args:
            model: the session's copy (the pass works on it in place).
            light: always None (the pass infers no types).

        Raises:
            ValueError: a model-local function holding GatherMultiaxis could not be inlined.
        """
        if self.report.outcomes:  # the driver could not inline a function holding GatherMultiaxis
            holding = sorted(f.name for f in model.functions if any(is_gather_multiaxis(n) for n in f.node))
            raise ValueError(f"{OP_TYPE} inside model-local functions {holding}: {self.report.outcomes[0].reason}")
        self.prepared = PreparedModel(model)

    def outcome(self, node: onnx.NodeProto, path: str, visit: Visit | None, reason: str) -> BoundNode:
        """The report's row for a visited node.

        Args:
            node: the GatherMultiaxis node.
            path: the path of its graph in the model.
            visit: the visit's change, or None when the node was left.
            reason: why it was left (used when ``visit`` is None).

        Returns:
            The BoundNode.
        """
        if visit is None:
            return BoundNode(node.name, path, False, reason=reason)
        return BoundNode(node.name, path, visit.detail["bound"], visit.detail["op_type"])

    def evaluate_subgraph(self, nodes: list, initializers: list, outputs: list[str]) -> list[np.ndarray]:
        """``outputs`` computed by ``self.evaluate`` from ``nodes`` (standard ONNX, inputs first) and the
        ``initializers`` they read, as a model of the prepared model's opsets.

        Args:
            nodes: the nodes, in graph order.
            initializers: the TensorProtos they read.
            outputs: the names to compute.

        Returns:
            One array per name of ``outputs``, in order.
        """
        assert self.prepared is not None and self.evaluate is not None  # called only while binding with evaluate
        model = self.prepared.model
        graph = helper.make_graph(nodes, "bind_constants", [],
                                  [helper.make_empty_tensor_value_info(name) for name in outputs], initializers)
        folded = helper.make_model(graph, opset_imports=[o for o in model.opset_import if o.domain in ONNX_DOMAINS])
        folded.ir_version = model.ir_version
        return self.evaluate(folded, self.base_dir)

    def evaluate_table(self, nodes: list, initializers: list, output: str) -> np.ndarray:
        """``evaluate_subgraph`` for one output.

        Args:
            nodes: the nodes, in graph order.
            initializers: the TensorProtos they read.
            output: the name to compute.

        Returns:
            Its array.
        """
        return self.evaluate_subgraph(nodes, initializers, [output])[0]

    def prefetch(self, scope: GraphScope) -> None:
        """Compute the tables of every gather of the main graph that the evaluator computes in one ORT session
        (a session's creation costs ~10 ms), into the cache ``_computed`` reads; a batch ORT refuses is left
        to the visits, which compute each table alone (and leave one ORT refuses to the run).

        Args:
            scope: the main graph's scope (its cache receives the computed tables).
        """
        requests = {}

        def note(nodes, initializers, output):
            requests[output] = (nodes, initializers)
            raise Deferred

        for node in scope.own_nodes():
            if not (is_gather_multiaxis(node) and attribute(node, "mode") is not None and len(node.input) > 2
                    and _fixed_axes(scope, node.input[2]) is not None):
                continue
            try:
                _resolve(scope, node.input[0], self.base_dir, evaluate=note)
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

    def visit(self, node: onnx.NodeProto, scope: GraphScope) -> Visit:
        """The node changed in place (``Visit.in_place``): the scope's producers (and the main graph's
        readers, the only ones read) are read first, so that they describe the graph before its first change.

        Args:
            node: a GatherMultiaxis node.
            scope: its graph's scope.

        Returns:
            The in-place Visit, with ``bound`` and the new ``op_type`` in ``detail``.
        """
        scope.producers  # noqa: B018 - computed (and cached) before any node of the scope changes
        if scope.main:
            scope.readers  # noqa: B018
        token = self._token(scope)
        number, self.visited = self.visited, self.visited + 1
        mode = attribute(node, "mode")
        axes = _fixed_axes(scope, node.input[2]) if len(node.input) > 2 and node.input[2] else None
        bound = None
        if self.bind and scope.main and axes is not None and mode is not None:
            passed: list = []
            reached: dict = {}
            try:
                if self.evaluate is not None and not self.prefetched:
                    self.prefetched = True
                    self.prefetch(scope)
                bound = _resolve(scope, node.input[0], self.base_dir, passed, reached,
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
            found = (_float16_cast_after(scope, node.output[0])
                     if scope.main and self.narrow_float16 and _widened_float16(scope, node.input[0]) else None)
            if axes is None or not self.options.fixed_axes:
                removes: list[onnx.NodeProto] = []
                node.op_type = RUN_OP_TYPE
                if found is not None and len(node.input) == 3:  # float16 data, widened: back to float16 in the op
                    node.op_type = NARROWING_AXES_RUN_OP_TYPE
                    outputs, removes = _narrowed_output(found, node.output[0], self.dropped_value_info)
                    node.output[0] = outputs[0]
                node.input.append(token)
                return Visit(None, removes=removes, in_place=True, detail={"bound": False, "op_type": node.op_type})
            # constant axes travel as an attribute: one input less to copy per call
            op_type, outputs, removes = FIXED_RUN_OP_TYPE, list(node.output), []
            if found is not None:  # float16 data, widened to cross the bridge: back to float16 in the op
                op_type = NARROWING_RUN_OP_TYPE
                outputs, removes = _narrowed_output(found, node.output[0], self.dropped_value_info)
            replacement = helper.make_node(op_type, [node.input[0], node.input[1], token], outputs, name=node.name,
                                           domain=DOMAIN, axes=axes_attribute(axes),
                                           **({} if mode is None else {"mode": mode}))
            node.CopyFrom(replacement)
            return Visit(None, removes=removes, in_place=True, detail={"bound": False, "op_type": op_type})
        array, widen = bound
        indices_axes: tuple[int, ...]
        indices, indices_axes = node.input[1], ()
        unsqueezed = _unsqueezed(scope, indices) if self.options.absorb_alignment else None
        if unsqueezed is not None:  # the alignment Unsqueeze of the indices: a free view in the kernel
            indices, indices_axes = unsqueezed
            self.chain.append(scope.producers[node.input[1]])
        outputs, removes = list(node.output), []
        found = _float16_cast_after(scope, outputs[0]) if widen == "float16" and self.narrow_float16 else None
        if found is not None:  # the gathered rows stay float16: no widening, no Cast back
            widen = None
            outputs, removes = _narrowed_output(found, node.output[0], self.dropped_value_info)
        assert axes is not None and self.prepared is not None  # bound: constant axes; prepared by begin()
        table = BoundTable(array, widen, axes, mode, indices_axes)
        key = f"session{self.session_number}/{number}"
        self.prepared.tables[key] = table
        output_type = (TensorProto.STRING if array.dtype == object
                       else helper.np_dtype_to_tensor_dtype(table.output_dtype()))
        op_type = bound_op_type(output_type)
        replacement = helper.make_node(op_type, [indices, token], outputs, name=node.name, domain=DOMAIN, table=key)
        node.CopyFrom(replacement)
        return Visit(None, removes=removes, in_place=True, detail={"bound": True, "op_type": op_type})


def _holds_gather(model: ModelProto) -> bool:
    return any_node(model, is_gather_multiaxis)


_GROUPED_TYPES = {bound_op_type(elem_type): elem_type for elem_type in GROUP_TYPES}


def _group_shared_indices(graph: onnx.GraphProto) -> None:
    """Bound nodes of ``graph`` that read the same indices become GatherMultiaxisBoundGroup<Types> nodes of up
    to GROUP_MAX outputs, each where the first of its nodes was (the indices and the token are there already,
    and every reader of an output comes after that output's own node)."""
    sharing: dict[tuple[str, ...], list[onnx.NodeProto]] = {}
    for node in graph.node:
        if node.domain == DOMAIN and node.op_type in _GROUPED_TYPES:
            sharing.setdefault(tuple(node.input), []).append(node)
    removed: set[int] = set()  # ids of the nodes merged into their group's first
    for members in sharing.values():
        for start in range(0, len(members) - 1, GROUP_MAX):
            chunk = members[start:start + GROUP_MAX]
            if len(chunk) < 2:
                continue
            types = [_GROUPED_TYPES[node.op_type] for node in chunk]
            order = sorted(range(len(chunk)), key=lambda i: GROUP_TYPES.index(types[i]))  # output slot -> member
            slots = [order.index(i) for i in range(len(chunk))]
            tables = [attribute(node, "table") for node in chunk]
            first = chunk[0]
            group = helper.make_node(group_op_type([types[i] for i in order]), list(first.input),
                                     [chunk[i].output[0] for i in order], name=first.name, domain=DOMAIN,
                                     **group_attributes(tables, slots))
            removed.update(id(node) for node in chunk[1:])
            first.CopyFrom(group)
    if removed:
        kept = [node for node in graph.node if id(node) not in removed]
        del graph.node[:]
        graph.node.extend(kept)


def _drop_unread_constants(model: ModelProto, freed: set[str]) -> None:
    """In every graph: the Constant nodes nothing reads, and the initializers in ``freed`` (axes operands that
    became attributes) nothing reads any more. ORT would warn about each ("Removing initializer"); it
    turns Constant nodes into initializers. Holders are read as the walk goes: dropping rebuilds a node list."""
    for holder in node_holders(model):
        if isinstance(holder, onnx.GraphProto):
            constants = [node for node in holder.node if node.op_type == "Constant" and node.domain in ONNX_DOMAINS]
            remove_dead(holder, constants, freed, initializers="freed")


def _copy_scan_body_outputs(model: ModelProto) -> int:
    """Route each Scan body output that a GatherMultiaxis node writes and that is declared with a rank of at
    least 1 through a one-input Concat (an exact copy); returns how many.

    Why: ORT's Scan hands the body its own output buffers, shaped by the first iteration. A builtin node
    writing one with another shape gets an error status (InvalidArgument); the PyOp bridge asks for its output
    after the Python call and lets ORT's exception leave the kernel, which ends the process (std::terminate,
    onnxruntime-extensions pyop/pyfunc.cc). With the copy the op writes a value ORT allocates, and the Concat
    meets the Scan's check as a builtin does. Identity would not do: ORT's optimizer removes it; a one-input
    Concat is kept at every optimization level. Outputs declared with a static shape get the copy too: a
    declaration the run does not meet ended the process the same way. A scalar cannot be concatenated, so
    outputs of unknown or zero rank are left as they are."""
    taken, copies = None, 0
    for holder in list(node_holders(model)):
        for node in holder.node:
            if node.op_type != "Scan" or node.domain not in ONNX_DOMAINS:
                continue
            body = attribute(node, "body")
            written = {name for inner in body.node if is_bridge_node(inner) for name in inner.output}
            for output in body.output:
                dims = output.type.tensor_type.shape.dim
                if output.name not in written or not output.type.tensor_type.HasField("shape") or not dims:
                    continue
                taken = all_names(model) if taken is None else taken
                copy = next(name for name in (f"{output.name}/scan_copy{n or ''}" for n in itertools.count())
                            if name not in taken)
                taken.add(copy)
                body.node.append(helper.make_node("Concat", [output.name], [copy], name=copy, axis=0))
                output.name = copy
                copies += 1
    return copies


def bridge_crossings(model: ModelProto) -> int:
    """The GatherMultiaxis nodes of ``model`` (every op type of the domain): each crosses the PyOp bridge
    once per call (counted in the graph: a node in a Loop body counts once, both branches of an If count).

    Args:
        model: the prepared model.

    Returns:
        The number of such nodes.
    """
    return sum(is_bridge_node(node) for holder in node_holders(model) for node in holder.node)


def prepare_model(model: ModelProto, base_dir: str | None = None, bind: bool = True, *,
                  float16_outputs: bool, evaluate=None, builtin_gathers: bool = False,
                  options: BindOptions = BindOptions()) -> PreparedModel:
    """Turn ``model`` (changed in place: pass a copy) into what the session runs: see the module docstring.
    ``base_dir``: the folder external data is relative to (None: tables in external data are not bound).
    ``float16_outputs``: whether the op may return float16 (the installed PyOp bridge hands arrays back:
    ``ortop.bridge_info()["handback_supported"]``, which the session asks). ``evaluate(model, base_dir)``:
    the outputs of a small model of standard ONNX as arrays, computed as ONNX Runtime computes them (the
    session's ``evaluate_constants``); None: tables computed from constants are not bound.

    Args:
        model: the model, changed in place.
        base_dir: the folder its external data locations are relative to, or None.
        bind: bind the tables of the main graph's nodes whose axes and mode are fixed (False: every node
            only gets the run token).
        float16_outputs: whether the op may return float16.
        evaluate: ``evaluate(model, base_dir)`` giving a small model's outputs as arrays, or None.
        builtin_gathers: first turn every node that one standard gather computes into that gather
            (``graphs.lower.lower_single_gathers``), so that only the others cross the bridge.
        options: the node forms to use (default: all of them).

    Returns:
        The PreparedModel (holding the model unchanged when it has no GatherMultiaxis node).

    Raises:
        ValueError: GatherMultiaxis inside a model-local function that could not be inlined.
    """
    if not _holds_gather(model):  # nothing to bind: no walk, no names (a plain model's start-up)
        return PreparedModel(model)
    lowered = 0
    if builtin_gathers:
        from ....graphs.lower import lower_single_gathers  # here: a kernel-only session loads no lowering

        try:
            with_builtins, lowering = lower_single_gathers(model, base_dir)
        except ExternalDataError:
            raise  # the model's own fault: the session refuses it as ORT would
        except Exception as error:  # noqa: BLE001 - a speed-up that fails must not stop the session
            warnings.warn(f"gathermultiaxis: every GatherMultiaxis node runs on the kernel: finding the nodes one "
                          f"standard gather computes failed ({type(error).__name__}: {error})", RuntimeWarning,
                          stacklevel=3)
        else:
            model, lowered = with_builtins, lowering.lowered
            if not _holds_gather(model):
                return PreparedModel(model, builtin_gathers=lowered)
    binding = BindPass(base_dir, bind, float16_outputs, options, evaluate=evaluate)
    model = run_pass(model, binding)
    prepared = binding.prepared
    assert prepared is not None  # made by binding.begin(), which run_pass calls
    prepared.builtin_gathers = lowered
    if not prepared.tokened:  # GatherMultiaxis only in functions that nothing calls (inlined away)
        return prepared
    if binding.dropped_value_info:
        kept_info = [value for value in model.graph.value_info if value.name not in binding.dropped_value_info]
        del model.graph.value_info[:]
        model.graph.value_info.extend(kept_info)
    if bind:  # the nodes that fed a bound operand, and the Constants and initializers nothing reads any more
        # (not the driver's drop_freed: this also drops every unread Constant and initializer of the main
        # graph, and only the nodes passed through, not whatever else fed them)
        constants = [node for node in model.graph.node if node.op_type == "Constant" and node.domain == ""]
        remove_dead(model.graph, binding.chain + constants)
        if options.group_shared_indices:
            _group_shared_indices(model.graph)
    _drop_unread_constants(model, binding.freed_axes)
    _copy_scan_body_outputs(model)
    if bind:
        kept = {tensor.name for tensor in model.graph.initializer}
        prepared.shared = {name: value for name, value in binding.bound_initializers.items()
                           if name in kept and value[0].dtype != object}
    prepared.crossings = bridge_crossings(model)
    if binding.crosses_bridge:  # a string fed in may reach a GatherMultiaxisRun node, whose bridge cuts it at a NUL
        prepared.string_inputs = [value.name for value in model.graph.input
                                  if value.type.tensor_type.elem_type == TensorProto.STRING]
    return prepared


__all__ = ["BindOptions", "COMPUTED_OPS", "RUN_TOKEN", "VIEW_OPS", "BindPass", "BindReport", "BoundNode", "PreparedModel",
           "bridge_crossings", "prepare_model"]
