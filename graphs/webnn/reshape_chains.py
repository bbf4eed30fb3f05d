"""Reshapes are free to read around: the values a tensor is a reshape of, the targets a form's result may take
(the one reshape reading the output, the float16 round trip's Cast back), and the cheapest indices shape."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from math import prod

from onnx import NodeProto, TensorProto, helper

from ..ir.builder import NodeBuilder
from ..ir.walk import ONNX_DOMAINS, round_trip_cast
from .webnn_facts import NodeFacts, WebNNLowering, static_shape
from .webnn_ops import MAX_RANK, RESHAPES

@dataclass
class Target:
    """Where the lowered node's result goes: the node's output, or the output of a node after it (the
    one reshape reading it, the float16 round trip's Cast back), whose shape and type the result then
    takes directly."""

    name: str
    shape: tuple[int, ...]
    absorbed: tuple[NodeProto, ...] = ()  # the nodes between the output and the target, which go


class Unfit(Exception):
    """A form does not fit the node; the message says why."""


def reshape_chain(lowering: WebNNLowering, name: str) -> list[tuple[str, tuple[int, ...]]]:
    """``name`` and each value it is a reshape of (through Reshape/Squeeze/Unsqueeze/Flatten/Identity
    nodes), nearest first, each with its static shape: every one holds the same elements in order."""
    chain, seen = [], set()
    while name not in seen:
        seen.add(name)
        shape = static_shape(lowering, name)
        if shape is None:
            break
        chain.append((name, shape))
        if name in lowering.absorbed:  # a lowered node writes it now: what it reshaped is gone
            break
        producer = lowering.producers.get(name)
        if producer is None or producer.domain not in ONNX_DOMAINS or producer.op_type not in RESHAPES:
            break
        name = producer.input[0]
    return chain


def view_as(lowering: WebNNLowering, b: NodeBuilder, name: str, shape: tuple[int, ...], role: str) -> str:
    """``name``'s elements with ``shape``: a value of the reshape chain that has it, else one Reshape
    of the chain's first value (the reshapes in between may then go)."""
    chain = reshape_chain(lowering, name)
    for value, value_shape in chain:
        if value_shape == tuple(shape):
            return value
    return b.op("Reshape", [chain[-1][0] if chain else name, b.constant(list(shape), role + "_shape")], role)


def result_targets(lowering: WebNNLowering, facts: NodeFacts, flexible: bool) -> list[Target]:
    """Where the result may go: the node's output; where the form can produce other shapes of the same
    elements (``flexible``) and the one node reading the output reshapes it, that node's output. With
    the float16 round trip, only the Cast back's output (the gathered values are float16)."""
    output = facts.node.output[0]
    targets = [Target(output, facts.out)]
    reader = sole_reader(lowering, output)
    if reader is not None and reader.op_type in RESHAPES and reader.input[0] == output:
        shape = static_shape(lowering, reader.output[0]) or reshaped_shape(lowering, reader, facts.out)
        if shape is not None and len(shape) <= MAX_RANK:
            targets.append(Target(reader.output[0], shape, (reader,)))
    if facts.narrow_cast is not None:
        cast = facts.narrow_cast
        targets = [Target(cast.output[0], target.shape, (*target.absorbed, cast)) for target in targets
                   if cast.input[0] == target.name]
    if not flexible:
        targets = [target for target in targets if target.shape == facts.out] or targets[-1:]
    return targets


def sole_reader(lowering: WebNNLowering, name: str) -> NodeProto | None:
    """The one standard main-graph node that reads ``name``, once, where nothing else does (nor is it a
    graph output), or None."""
    readers = lowering.main_readers.get(name, [])
    if name in lowering.graph_outputs or len(readers) != 1 or lowering.read_count.get(name, 0) != 1:
        return None
    return readers[0] if readers[0].domain in ONNX_DOMAINS else None


def narrowed(lowering: WebNNLowering, facts: NodeFacts) -> NodeFacts:
    """``facts`` with the float16 round trip around the node noted, where there is one."""
    chain = reshape_chain(lowering, facts.node.input[0])
    cast = lowering.producers.get(chain[-1][0]) if chain else None
    if cast is None or not round_trip_cast(cast, TensorProto.FLOAT) or chain[-1][0] in lowering.absorbed:
        return facts
    source = cast.input[0]
    if lowering.infos.get(source) is None or lowering.infos[source].elem_type != TensorProto.FLOAT16:
        return facts
    back = sole_reader(lowering, facts.node.output[0])
    if back is not None and back.op_type in RESHAPES:
        back = sole_reader(lowering, back.output[0])
    if back is None or not round_trip_cast(back, TensorProto.FLOAT16):
        return facts
    narrowed = dataclasses.replace(facts, narrow_data=source, narrow_cast=back, elem_type=TensorProto.FLOAT16)
    return narrowed if result_targets(lowering, narrowed, flexible=False) else facts  # (a reshape of unknown shape)


def reshaped_shape(lowering: WebNNLowering, node: NodeProto, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The output shape of the reshaping ``node`` given its input's ``shape``, where its axes or shape
    are constants (shape inference leaves a graph output's declared shape as it is: unknown, often)."""
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    operand = lowering.constants.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
    if node.op_type == "Identity":
        return shape
    if node.op_type == "Flatten":
        axis = attributes.get("axis", 1) % (len(shape) + 1) if shape else 0
        return (prod(shape[:axis]), prod(shape[axis:]))
    if node.op_type == "Reshape":
        if operand is None:
            return None
        dims = [int(d) for d in operand.reshape(-1)]
        if not attributes.get("allowzero", 0):
            dims = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(dims)]
        if dims.count(-1) == 1:
            known = prod(d for d in dims if d != -1)
            dims[dims.index(-1)] = prod(shape) // known if known else 0
        return tuple(dims) if prod(dims) == prod(shape) and min(dims, default=0) >= 0 else None
    axes = attributes.get("axes") if operand is None else [int(a) for a in operand.reshape(-1)]
    if node.op_type == "Squeeze":
        if axes is None:
            return tuple(d for d in shape if d != 1)
        axes = {a % len(shape) for a in axes}
        return tuple(d for i, d in enumerate(shape) if i not in axes)
    if axes is None:  # Unsqueeze
        return None
    rank = len(shape) + len(axes)
    axes = {a % rank for a in axes}
    rest = iter(shape)
    return tuple(1 if i in axes else next(rest) for i in range(rank))


def choose_shapes(lowering: WebNNLowering, facts: NodeFacts, canonical: tuple[int, ...], result_shape, index_shape_for
            ) -> tuple[tuple[int, ...], Target]:
    """The indices' shape and the target, for a form that reads its indices in any shape of
    ``canonical``'s elements that ``index_shape_for`` gives back (``result_shape``: what it then
    writes): the fewest nodes (a Reshape of the indices, a Reshape of the result, less the nodes after
    the node that go)."""
    indices = facts.node.input[1]
    constant = indices in lowering.constants
    shapes = {canonical: 0 if constant or canonical in (s for _, s in reshape_chain(lowering, indices)) else 1}
    for _, shape in reshape_chain(lowering, indices):
        if index_shape_for(result_shape(shape)) == shape:  # a shape the form takes
            shapes.setdefault(shape, 0)
    best = None
    for target in result_targets(lowering, facts, flexible=True):
        if constant:
            derived = index_shape_for(target.shape)
            if derived is not None:
                shapes.setdefault(derived, 0)
        for shape, cost in shapes.items():
            if len(shape) > MAX_RANK or len(result_shape(shape)) > MAX_RANK:
                continue
            total = cost + (result_shape(shape) != target.shape) - len(target.absorbed)
            if best is None or total < best[0]:
                best = (total, shape, target)
    if best is None:
        raise Unfit(f"its indices or result would have rank > {MAX_RANK} in every shape this form takes")
    return best[1], best[2]


def finish_at_target(lowering: WebNNLowering, b: NodeBuilder, result: str, result_shape: tuple[int, ...], target: Target) -> None:
    """Reshape the form's result to the target's shape where it differs, and make the last node write
    the target."""
    if result_shape != target.shape:
        result = b.op("Reshape", [result, b.constant(list(target.shape), "result_shape")], "result")
    if not b.nodes or b.nodes[-1].output[0] != result:  # the result is a value read around: copy it
        b.op("Identity", [result], "result")
    b.rename_last_output(target.name)
    for node in target.absorbed:
        lowering.absorbed.add(node.output[0])
        lowering.freed.update(node.input)
