"""Layer 1: ONNX's shape inference with data propagation on the typing copy, and the ranks of Loop-carried values
found by induction over iterations."""

from __future__ import annotations
from typing import Iterator
import onnx
import onnx.shape_inference
from onnx import AttributeProto, GraphProto, ModelProto
from ..ir.walk import ONNX_DOMAINS, any_node, subgraphs
from ..schema import register_schema
from .tensor_info import TensorInfo, graph_infos, known_rank, tensor_info


def inferred(light: ModelProto) -> ModelProto:
    """Layer 1: ONNX shape inference (with data propagation: shape arithmetic gives sizes), and the ranks
    of Loop-carried values that it leaves unknown, proven by induction (``loop_carried_ranks``).
    """
    register_schema()  # it infers through GatherMultiaxis nodes (a model rewritten before, a lowering's input)
    first = _onnx_inferred(light)
    if first is light or not any_node(light, lambda node: node.op_type == "Loop" and node.domain in ONNX_DOMAINS
                                      and len(node.input) > 2):
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
    """The values of an inferred graph whose ranks only the Loop induction gives (``loop_carried_ranks``)."""
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


__all__ = ["GraphKey", "INDUCED", "LOOP_ROUNDS", "induced_names", "inferred", "loop_carried_ranks"]
