"""Static shapes for the WebNN target: input shapes fixed, shape arithmetic folded to constants."""

from __future__ import annotations

import os
from dataclasses import dataclass
from math import prod
from typing import ClassVar

import numpy as np
from onnx import ModelProto, NodeProto, helper, numpy_helper

from ...ops.contract import is_gather_multiaxis
from ..ranks.shape_inference import inferred
from ..ranks.tensor_info import graph_infos
from ..ranks.typing_copy import typing_copy
from ..ir.constant_view import ConstantView
from ..ir.dead_nodes import remove_dead
from ..ir.folding import SHAPE_FOLDING, fold
from ..ir.walk import ONNX_DOMAINS, attribute, default_opset, holds_subgraph
from ..passes import ModelPass, PassResult
from .webnn_ops import INT64_MAX

class NotStatic(ValueError):
    """The model's input shapes are not all fixed (WebNN graphs have static shapes), or one given is
    impossible (a negative size, or more elements than int64 counts)."""


def fix_input_shapes(model: ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None) -> None:
    """Give every graph input of ``model`` (in place) a static shape: ``input_shapes[name]``, or its own dims.
    NotStatic when an input keeps symbolic dims, or ``input_shapes`` gives a negative size, more elements than
    int64 counts, or names no input."""
    input_shapes = input_shapes or {}
    initializers = {init.name for init in model.graph.initializer}
    symbolic = []
    for value in model.graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        tensor_type = value.type.tensor_type
        if value.name in input_shapes:
            sizes = [int(size) for size in input_shapes[value.name]]
            if min(sizes, default=0) < 0 or prod(sizes) > INT64_MAX:
                raise NotStatic(f"--input-shapes {value.name}:{sizes} is impossible: "
                                f"{'a negative size' if min(sizes) < 0 else f'{prod(sizes)} elements, more than int64 counts'}")
            tensor_type.ClearField("shape")
            for size in input_shapes[value.name]:
                tensor_type.shape.dim.add().dim_value = int(size)
        elif not tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in tensor_type.shape.dim):
            symbolic.append(value.name)
    unknown = sorted(set(input_shapes) - {value.name for value in model.graph.input})
    if unknown:
        raise NotStatic(f"--input-shapes names {unknown[0]!r}, which is not an input of the model")
    if symbolic:
        raise NotStatic(f"WebNN graphs have static shapes, and input(s) {', '.join(map(repr, symbolic))} have "
                        f"symbolic or unknown dims: give --input-shapes NAME:[DIMS]")


def static_infos(model: ModelProto) -> dict:
    """Types and shapes of the main graph's values by ONNX's shape inference with data propagation. (Not
    ORT's symbolic inference for sizes: it gave a wrong static shape for a Slice in ONNX's expanded
    rotary-embedding node test, (2, 3, 4, 4) where ORT computes (2, 3, 4, 8).)"""
    return graph_infos(inferred(typing_copy(model)).graph, main=True)


FOLD_ROUNDS = 4  # a folded shape can make the next value's shape static: fold again, this many times at most


def foldable_input(known: ConstantView, name: str) -> bool:
    """Whether ``name`` is a constant shape arithmetic reads: integer or bool, and small (told by its proto,
    no payload read: a table a gather reads from is data, never loaded to fold it)."""
    dtype, size = known.dtype(name), known.size(name)
    return dtype is not None and dtype.kind in "iub" and size is not None and size <= SHAPE_FOLDING.max_elements


def static_size(node: NodeProto, infos: dict) -> np.ndarray | None:
    """The value of a Shape or Size node whose input's shape is static, else None."""
    info = infos.get(node.input[0])
    if info is None or info.shape is None or not all(isinstance(d, int) for d in info.shape):
        return None
    if node.op_type == "Size":
        return np.array(prod(info.shape), np.int64)
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return np.array(info.shape, np.int64)[attributes.get("start", 0):attributes.get("end", None)]


def folded_value(node: NodeProto, known: ConstantView, infos: dict, opset: int) -> np.ndarray | None:
    """The value of ``node`` where static shapes and small integer constants decide it (``SHAPE_FOLDING``)."""
    if is_gather_multiaxis(node):  # the shape gathers the rewrite made
        if attribute(node, "mode") is None or not all(foldable_input(known, name) for name in node.input):
            return None
    elif node.domain not in ONNX_DOMAINS or len(node.output) != 1 or holds_subgraph(node):
        return None
    elif node.op_type in ("Shape", "Size"):
        value = static_size(node, infos)
        return None if value is None or value.size > SHAPE_FOLDING.max_elements else value
    elif node.op_type not in SHAPE_FOLDING.ops or not all(foldable_input(known, name) for name in node.input if name):
        return None
    return fold(node, [known[name] if name else None for name in node.input], opset, SHAPE_FOLDING)


def fold_shape_arithmetic(model: ModelProto, external_data_folder: str | os.PathLike | None = None) -> int:
    """Replace by a Constant each main-graph node whose value static shapes and constants decide (in place,
    after ``fix_input_shapes``): WebNN needs Reshape/Expand/Slice shapes constant. Exact (``SHAPE_FOLDING``:
    integer and bool values only). Returns how many nodes were replaced."""
    infos = static_infos(model)
    known = ConstantView(model.graph, external_data_folder=external_data_folder)
    opset = default_opset(model)
    folded = {}
    for position, node in enumerate(model.graph.node):
        value = folded_value(node, known, infos, opset)
        if value is None:
            continue
        known.learn(node.output[0], value)
        folded[position] = helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                            value=numpy_helper.from_array(value, name=""))
    if folded:
        # what the folded nodes read: an initializer only they read goes (kept, it would be stored twice)
        read = {name for position in folded for name in model.graph.node[position].input if name}
        nodes = [folded.get(position, node) for position, node in enumerate(model.graph.node)]
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        constants = [node for node in model.graph.node if node.op_type == "Constant"]
        remove_dead(model.graph, constants, read, initializers="freed")
    return len(folded)


@dataclass
class FixInputShapes(ModelPass):
    """``fix_input_shapes`` as a pass."""

    input_shapes: dict[str, tuple[int, ...]] | None = None
    in_place: ClassVar[bool] = True

    def call(self, model: ModelProto) -> PassResult:
        """Fix the input shapes (NotStatic where one stays symbolic)."""
        fix_input_shapes(model, self.input_shapes)
        return PassResult(model, True)


@dataclass
class FoldShapeArithmetic(ModelPass):
    """One round of ``fold_shape_arithmetic`` as a pass (modified: it folded a node)."""

    external_data_folder: str | os.PathLike | None = None
    in_place: ClassVar[bool] = True

    def call(self, model: ModelProto) -> PassResult:
        """Fold what static shapes decide, once."""
        return PassResult(model, fold_shape_arithmetic(model, self.external_data_folder) > 0)
