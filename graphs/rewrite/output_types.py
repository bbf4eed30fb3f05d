"""The value_info the rewrite writes for replaced outputs."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import onnx
from onnx import GraphProto, NodeProto, helper

from ..ranks.tensor_info import TensorInfo


@dataclass
class Declared:
    """What a graph declares, as the rewrite needs it per replaced node: its outputs by name (the first
    of a repeated name) and the names typed by value_info or inputs, kept up to date as value_info grows.
    Built once per graph, so that declaring is linear in the graph, not in graph x replaced nodes."""

    outputs: dict[str, onnx.ValueInfoProto]
    typed: set[str]

    @classmethod
    def of(cls, graph: GraphProto) -> "Declared":
        outputs: dict[str, onnx.ValueInfoProto] = {}
        for value in graph.output:
            outputs.setdefault(value.name, value)
        return cls(outputs, {value.name for value in (*graph.value_info, *graph.input)})


def declare_output(graph: GraphProto, node: NodeProto, infos: dict[str, TensorInfo], subgraph: bool,
                    declared: Declared, induced: AbstractSet[str] = frozenset(),
                    ort_type: onnx.TypeProto | None = None, opt_in: bool = False) -> bool:
    """Type a replaced node's output unless its graph declares it; returns whether a value_info was added."""
    # A value_info with its element type (the data's) and what is known of its shape,
    # unless the graph declares it already. A subgraph output declared without a shape gets its rank: ORT's Loop and
    # Scan require a shape for every body output and infer none through a custom op. No shape for an output whose rank
    # only the Loop induction gives (``induced``): ORT knows no such rank in the original, and what it infers from a
    # declared one reaches a Loop's scan outputs, which come back as [0] after zero iterations where nothing is known
    # of them, as [0, 0, ...] where a rank is. ``ort_type``: ORT's own type of the value in the original, declared as
    # it is; ``opt_in``: the node's type comes from its opt-in rule, not from its data.
    output = node.output[0]
    elem_type = infos.get(node.input[0], TensorInfo(0, None)).elem_type
    if opt_in:  # typed by the rule, not by its data
        elem_type = infos.get(output, TensorInfo(0, None)).elem_type
    shape = infos.get(output, TensorInfo(0, None)).shape if output not in induced else None
    graph_output = declared.outputs.get(output)
    if graph_output is not None:
        tensor_type = graph_output.type.tensor_type
        if subgraph and shape is not None and not tensor_type.HasField("shape"):
            # The rank only: a static size ORT took from here would fix the body output's allocation,
            # and a wrong one ends the process inside the PyOp bridge.
            typed = helper.make_tensor_value_info(output, tensor_type.elem_type or elem_type, [None] * len(shape))
            graph_output.type.CopyFrom(typed.type)
        return False
    if output in declared.typed:
        return False
    if ort_type is not None:
        graph.value_info.add(name=output).type.CopyFrom(ort_type)
    elif elem_type:
        graph.value_info.append(helper.make_tensor_value_info(output, elem_type, None if shape is None else list(shape)))
    else:
        return False
    declared.typed.add(output)
    return True


__all__ = ["Declared", "declare_output"]
