"""``webnn_check``: the nodes of a model ORT's WebNN EP would not take (its op table, onnxruntime-web 1.22's
js/web/docs/webnn-operators.md, and the constraints stated there), and the values whose rank or type WebNN
does not guarantee."""

from __future__ import annotations

import os
from dataclasses import dataclass

from onnx import ModelProto, TensorProto, helper

from ...ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ..ir.constant_view import ConstantView
from ..ir.walk import ONNX_DOMAINS, holds_subgraph
from .static_shapes import NotStatic, fix_input_shapes, static_infos
from .webnn_ops import CONSTANT_INPUTS, MAX_RANK, NO_SUCH_TENSORS, NO_WEBNN_TYPES, WEBNN_OPS

@dataclass
class Finding:
    """A node ORT's WebNN EP would not take: its name, its op type (domain-qualified outside ONNX), and why."""

    node: str
    op_type: str
    reason: str


def webnn_check(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None,
                external_data_folder: str | os.PathLike | None = None) -> list[Finding]:
    """Every node of ``model`` ORT's WebNN EP would not take, and why (see ``gathermultiaxis.graphs.webnn``). A
    constant whose values a check reads (a Reshape's shape) is read from ``external_data_folder``, the
    model's folder, if kept in a file.

    Args:
        model: the model; it is not changed (the check works on a copy with its input shapes fixed).
        input_shapes: input name to its static dims, for inputs with symbolic dims.
        external_data_folder: the model's folder; None when no external constant is needed.

    Returns:
        One Finding per node and reason (a graph input left symbolic is a finding too, not an error).
    """
    copy = ModelProto()
    copy.CopyFrom(model)
    findings: list[Finding] = []
    try:
        fix_input_shapes(copy, input_shapes)
    except NotStatic as error:
        findings.append(Finding("", "(graph inputs)", str(error)))
    infos = static_infos(copy)
    constants = ConstantView(copy.graph, external_data_folder=external_data_folder)  # once, read on demand

    def shape(name: str) -> tuple | None:
        info = infos.get(name)
        return None if info is None or info.shape is None else tuple(info.shape)

    def rank(name: str) -> int | None:
        dims = shape(name)
        return None if dims is None else len(dims)

    for node in copy.graph.node:
        op_type = node.op_type if node.domain in ONNX_DOMAINS else f"{node.domain}.{node.op_type}"
        reasons = []
        if node.domain not in ONNX_DOMAINS or node.op_type not in WEBNN_OPS:
            reasons.append("not in the WebNN EP's op table")
        if holds_subgraph(node):
            reasons.append("holds a subgraph: WebNN graphs have no control flow")
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == GATHER_ND and attributes.get("batch_dims", 0):
            reasons.append(f"batch_dims {attributes['batch_dims']} (WebNN's gatherND has none)")
        if node.op_type == GATHER_ELEMENTS:
            data_shape, indices_shape = shape(node.input[0]), shape(node.input[1])
            axis = attributes.get("axis", 0)
            if data_shape is None or indices_shape is None:
                reasons.append("shapes not static (WebNN's gatherElements needs indices shaped like the input)")
            elif len(data_shape) == len(indices_shape) and any(
                    a != b for d, (a, b) in enumerate(zip(data_shape, indices_shape)) if d != axis % len(data_shape)):
                reasons.append(f"indices {list(indices_shape)} not shaped like the input {list(data_shape)} off the axis")
        if node.op_type == "Clip":
            info = infos.get(node.input[0])
            if info is not None and info.elem_type not in (TensorProto.FLOAT, TensorProto.FLOAT16, 0):
                reasons.append("Clip of a non-float tensor (ORT's WebNN EP reads its bounds as float or float16 only)")
        if node.op_type == GATHER and rank(node.input[0]) == 0:
            reasons.append("rank-0 input (the EP refuses it)")
        if node.op_type in (GATHER, GATHER_ELEMENTS) and len(node.input) > 1:
            info = infos.get(node.input[1])
            if info is not None and info.elem_type not in (TensorProto.INT32, 0):
                reasons.append("indices not int32 (the index type every WebNN backend takes)")
        # (GatherND: ONNX's takes int64 indices only; ORT's WebNN EP runs int64 values as int32 on a backend
        # without int64, so there int64 is the form to take)
        for position in CONSTANT_INPUTS.get(node.op_type, ()):
            if position < len(node.input) and node.input[position] and node.input[position] not in constants:
                reasons.append(f"input {position} ({node.input[position]!r}) is not a constant")
        if node.op_type == "Reshape" and len(node.input) > 1 and node.input[1] in constants:
            if 0 in constants[node.input[1]].reshape(-1).tolist():
                reasons.append("a 0 in the shape input (the EP does not support it)")
        for name in (*node.input, *node.output):
            r = rank(name)
            if name and r is not None and r > MAX_RANK:
                reasons.append(f"{name!r} has rank {r} > {MAX_RANK}")
                break
        for name in (*node.input, *node.output):
            info = infos.get(name)
            if name and info is not None and info.elem_type in NO_WEBNN_TYPES:
                reasons.append(f"{name!r} is {NO_WEBNN_TYPES[info.elem_type]} ({NO_SUCH_TENSORS})")
                break
        findings.extend(Finding(node.name, op_type, reason) for reason in reasons)
    return findings


def lowering_findings(lowered: ModelProto, report, input_shapes: dict[str, tuple[int, ...]] | None = None,
                      external_data_folder: str | os.PathLike | None = None) -> list[Finding]:
    """``webnn_check``'s findings on the nodes ``lower_for_webnn`` emitted (named after the nodes they
    replace, in ``report``): what the lowering itself put outside WebNN's subset."""
    prefixes = tuple(f"{o.node}/" for o in report.outcomes if o.lowered and o.node)
    return [f for f in webnn_check(lowered, input_shapes, external_data_folder)
            if f.node.startswith(prefixes) and NO_SUCH_TENSORS not in f.reason]
