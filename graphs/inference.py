"""What the rewriter and the lowering know of a model's types and ranks: the typing copy (only what ORT
enforces: initializer dims, Constant values, the main graph's input shapes, a Loop's counters) and the
inference layers run on it (ONNX's shape inference with data propagation, then ORT's symbolic shape
inference), read back as ``TensorInfo`` per name. The README's "How ranks are found" says why each
layer is trusted where it is."""

from __future__ import annotations

import contextlib
import io
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, TypeGuard

import onnx
import onnx.shape_inference
from onnx import AttributeProto, GraphProto, ModelProto, TypeProto, helper, numpy_helper

from ..ops.private_api import PrivateAPIError
from .ranks.symbolic_inference import (partial_symbolic_inference, symbolic_shape_infer_module,
                                       symbolic_shape_inference)
from .ranks import element_types
from .ir.builder import NameScope
from .ir.walk import ONNX_DOMAINS, all_names, attribute, constant_value, names_read, node_holders, subgraphs
from .schema import register_schema

_log = logging.getLogger(__name__)

Dim = int | str | None  # a concrete size, a symbolic name, or unknown


@dataclass(frozen=True)
class TensorInfo:
    """What shape inference knows about a tensor: element type (0 if unknown) and shape."""

    elem_type: int
    shape: tuple[Dim, ...] | None  # None: rank unknown

    @property
    def rank(self) -> int | None:
        """The number of dims, or None when the shape is unknown."""
        return None if self.shape is None else len(self.shape)


if TYPE_CHECKING:
    class KnownRankInfo(TensorInfo):
        """For type checkers only: a TensorInfo whose rank is known, what ``known_rank``'s True says."""

        shape: tuple[Dim, ...]

        @property
        def rank(self) -> int: ...


STRIP_ABOVE_BYTES = 1 << 16  # constants larger than this become bare inputs of the typing copy
# A Reshape to one dim of more than this many elements gets a shape of unknown value in the typing copy:
# ONNX's data propagation makes a shape of one dimension per element of a 1-D value of static length
# (about 70 bytes each: 2.7 GiB for the WebNN flat form's Reshape of a 50257x768 table, before a Gather)
FLAT_LENGTH_LIMIT = 1 << 22


def tensor_info(type_proto: TypeProto) -> TensorInfo | None:
    """What a declared type says of a tensor.

    Args:
        type_proto: a value's type (value_info, graph input or output).

    Returns:
        The TensorInfo (shape None when none is declared; a dimension is its size, its symbol, or None),
        or None for a type that is not a tensor.
    """
    if not type_proto.HasField("tensor_type"):
        return None
    tensor_type = type_proto.tensor_type
    if not tensor_type.HasField("shape"):
        return TensorInfo(tensor_type.elem_type, None)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim)
    return TensorInfo(tensor_type.elem_type, dims)


def graph_infos(graph: GraphProto, main: bool = False) -> dict[str, TensorInfo]:
    """What inference wrote into ``graph`` (of the typing copy), with the facts ORT enforces last so that
    nothing hides them: initializer dims, Constant values and the main graph's input shapes.

    Args:
        graph: a graph of the inferred typing copy.
        main: whether ``graph`` is the main graph (its input shapes are facts; a subgraph's are not).

    Returns:
        Name to TensorInfo.
    """
    infos: dict[str, TensorInfo] = {}
    for value in (*graph.value_info, *graph.output, *(graph.input if not main else ())):
        learn(infos, value.name, tensor_info(value.type))
    facts = {init.name: TensorInfo(init.data_type, tuple(init.dims)) for init in graph.initializer}
    if main:
        facts.update({value.name: info for value in graph.input if (info := tensor_info(value.type)) is not None})
    for node in graph.node:
        value = constant_value(node)
        if value is not None:
            facts[node.output[0]] = TensorInfo(value.data_type, tuple(value.dims))
    for name, info in facts.items():
        if info.rank is not None or not known_rank(infos.get(name)):
            infos[name] = with_elem_type(info, infos.get(name))
    return infos


def learn(infos: dict[str, TensorInfo], name: str, info: TensorInfo | None) -> None:
    """Record ``info`` for ``name`` unless it knows less than what is recorded: an entry without a shape
    never replaces a known rank (it keeps only its element type when the known one has none).

    Args:
        infos: name to TensorInfo, updated in place.
        name: the value's name.
        info: what a source says of it; None records nothing.
    """
    if info is None:
        return
    known = infos.get(name)
    if known_rank(known) and info.rank is None:
        if not known.elem_type and info.elem_type:
            infos[name] = TensorInfo(info.elem_type, known.shape)
        return
    infos[name] = with_elem_type(info, known)


def declared_ranks(graph: GraphProto) -> dict[str, TensorInfo]:
    """The ranks (never the sizes: ORT does not enforce them) that ``graph`` of the original model
    declares for values no fact covers: value_info, outputs and subgraph inputs. Used only where
    inference says nothing.

    Args:
        graph: a graph of the original model.

    Returns:
        Name to TensorInfo whose shape is ``(None,) * rank``.
    """
    ranks = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        info = tensor_info(value.type)
        if info is not None and info.rank is not None:
            ranks[value.name] = TensorInfo(info.elem_type, (None,) * info.rank)
    return ranks


def typing_copy(model: ModelProto) -> ModelProto:
    """A copy for shape inference holding only what ORT enforces (see the module docstring). Built piece
    by piece, so that no large payload is ever copied.

    Args:
        model: the model; it is not changed.

    Returns:
        The typing copy: large initializers become bare graph inputs, declared sizes are cleared.
    """
    light = ModelProto()
    for name in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(light, name, getattr(model, name))
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    copier = TypingCopier(NameScope(all_names(model)))
    light.graph.CopyFrom(copier.graph(model.graph, main=True))
    declared = {value.name for value in light.graph.input}
    for value in copier.hoisted:
        if value.name not in declared:
            declared.add(value.name)
            light.graph.input.append(value)
    return light


@dataclass
class TypingCopier:
    """Builds the typing copy graph by graph: ``names`` gives the stand-ins fresh names, ``hoisted`` collects the
    bare inputs standing for large initializers."""

    names: NameScope
    hoisted: list[onnx.ValueInfoProto] = field(default_factory=list)
    constants: dict[str, onnx.TensorProto] = field(default_factory=dict)  # small integer ones of the graphs walked into

    def graph(self, graph: GraphProto, main: bool, outer: dict[str, tuple[int, ...] | None] | None = None
              ) -> GraphProto:
        """The typing copy of one graph (its subgraphs too); its large initializers go to ``hoisted``.

        Args:
            graph: a graph of the original model.
            main: whether ``graph`` is the main graph (its inputs keep their declared shapes).
            outer: the enclosing graphs' facts (``_facts``), for the ORT readings of this graph's nodes.

        Returns:
            The new graph.
        """
        light = GraphProto(name=graph.name)
        light.input.extend(graph.input)
        light.output.extend(graph.output)
        if main:  # ORT checks no element of a sequence input against its declared shape (FINDINGS A4)
            for value in light.input:
                if value.type.HasField("sequence_type"):
                    _clear_element_shape(value.type.sequence_type.elem_type)
        facts = _facts(graph, main, outer or {})
        if not main:  # outer constants the body reads: ONNX's inference of a subgraph sees their types, not values
            light.initializer.extend(self._outer_constants(graph))
        enclosing = self.constants
        self.constants = {name: tensor for name, tensor in enclosing.items() if name not in {v.name for v in graph.input}}
        self.constants.update(_small_integer_constants(graph))
        try:
            return self._copy_graph(graph, main, light, facts)
        finally:
            self.constants = enclosing

    def _copy_graph(self, graph: GraphProto, main: bool, light: GraphProto,
                    facts: dict[str, tuple[int, ...] | None]) -> GraphProto:
        """The rest of ``graph``'s copy into ``light``: value_info, initializers and nodes."""
        # A value_info entry for a fact (an initializer, a Constant output, an input) is left out: its
        # cleared shape would hide the fact (the dynamo exporter writes one for every initializer).
        fact_names = {init.name for init in graph.initializer} | {value.name for value in graph.input} | {
            node.output[0] for node in graph.node if constant_value(node) is not None}
        light.value_info.extend(value for value in graph.value_info if value.name not in fact_names)
        # Declared element types are kept, declared sizes not: ORT does not enforce value_info, graph
        # outputs, or Loop and Scan body inputs (their types come from the node's inputs).
        for value in (*light.output, *light.value_info, *(light.input if not main else ())):
            if value.type.HasField("tensor_type"):
                value.type.tensor_type.ClearField("shape")
        for init in graph.initializer:
            if is_large(init):
                self.hoisted.append(bare_input(init.name, init))
            else:
                light.initializer.append(init)
        light.sparse_initializer.extend(graph.sparse_initializer)
        long_shapes = self._long_flat_shapes(graph)
        for node in graph.node:
            value = constant_value(node)
            if node.op_type == "Reshape" and node.domain in ONNX_DOMAINS and node.input[1:2] and (
                    node.input[1] in long_shapes):
                # (its result keeps rank 1, of unknown length: see FLAT_LENGTH_LIMIT)
                stand_in = self.names.fresh(node.input[1] + "/unknown_length")
                self.hoisted.append(helper.make_tensor_value_info(stand_in, onnx.TensorProto.INT64, [1]))
                light.node.append(helper.make_node("Reshape", [node.input[0], stand_in], list(node.output),
                                                   name=node.name))
                light.node[-1].attribute.extend(node.attribute)
                continue
            if value is not None and is_large(value):
                stand_in = self.names.fresh(node.output[0] + "/stripped")
                self.hoisted.append(bare_input(stand_in, value))
                light.node.append(helper.make_node("Identity", [stand_in], [node.output[0]], name=node.name))
                continue
            standard_op = element_types.typing_stand_in(node)
            if standard_op is not None:  # an ORT fused op: a standard op of the same output type and shape
                light.node.append(standard_op)
                continue
            reading = ORT_READINGS.get(node.op_type) if node.domain in ONNX_DOMAINS else None
            as_ort_reads = reading(node, facts, self) if reading is not None else None
            if as_ort_reads is not None:  # ONNX's inference would state another rank than ORT's kernel gives
                light.node.extend(as_ort_reads)
                continue
            copy = light.node.add(op_type=node.op_type, domain=node.domain, name=node.name, overload=node.overload)
            copy.input.extend(node.input)
            copy.output.extend(node.output)
            for attribute in node.attribute:
                if attribute.type == AttributeProto.GRAPH:
                    body = copy.attribute.add(name=attribute.name, type=attribute.type).g
                    body.CopyFrom(self.graph(attribute.g, main=False, outer=facts))
                    if node.op_type == "Loop" and node.domain in ONNX_DOMAINS:
                        type_loop_counters(body)
                elif attribute.type == AttributeProto.GRAPHS:
                    copy.attribute.add(name=attribute.name, type=attribute.type).graphs.extend(
                        self.graph(sub, main=False, outer=facts) for sub in attribute.graphs)
                else:
                    copy.attribute.append(attribute)
        return light


    def _outer_constants(self, graph: GraphProto) -> list[onnx.TensorProto]:
        """Copies of the small constants of enclosing graphs that ``graph``'s own nodes read (an Unsqueeze's
        or a reduction's axes), for ONNX's inference of ``graph``."""
        own = {init.name for init in graph.initializer} | {value.name for value in graph.input} | {
            name for node in graph.node for name in node.output}
        copies = []
        for name in dict.fromkeys(name for node in graph.node for name in node.input):
            tensor = self.constants.get(name)
            if name and name not in own and tensor is not None:
                copy = onnx.TensorProto()
                copy.CopyFrom(tensor)
                copy.name = name
                copies.append(copy)
        return copies

    @staticmethod
    def _long_flat_shapes(graph: GraphProto) -> set[str]:
        """The constants of ``graph`` that are a Reshape's shape of one dim of over FLAT_LENGTH_LIMIT."""
        candidates = {init.name: init for init in graph.initializer}
        candidates.update((node.output[0], value) for node in graph.node if (value := constant_value(node)) is not None)
        long = set()
        for name, tensor in candidates.items():
            if (list(tensor.dims) == [1] and tensor.data_type == onnx.TensorProto.INT64
                    and tensor.data_location != onnx.TensorProto.EXTERNAL
                    and int(numpy_helper.to_array(tensor)[0]) > FLAT_LENGTH_LIMIT):
                long.add(name)
        return long


def _facts(graph: GraphProto, main: bool, outer: dict[str, tuple[int, ...] | None]
           ) -> dict[str, tuple[int, ...] | None]:
    """What ORT enforces of the names ``graph`` sees: a constant's dims, a main graph input's declared dims
    (-1 where no size is fixed). A subgraph input hides an outer name."""
    facts = dict(outer)
    for value in graph.input:
        facts.pop(value.name, None)
        info = tensor_info(value.type) if main else None
        if info is not None and info.rank is not None:
            facts[value.name] = tuple(d if isinstance(d, int) else -1 for d in info.shape or ())
    facts.update((init.name, tuple(init.dims)) for init in graph.initializer)
    for node in graph.node:
        value = constant_value(node)
        if value is not None:
            facts[node.output[0]] = tuple(value.dims)
    return facts


def _small_integer_constants(graph: GraphProto) -> dict[str, onnx.TensorProto]:
    """``graph``'s integer constants of at most 64 elements held in the model (axes, shapes, bounds)."""
    found = {}
    tensors = [(init.name, init) for init in graph.initializer]
    tensors += [(node.output[0], value) for node in graph.node if (value := constant_value(node)) is not None]
    for name, tensor in tensors:
        if (tensor.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and math.prod(tensor.dims) <= 64
                and tensor.data_location != onnx.TensorProto.EXTERNAL):
            found[name] = tensor
    return found


def _clear_element_shape(type_proto: TypeProto) -> None:
    if type_proto.HasField("tensor_type"):
        type_proto.tensor_type.ClearField("shape")


# ---- ORT readings -------------------------------------------------------------------------------------
# Where ONNX's shape inference states another rank than ORT's kernel produces, the typing copy (inferred,
# never run) holds a stand-in whose inference gives ORT's rank, or none where only the run time knows it.
# Each rule: (node, the facts its graph sees, the copier) -> the stand-in nodes, or None to copy the node.
# docs/upstream.md lists the disagreements these rules read as ORT does.

def split_to_sequence_reading(node: onnx.NodeProto, facts: dict[str, tuple[int, ...] | None],
                              copier: TypingCopier) -> list[onnx.NodeProto] | None:
    """SplitToSequence with keepdims=0 and a scalar ``split``: ORT's kernel drops the split axis (it keeps
    it only for a 1-D split), ONNX's inference keeps it. Stand-in: the node without ``split``, which ONNX
    types as ORT runs it. A ``split`` of unknown rank: elements of unknown rank (a Reshape to a shape of
    unknown length first)."""
    if attribute(node, "keepdims", 1) != 0 or len(node.input) < 2 or not node.input[1]:
        return None
    dims = facts.get(node.input[1], ())
    if node.input[1] in facts and dims is not None and len(dims) == 1:
        return None  # a 1-D split: both keep the axis
    inputs = [node.input[0]]
    nodes = []
    if node.input[1] not in facts or (dims is not None and len(dims) > 1):
        shape = copier.names.fresh(node.input[1] + "/unknown_rank")
        copier.hoisted.append(helper.make_tensor_value_info(shape, onnx.TensorProto.INT64, [shape + "/length"]))
        unranked = copier.names.fresh(node.input[0] + "/unknown_rank")
        nodes.append(helper.make_node("Reshape", [node.input[0], shape], [unranked]))
        inputs = [unranked, node.input[1]]
    nodes.append(helper.make_node("SplitToSequence", inputs, list(node.output), name=node.name,
                                  axis=attribute(node, "axis", 0), keepdims=0))
    return nodes


def squeeze_reading(node: onnx.NodeProto, facts: dict[str, tuple[int, ...] | None],
                    copier: TypingCopier) -> list[onnx.NodeProto] | None:
    """Squeeze whose ``axes`` input is an empty constant: ORT squeezes every dim of size 1 (as without
    axes), ONNX's inference squeezes nothing. Stand-in: the node without ``axes``."""
    if len(node.input) < 2 or not node.input[1]:
        return None
    dims = facts.get(node.input[1])
    if dims is None or math.prod(dims) != 0:
        return None
    return [helper.make_node("Squeeze", [node.input[0]], list(node.output), name=node.name)]


ORT_READINGS = {"SplitToSequence": split_to_sequence_reading, "Squeeze": squeeze_reading}


def type_loop_counters(body: GraphProto) -> None:
    """A Loop body's first two inputs are facts of the Loop spec: the iteration number (an int64 scalar)
    and the condition (a bool scalar).

    Args:
        body: a Loop body, typed in place.
    """
    for value, elem_type in zip(body.input, (onnx.TensorProto.INT64, onnx.TensorProto.BOOL)):
        value.type.CopyFrom(helper.make_tensor_type_proto(elem_type, []))


def is_large(tensor: onnx.TensorProto) -> bool:
    """Whether ``tensor`` holds more than STRIP_ABOVE_BYTES.

    Estimated from dims and type: ByteSize() would encode the whole payload to count it.

    Args:
        tensor: an initializer.

    Returns:
        True when the typing copy leaves its data out.
    """
    try:
        item = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        item = 8
    return math.prod(tensor.dims) * max(item, 1) > STRIP_ABOVE_BYTES


def bare_input(name: str, tensor: onnx.TensorProto) -> onnx.ValueInfoProto:
    """A graph input standing for a large constant: its type and dims, no data. A 1-D integer one gets a
    symbolic length: data propagation makes a shape of one dimension per element of a static length.

    Args:
        name: the constant's name.
        tensor: the constant.

    Returns:
        The graph input's ValueInfoProto.
    """
    dims: list = list(tensor.dims)
    if len(dims) == 1 and tensor.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        dims = [f"{name}/length"]
    return helper.make_tensor_value_info(name, tensor.data_type, dims)


def inferred(light: ModelProto) -> ModelProto:
    """Layer 1: ONNX shape inference (with data propagation: shape arithmetic gives sizes), and the ranks
    of Loop-carried values that it leaves unknown, proven by induction (``loop_carried_ranks``).

    Args:
        light: the typing copy (``typing_copy``).

    Returns:
        The inferred model, or ``light`` itself when ONNX's inference fails.
    """
    register_schema()  # it infers through GatherMultiaxis nodes (a model rewritten before, a lowering's input)
    first = _onnx_inferred(light)
    if first is light or not any(node.op_type == "Loop" and node.domain in ONNX_DOMAINS and len(node.input) > 2
                                 for holder in node_holders(light) for node in holder.node):
        return first
    return loop_carried_ranks(light, first)


def _onnx_inferred(light: ModelProto) -> ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(light, strict_mode=False, data_prop=True)
    except MemoryError:
        raise  # (not "no inference": a pass would go on with less and give another result, silently)
    except Exception:  # noqa: BLE001 - no inference: the other layers find the ranks
        return light


LOOP_ROUNDS = 6  # inferences the induction may take before it gives up (each hypothesis is tried once)

GraphKey = tuple  # a graph's place: ((node position, attribute name, graph index), ...) from the main graph


def _keyed_graphs(graph: GraphProto, key: GraphKey = ()) -> Iterator[tuple[GraphKey, GraphProto]]:
    yield key, graph
    for position, node in enumerate(graph.node):
        for attribute in node.attribute:
            for index, sub in enumerate(subgraphs(attribute)):
                yield from _keyed_graphs(sub, (*key, (position, attribute.name, index)))


def loop_carried_ranks(light: ModelProto, first: ModelProto) -> ModelProto:
    """ONNX's Loop inference gives a loop-carried value no shape (its sizes may change between
    iterations), so neither the body's copy of it nor the Loop's output has a rank, and every gather
    reading them would be aligned at run time. Its rank is an invariant when the body maps a value of
    the initial value's rank to one of the same rank: by induction over the iterations, every value the
    body sees and the Loop returns has that rank. Each round types the body inputs with their initial
    values' ranks (the hypotheses) and re-infers; a hypothesis whose body output has another or no rank
    is dropped for good, a verified one also types the Loop's output (and a scan output gets its body
    output's rank plus one). The result is the inference under hypotheses that all hold in it; ``first``
    (the plain inference) when no such fixed point is reached in LOOP_ROUNDS.

    Args:
        light: the typing copy.
        first: ONNX's inference of ``light``.

    Returns:
        The inferred model under the verified hypotheses (their values marked for ``induced_names``), or
        ``first``.
    """
    hypotheses: dict[tuple, int] = {}
    outputs: dict[tuple[GraphKey, str], int] = {}
    failed: set[tuple] = set()
    current = first
    for _ in range(LOOP_ROUNDS):
        proposed, typed = _loop_round(current, hypotheses, outputs, failed)
        if proposed == hypotheses and typed == outputs:
            if hypotheses:
                _mark_induced(first, current)
            return current
        hypotheses, outputs = proposed, typed
        current = _onnx_inferred(_with_ranks(light, hypotheses, outputs))
    return first


INDUCED = "rank by induction over Loop iterations"  # doc_string of an inferred value ONNX alone left unranked


def _mark_induced(first: ModelProto, current: ModelProto) -> None:
    """Mark the values of ``current`` whose ranks ``first`` (ONNX's inference alone) does not know, so that
    a pass can tell them (``induced_names``)."""
    plain = dict(_keyed_graphs(first.graph))
    for key, graph in _keyed_graphs(current.graph):
        plain_graph = plain.get(key)
        known = graph_infos(plain_graph, main=not key) if plain_graph is not None else {}
        for value in (*graph.value_info, *graph.output, *graph.input):
            if known_rank(tensor_info(value.type)) and not known_rank(known.get(value.name)):
                value.doc_string = INDUCED


def induced_names(graph: GraphProto) -> set[str]:
    """The values of an inferred graph whose ranks only the Loop induction gives (``loop_carried_ranks``).

    Args:
        graph: a graph of the inferred model.

    Returns:
        The names.
    """
    return {value.name for value in (*graph.value_info, *graph.output, *graph.input) if value.doc_string == INDUCED}


def _loop_round(current: ModelProto, hypotheses: dict, outputs: dict, failed: set) -> tuple[dict, dict]:
    """One round over every Loop of ``current``: the hypotheses kept (verified) or new, and the Loop
    outputs whose ranks follow (those ONNX left unknown, and those ``outputs`` typed in this round's
    inference); a hypothesis that did not hold joins ``failed``."""
    proposed: dict[tuple, int] = {}
    typed: dict[tuple[GraphKey, str], int] = {}
    scopes: dict[GraphKey, dict[str, TensorInfo]] = {}
    for key, graph in _keyed_graphs(current.graph):
        infos = dict(scopes.get(key[:-1], {})) if key else {}
        infos.update(graph_infos(graph, main=not key))
        scopes[key] = infos
        for position, node in enumerate(graph.node):
            if node.op_type != "Loop" or node.domain not in ONNX_DOMAINS or len(node.input) <= 2:
                continue
            body = next((a.g for a in node.attribute if a.name == "body" and a.type == AttributeProto.GRAPH), None)
            if body is None or len(body.input) != len(node.input) or len(body.output) < len(node.input) - 1:
                continue
            body_infos = graph_infos(body, main=False)
            carried = len(node.input) - 2
            for j in range(carried):
                hypothesis = (key, position, j)
                initial = infos.get(node.input[2 + j])
                if hypothesis in failed or not known_rank(initial):
                    continue
                if hypothesis not in hypotheses:
                    if not known_rank(body_infos.get(body.input[2 + j].name)):
                        proposed[hypothesis] = initial.rank
                    continue
                result = body_infos.get(body.output[1 + j].name)
                if hypotheses[hypothesis] == initial.rank and known_rank(result) and result.rank == initial.rank:
                    proposed[hypothesis] = initial.rank
                    output = node.output[j] if j < len(node.output) else ""
                    if output and ((key, output) in outputs or not known_rank(infos.get(output))):
                        typed[key, output] = initial.rank
                else:
                    failed.add(hypothesis)
            for s, value in enumerate(body.output[1 + carried:]):
                output = node.output[carried + s] if carried + s < len(node.output) else ""
                result = body_infos.get(value.name)
                if output and known_rank(result) and ((key, output) in outputs or not known_rank(infos.get(output))):
                    typed[key, output] = result.rank + 1
    return proposed, typed


def _with_ranks(light: ModelProto, hypotheses: dict, outputs: dict) -> ModelProto:
    """A copy of the typing copy whose hypothesised body inputs and Loop outputs have ranks (no sizes)."""
    model = ModelProto()
    model.CopyFrom(light)
    graphs = dict(_keyed_graphs(model.graph))
    for (key, position, j), rank in hypotheses.items():
        node = graphs[key].node[position]
        body = next(a.g for a in node.attribute if a.name == "body")
        _set_rank(body.input[2 + j], rank)
    for (key, name), rank in outputs.items():
        graph = graphs[key]
        declared = next((value for value in (*graph.output, *graph.value_info) if value.name == name), None)
        if declared is None:
            declared = graph.value_info.add(name=name)
        _set_rank(declared, rank)
    return model


def _set_rank(value: onnx.ValueInfoProto, rank: int) -> None:
    tensor_type = value.type.tensor_type
    tensor_type.ClearField("shape")
    shape = tensor_type.shape
    for _ in range(rank):
        shape.dim.add()


@dataclass
class SymbolicInference:
    """Layer 2's result: name to TensorInfo, and why ORT's symbolic shape inference gave up ("" when it did not)."""

    infos: dict[str, TensorInfo]
    failure: str = ""


def symbolic_inference(light: ModelProto) -> SymbolicInference:
    """Layer 2: ORT's symbolic shape inference (knows Reshape/Flatten chains and com.microsoft ops).

    Names from every graph; a name defined in two sibling subgraphs is ambiguous and dropped. So is every
    value whose rank rests on one that ORT's symbolic inference states where ORT's kernels may give
    another (``_symbolic_unsure``): the outputs of those nodes and all that is computed from them.

    Args:
        light: the typing copy.

    Returns:
        The SymbolicInference: name to TensorInfo for every name with a known rank (none when ORT's
        inference gives up, or the opset is below 7) and the reason it gave up.

    Raises:
        PrivateAPIError: the installed onnxruntime's private inference steps changed.
    """
    register_schema()  # ORT's inference falls back to onnx's per node, GatherMultiaxis ones included
    try:
        symbolic_shape_inference()  # PrivateAPIError when the installed onnxruntime lacks a step
        if (symbolic_shape_infer_module().get_opset(light) or 0) < 7:
            return SymbolicInference({}, "the model's opset is below 7")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            inferred = partial_symbolic_inference(light)  # the partial result, also where inference stops
    except (PrivateAPIError, MemoryError):
        # an onnxruntime whose private steps changed: say so, rather than rewrite with fewer ranks; out of
        # memory: not "no inference" (see ``inferred``)
        raise
    except Exception as error:  # noqa: BLE001 - it gives up on some graphs as a whole: the next layers take over
        failure = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        _log.debug("ORT's symbolic shape inference gave up on the model (%s)", failure)
        return SymbolicInference({}, failure)
    infos: dict[str, TensorInfo] = {}
    seen: Counter = Counter()
    for holder in node_holders(inferred):
        if isinstance(holder, GraphProto):
            for value in (*holder.value_info, *holder.output):
                info = tensor_info(value.type)
                if info is not None and info.rank is not None:
                    seen[value.name] += 1
                    infos[value.name] = info
    unsure: set[str] = set()
    _unsure_values(inferred.graph, {}, infos, unsure)
    return SymbolicInference({name: info for name, info in infos.items() if seen[name] == 1 and name not in unsure})


def symbolic_infos(light: ModelProto) -> dict[str, TensorInfo]:
    """Layer 2's ranks (``symbolic_inference``), without the reason it may have given up.

    Args:
        light: the typing copy.

    Returns:
        Name to TensorInfo.
    """
    return symbolic_inference(light).infos


_REDUCTIONS = frozenset("ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum "
                        "ReduceLogSumExp ReduceSumSquare".split())


def _unsure_values(graph: GraphProto, outer: dict[str, tuple[int, ...]], infos: dict[str, TensorInfo],
                   unsure: set[str]) -> None:
    """Add to ``unsure`` the values of ``graph`` (subgraphs included, in graph order) whose symbolic rank
    rests on one ``_symbolic_unsure`` doubts."""
    constants = dict(outer)
    constants.update((init.name, tuple(init.dims)) for init in graph.initializer)
    for node in graph.node:
        value = constant_value(node)
        if value is not None:
            constants[node.output[0]] = tuple(value.dims)
        tainted = any(name in unsure for name in node.input)
        branch_outputs = []
        for attribute_proto in node.attribute:
            for sub in subgraphs(attribute_proto):
                _unsure_values(sub, constants, infos, unsure)
                tainted = tainted or any(name in unsure for name in names_read(sub))
                branch_outputs.append([value.name for value in sub.output])
        if tainted:
            unsure.update(name for name in node.output if name)
            continue
        for position in _symbolic_unsure(node, constants, infos, branch_outputs, unsure):
            if position < len(node.output) and node.output[position]:
                unsure.add(node.output[position])


def _symbolic_unsure(node: onnx.NodeProto, constants: dict[str, tuple[int, ...]], infos: dict[str, TensorInfo],
                     branch_outputs: list[list[str]], unsure: set[str]) -> list[int]:
    """The outputs of ``node`` whose rank ORT's symbolic inference states where ORT's kernels may give
    another (measured with onnxruntime 1.32; docs/upstream.md): an If whose branches' ranks are not known
    and equal (it takes the then-branch's), a Squeeze without constant axes, a SequenceInsert (it takes the
    first element's rank), a GatherND with batch_dims (it ignores them), SoftmaxCrossEntropyLoss, and a
    reduction with keepdims=0 over empty or run-time axes."""
    if node.domain not in ONNX_DOMAINS:
        return []
    everything = list(range(len(node.output)))
    op = node.op_type
    if op == "If":
        if len(branch_outputs) != 2:
            return everything

        def rank(names: list[str], k: int) -> int | None:
            info = infos.get(names[k]) if k < len(names) and names[k] not in unsure else None
            return None if info is None else info.rank

        then_outputs, else_outputs = branch_outputs
        return [k for k in everything if rank(then_outputs, k) is None or rank(then_outputs, k) != rank(else_outputs, k)]
    sized_axes = len(node.input) > 1 and node.input[1] in constants and math.prod(constants[node.input[1]]) > 0
    if op == "Squeeze":
        if len(node.input) > 1 and node.input[1]:
            return [] if sized_axes else everything
        if attribute(node, "axes") is not None:
            return []
        data = infos.get(node.input[0])  # no axes: every dim of size 1, known only where every size is
        return [] if data is not None and data.shape is not None and all(isinstance(d, int) for d in data.shape) \
            else everything
    if op in ("SequenceInsert", "SoftmaxCrossEntropyLoss"):
        return everything
    if op == "GatherND":
        return everything if attribute(node, "batch_dims", 0) else []
    if op in _REDUCTIONS and attribute(node, "keepdims", 1) == 0:
        if len(node.input) > 1 and node.input[1] and not sized_axes:
            return everything
    return []


def known_rank(info: TensorInfo | None) -> TypeGuard[KnownRankInfo]:
    """Whether ``info`` knows a rank.

    Args:
        info: a TensorInfo, or None.

    Returns:
        True when ``info`` is not None and its rank is known.
    """
    return info is not None and info.rank is not None


def with_elem_type(info: TensorInfo, known: TensorInfo | None) -> TensorInfo:
    """``info``, with ``known``'s element type where ``info`` has none.

    Args:
        info: the new TensorInfo.
        known: what was recorded before, or None.

    Returns:
        The TensorInfo.
    """
    if info.elem_type or known is None:
        return info
    return TensorInfo(known.elem_type, info.shape)


__all__ = ["FLAT_LENGTH_LIMIT", "LOOP_ROUNDS", "ORT_READINGS", "STRIP_ABOVE_BYTES", "Dim", "SymbolicInference", "TensorInfo", "TypingCopier", "declared_ranks",
           "graph_infos", "induced_names", "inferred", "is_large", "known_rank", "learn", "loop_carried_ranks",
           "symbolic_inference", "symbolic_infos", "tensor_info", "typing_copy", "with_elem_type"]
