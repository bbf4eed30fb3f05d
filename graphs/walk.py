"""Moved to ``graphs.ir`` (walk, constant_view, tensors, dead_nodes); re-exported until the importers move
(WP5 deletes this module)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from onnx import GraphProto, NodeProto

from .ir.constant_view import ConstantView
from .ir.dead_nodes import remove_dead
from .ir.tensors import read_tensor as tensor_array
from .ir.walk import (MOVING_OPS, ONNX_DOMAINS, all_names, any_node, attribute, constant_value, default_opset,
                      holds_subgraph, model_nodes, moves_elements, names_read, node_holders, nodes_within,
                      round_trip_cast, subgraphs)


def drop_unused(graph: GraphProto, candidates: list[NodeProto], names: AbstractSet[str] = frozenset(),
                cascade: bool = False, all_initializers: bool = True) -> frozenset[str]:
    """``ir.dead_nodes.remove_dead`` under its old name and arguments."""
    return remove_dead(graph, candidates, names, cascade=cascade, initializers="all" if all_initializers else "freed")


__all__ = ["MOVING_OPS", "ONNX_DOMAINS", "ConstantView", "all_names", "any_node", "attribute", "constant_value",
           "default_opset", "drop_unused", "holds_subgraph", "model_nodes", "moves_elements", "names_read",
           "node_holders", "nodes_within", "round_trip_cast", "subgraphs", "tensor_array"]
