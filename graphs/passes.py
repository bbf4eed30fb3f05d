"""What every pass (the rewrite, the lowering, the session's bind step) starts from: its own copy of the
model, with the model-local functions that hold one of its target nodes inlined, so that every such
node sits in a graph, where the pass can see its types and replace it. The passes then walk that copy
with ``graphs.walk`` and learn its types from ``graphs.inference``."""

from __future__ import annotations

from typing import Callable

import onnx
import onnx.inliner
from onnx import ModelProto, NodeProto

from .walk import nodes_within


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


__all__ = ["inline_functions_holding", "pass_copy"]
