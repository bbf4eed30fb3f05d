"""The bind step's constant operands: tables read without a copy, resolved through views, casts and
constant subgraphs; the node shapes around a bound gather (its alignment Unsqueeze, the float16 Cast after it)."""


from __future__ import annotations

from typing import cast

import numpy as np
import onnx
from onnx import TensorProto
from onnx.external_data_helper import uses_external_data

from ....graphs.passes import GraphScope
from ....graphs.ir.tensors import read_tensor
from ....graphs.ir.walk import (MOVING_OPS, ONNX_DOMAINS, attribute, moves_elements, names_read, round_trip_cast,
                                subgraphs)


WIDENED: dict[int, str] = {TensorProto.FLOAT16: "float16", TensorProto.BFLOAT16: "bfloat16"}


def tensor_array(tensor: TensorProto, base_dir: str | None) -> tuple[np.ndarray, str | None] | None:
    """A tensor's values, without a copy where possible, and the 16-bit float format of its raw values (None:
    not bound: external data with no folder, or strings)."""
    if uses_external_data(tensor) and (base_dir is None or tensor.data_type == TensorProto.STRING):
        return None
    return (read_tensor(tensor, base_dir, mmap=True, raw_16bit=True, lenient_strings=True),
            WIDENED.get(tensor.data_type))


# ---------------------------------------------------------------- resolving through Unsqueeze and Cast
# Within one scope only (its own initializers and nodes: a subgraph's axes held by an enclosing scope stay
# an input), from the driver's producers and constant view of the scope.

def constant_ints(scope: GraphScope, name: str) -> list[int] | None:
    resolved = resolve(scope, name, base_dir=None)
    return None if resolved is None else [int(v) for v in np.asarray(resolved[0]).reshape(-1)]


def unsqueeze_axes(scope: GraphScope, node: onnx.NodeProto) -> list[int] | None:
    """An Unsqueeze's constant axes (attribute before opset 13, second input after), else None."""
    axes = attribute(node, "axes")
    if axes is None and len(node.input) > 1:
        axes = constant_ints(scope, node.input[1])
    return axes if isinstance(axes, list) else None  # not a list: an ill-typed attribute


# Nodes a constant data operand is seen through as a view of its table (NumPy, exact, no copy: a memory-mapped
# table stays mapped), and nodes whose result is computed once at bind time by ONNX Runtime itself (bit for bit
# what the unbound model computes at run time, DequantizeLinear's float rounding included).
VIEW_OPS = ("Identity", "Reshape", "Squeeze", "Transpose", "Unsqueeze")
COMPUTED_OPS = ("Cast", "Concat", "DequantizeLinear")


def resolve(scope: GraphScope, name: str, base_dir: str | None, chain: list | None = None,
             bound_initializers: dict | None = None, evaluate=None):
    """(array, widen) when ``name`` is a constant seen through ``VIEW_OPS`` and a widening Cast, or (with
    ``evaluate``) computed from constants, else None; records the nodes passed to ``chain`` and a viewed
    initializer to ``bound_initializers``. A view that cannot be taken raises: the caller leaves it to the run."""
    initializer = scope.constants.initializer(name)
    if initializer is not None:
        found = tensor_array(initializer, base_dir)
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
        found = tensor_array(value, base_dir)
    elif node.op_type in VIEW_OPS:
        passed, reached = list[onnx.NodeProto](), dict[str, tuple]()
        inner = resolve(scope, node.input[0], base_dir, passed, reached, evaluate)
        view = None if inner is None else view_of(scope, node, inner[0])
        if view is not None:
            found = (view, inner[1])
            if chain is not None:
                chain.extend(passed)
            if bound_initializers is not None:
                bound_initializers.update(reached)
    elif node.op_type == "Cast" and attribute(node, "to") == TensorProto.FLOAT:
        passed, reached = [], {}
        inner = resolve(scope, node.input[0], base_dir, passed, reached, evaluate)
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
        found = computed(scope, node, base_dir, chain, evaluate)
        return found  # its nodes are in ``chain`` already
    if chain is not None:
        chain.append(node)
    return found


def view_of(scope: GraphScope, node: onnx.NodeProto, array: np.ndarray) -> np.ndarray | None:
    """``node`` (one of ``VIEW_OPS``) applied to ``array`` as a NumPy view, or None for non-constant operands."""
    op_type = node.op_type
    if op_type == "Identity":
        return array
    if op_type == "Unsqueeze":
        axes = unsqueeze_axes(scope, node)
        return None if axes is None else np.expand_dims(array, tuple(axes))
    if op_type == "Squeeze":
        axes = attribute(node, "axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = constant_ints(scope, node.input[1])
            if axes is None:
                return None
        return np.squeeze(array, axis=None if axes is None else tuple(axes))
    if op_type == "Transpose":
        return np.transpose(array, attribute(node, "perm"))
    shape = constant_ints(scope, node.input[1]) if len(node.input) > 1 else attribute(node, "shape")  # Reshape
    if shape is None:
        return None
    if not attribute(node, "allowzero", 0):  # 0 copies the input's dimension
        shape = [array.shape[axis] if size == 0 else size for axis, size in enumerate(shape)]
    return array.reshape(shape)


def constant_subgraph(scope: GraphScope, node: onnx.NodeProto) -> tuple[list, list[str]] | None:
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


def computed(scope: GraphScope, node: onnx.NodeProto, base_dir: str | None, chain: list | None, evaluate):
    """(array, None) computed once by ``evaluate`` (shared by every gather of that table), or None."""
    results = scope.cache.setdefault("computed constants", {})
    name = node.output[0]
    if name not in results:
        results[name] = None
        collected = constant_subgraph(scope, node)
        if collected is not None:
            nodes, leaves = collected
            # cast: the leaves are initializers (constant_subgraph), so none is None
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


def fixed_axes(scope: GraphScope, name: str) -> tuple[int, ...] | None:
    """The constant axes ``name`` holds in the scope (seen by the graph itself), or None."""
    try:
        resolved = resolve(scope, name, base_dir=None)
    except Exception:  # noqa: BLE001 - an unreadable constant: leave the axes to the run, which reports it
        return None
    if resolved is None:
        return None
    values = np.asarray(resolved[0])
    if values.dtype != np.int64 or values.ndim != 1:  # not the op's 1-D int64: stays an input, which ORT refuses
        return None
    return tuple(int(v) for v in values)


def only_reader(scope: GraphScope, name: str) -> onnx.NodeProto | None:
    """The one node of the scope reading ``name`` (directly, once; no subgraph or graph output), else None."""
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


def unsqueezed_indices(scope: GraphScope, name: str) -> tuple[str, tuple[int, ...]] | None:
    """(input, axes) when ``name`` is the rewriter's indices Unsqueeze, constant axes, read by nothing else."""
    node = scope.producers.get(name)
    if (node is None or node.op_type != "Unsqueeze" or node.domain not in ONNX_DOMAINS
            or only_reader(scope, name) is None):
        return None
    axes = unsqueeze_axes(scope, node)
    return None if axes is None else (node.input[0], tuple(axes))


def float16_cast_after(scope: GraphScope, name: str) -> tuple[onnx.NodeProto, list[onnx.NodeProto]] | None:
    """The Cast to float16 after ``name`` and the ``MOVING_OPS`` before it, each the value's only reader."""
    moving: list[onnx.NodeProto] = []
    reader = only_reader(scope, name)
    while moves_elements(reader, TensorProto.FLOAT16) and reader.input[0] == name and len(moving) < len(MOVING_OPS):
        moving.append(reader)
        name = reader.output[0]
        reader = only_reader(scope, name)
    return (reader, moving) if round_trip_cast(reader, TensorProto.FLOAT16) else None


def narrowed_output(found: tuple[onnx.NodeProto, list[onnx.NodeProto]], output: str,
                     dropped_value_info: set[str]) -> tuple[list[str], list[onnx.NodeProto]]:
    """A float16 node writing ``output``: the Cast back goes, the moving ops after the node move float16 values."""
    cast, moving = found
    dropped_value_info.add(output)
    if not moving:
        return [cast.output[0]], [cast]
    for node in moving:
        dropped_value_info.add(node.output[0])
    moving[-1].output[0] = cast.output[0]
    return [output], [cast]


def declared_types(scope: GraphScope) -> dict[str, int]:
    """The element types the scope's graph declares, read on first need (the bind step infers none)."""
    types = scope.cache.get("declared types")
    if types is None:
        graph = scope.graph
        types = {value.name: value.type.tensor_type.elem_type for values in (graph.input, graph.value_info, graph.output)
                 for value in values if value.type.HasField("tensor_type")}
        types.update((tensor.name, tensor.data_type) for tensor in graph.initializer)
        scope.cache["declared types"] = types
    return types


def widened_float16(scope: GraphScope, name: str) -> bool:
    """Whether ``name`` is a Cast to float of a float16 value, possibly through ``MOVING_OPS`` (exact)."""
    cast = scope.producers.get(name)
    for _ in MOVING_OPS:
        if not moves_elements(cast, TensorProto.FLOAT16):
            break
        cast = scope.producers.get(cast.input[0])
    return round_trip_cast(cast) and float16_value(scope, cast.input[0])


# Contrib ops whose output holds input 0's elements, of its type (ORT's contrib_defs): the lowering's rank rules
# type them so, and the kernel path must narrow what the lowering narrows
TYPE_KEEPING_CONTRIB_OPS = frozenset({("com.microsoft", "ExpandDims")})


def float16_value(scope: GraphScope, name: str) -> bool:
    """Whether ``name`` holds float16 values: declared so, cast to float16, or moved (``MOVING_OPS``, Slice) from one."""
    for _ in range(len(MOVING_OPS) + 2):
        declared = declared_types(scope).get(name)
        if declared:
            return declared == TensorProto.FLOAT16
        producer = scope.producers.get(name)
        if producer is not None and (producer.domain, producer.op_type) in TYPE_KEEPING_CONTRIB_OPS:
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
