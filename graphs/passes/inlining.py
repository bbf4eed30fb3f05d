"""The pass's own model: a copy with the model-local functions that hold one of its target nodes inlined,
so that every such node sits in a graph, where the pass can see its types and replace it."""

from __future__ import annotations

from typing import Callable

import onnx
import onnx.defs
import onnx.inliner
from onnx import ModelProto, NodeProto

from ..ir.walk import nodes_within
from .pass_base import ModelPass, PassResult


def pass_copy(model: ModelProto, is_target: Callable[[NodeProto], bool]) -> tuple[ModelProto, str]:
    """A copy of ``model`` with the functions holding a target inlined (IR version kept), and the inliner's
    failure ("" or the reason; the copy then comes back not inlined)."""
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
    """``model`` with the functions holding a target inlined (attribute defaults applied to ``model`` first),
    and "" or the inliner's failure."""
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
    """Bring functions' opset imports to the model's versions, as ORT reads them: ONNX always, another domain
    only when none of its ops used there changed between the versions (a missing domain is added)."""
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


class InlineFunctionsHolding(ModelPass):
    """``pass_copy`` as the first step of a ``Sequential`` (later steps may change its copy in place)."""

    def __init__(self, is_target: Callable[[NodeProto], bool]):
        self.is_target = is_target

    def call(self, model: ModelProto) -> PassResult:
        """Copy the model and inline the functions holding a target."""
        result, failure = pass_copy(model, self.is_target)
        return PassResult(result, not failure and len(result.functions) != len(model.functions))


__all__ = ["InlineFunctionsHolding", "functions_at_model_opset", "inline_functions_holding", "pass_copy"]
