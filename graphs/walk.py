"""The graph walker every pass uses: the graphs a model holds (main graph, If/Loop/Scan bodies at any
depth, model-local functions), the nodes within them, every name a model uses, Constant values and the
model's default opset. Plain functions over onnx's protobuf (issue 19: onnx-ir measured slower and
lossier on our models; see the README's "Layout")."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Set as AbstractSet
from typing import Iterator, TypeGuard

import numpy as np
import onnx
from onnx import AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, TensorProto, helper, numpy_helper

from .modelfile import ExternalDataError, check_external_data

ONNX_DOMAINS = ("", "ai.onnx")


def node_holders(model: ModelProto) -> Iterator[GraphProto | FunctionProto]:
    """The main graph, every model-local function, and every subgraph nested in any of them.

    Args:
        model: the model.

    Returns:
        An iterator over them (GraphProto or FunctionProto), in no set order.
    """
    pending: list[GraphProto | FunctionProto] = [model.graph, *model.functions]
    while pending:
        holder = pending.pop()
        yield holder
        pending.extend(sub for node in holder.node for attribute in node.attribute for sub in subgraphs(attribute))


def all_names(model: ModelProto) -> set[str]:
    """Every name the model uses anywhere (tensors, nodes, graphs, functions), so that a fresh name
    collides with none: sparse initializers count too, used or not (ORT turns them into initializers).

    Args:
        model: the model.

    Returns:
        The set of names.
    """
    names: set[str] = {model.graph.name}
    for holder in node_holders(model):
        names.add(holder.name)
        if isinstance(holder, GraphProto):
            names.update(v.name for v in (*holder.input, *holder.output, *holder.value_info, *holder.initializer))
            names.update(sparse.values.name for sparse in holder.sparse_initializer)
        else:  # a function: its formal inputs and outputs, and its value_info (onnx >= 1.16)
            names.update((*holder.input, *holder.output))
            names.update(v.name for v in getattr(holder, "value_info", ()))
        for node in holder.node:
            names.update(node.input)
            names.update(node.output)
            names.add(node.name)
    return names


def subgraphs(attribute: AttributeProto) -> list[GraphProto]:
    """The graphs an attribute holds.

    Args:
        attribute: any attribute of a node.

    Returns:
        Its graph (GRAPH), its graphs (GRAPHS), or an empty list.
    """
    if attribute.type == AttributeProto.GRAPH:
        return [attribute.g]
    if attribute.type == AttributeProto.GRAPHS:
        return list(attribute.graphs)
    return []


def holds_subgraph(node: NodeProto) -> bool:
    """Whether a node has a graph attribute (If, Loop, Scan, ...). A plain loop: called for every node.

    Args:
        node: any node.

    Returns:
        True when one of its attributes is of type GRAPH or GRAPHS.
    """
    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH or attribute.type == AttributeProto.GRAPHS:
            return True
    return False


def default_opset(model: ModelProto) -> int:
    """The version of the ONNX domain that ``model`` imports.

    Args:
        model: the model.

    Returns:
        The opset version; 1 when the model imports no ONNX domain.
    """
    for opset in model.opset_import:
        if opset.domain in ONNX_DOMAINS:
            return opset.version
    return 1


def nodes_within(nodes) -> Iterator[NodeProto]:
    """Nodes and, recursively, the nodes of their subgraphs.

    Args:
        nodes: an iterable of NodeProto (a graph's or function's ``node`` field).

    Returns:
        An iterator over them, each node before its subgraphs' nodes.
    """
    for node in nodes:
        yield node
        for attribute in node.attribute:
            for sub in subgraphs(attribute):
                yield from nodes_within(sub.node)


def attribute(node: NodeProto, name: str, default=None):
    """The value of ``node``'s attribute ``name`` (strings decoded), or ``default`` when it has none: the one
    attribute reader of the passes.

    Args:
        node: the node.
        name: the attribute's name.
        default: what to return when ``node`` has no such attribute.

    Returns:
        The attribute's value (as onnx.helper.get_attribute_value gives it, bytes decoded to str: bytes that
        are not UTF-8 as backslash escapes, which match no name a pass looks for), or ``default``.
    """
    for proto in node.attribute:
        if proto.name == name:
            value = onnx.helper.get_attribute_value(proto)
            return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value
    return default


def round_trip_cast(node: NodeProto | None, to: int = TensorProto.FLOAT) -> TypeGuard[NodeProto]:
    """Whether ``node`` is a Cast of the float16/bfloat16 round trip that ``rules.emit_replacement`` writes:
    to float32 before GatherMultiaxis (``to`` FLOAT), or back after it (``to`` the narrow type). The one
    recogniser of that round trip (the bind step and the lowering fold it; here, so that the bind step
    needs no rewriter).

    Args:
        node: a node, or None.
        to: the Cast's target element type (a TensorProto data type).

    Returns:
        True when ``node`` is an ONNX Cast to ``to``.
    """
    if node is None or node.op_type != "Cast" or node.domain not in ONNX_DOMAINS:
        return False
    return any(a.name == "to" and a.i == to for a in node.attribute)


# Ops that move a tensor's elements without computing them: a float16 or bfloat16 value passes through them
# exactly as its float32 widening does, so the round trip's Cast back may go after them (ORT 1.32 has each
# for both types but Expand, which it has for float16 only).
MOVING_OPS = ("Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Expand")


def moves_elements(node: NodeProto | None, elem_type: int) -> TypeGuard[NodeProto]:
    """Whether ``node`` is one of ``MOVING_OPS`` that ORT runs on ``elem_type`` (float16 or bfloat16).

    Args:
        node: a node, or None.
        elem_type: the narrow type its data input would hold.

    Returns:
        True for such a node of an ONNX domain.
    """
    if node is None or node.domain not in ONNX_DOMAINS or node.op_type not in MOVING_OPS:
        return False
    return node.op_type != "Expand" or elem_type == TensorProto.FLOAT16


def constant_value(node: NodeProto) -> onnx.TensorProto | None:
    """The tensor of a Constant node given by its ``value`` attribute.

    Args:
        node: any node.

    Returns:
        The TensorProto, or None (not an ONNX Constant, or another attribute than ``value``).
    """
    if node.op_type == "Constant" and node.domain in ONNX_DOMAINS:
        for attribute in node.attribute:
            if attribute.name == "value":
                return attribute.t
    return None




class ConstantView(Mapping):
    """The values of a scope that cannot change at run time: its initializers (not one that is also a
    graph input: that is only a default a caller may override), its Constant nodes' values (``value``,
    ``value_ints``), the int64 constants of opsets 7 and 8 (``builder.NodeBuilder.constant``: a double
    Constant, then Cast), and the enclosing scopes' (a graph input hides an outer name). The one way the
    passes read a constant.

    Membership, ``tensor``, ``dtype`` and ``size`` read no payload; as a mapping it gives arrays, each
    converted on first read (``tensor_array``: a tensor in an external file is read from
    ``external_data_folder``, the model's folder, and only there), so a table that is only gathered from
    is never loaded. ``learn`` adds a value a pass computed (the WebNN target's folded shape arithmetic)."""

    def __init__(self, graph: GraphProto, outer: "ConstantView | None" = None,
                 external_data_folder: str | os.PathLike | None = None):
        inputs = {value.name for value in graph.input}
        self._outer, self._hidden = outer, inputs
        self.external_data_folder: str | os.PathLike | None = (external_data_folder if outer is None
                                                                else outer.external_data_folder)
        self._initializers: dict[str, TensorProto] = {t.name: t for t in graph.initializer if t.name not in inputs}
        self._tensors: dict[str, TensorProto] = dict(self._initializers)
        # The nodes are read on the first lookup past the initializers (``initializer`` alone reads none:
        # the session's bind step), only those the graph has now (a pass appends its replacements after them).
        self._graph, self._own, self._scanned = graph, len(graph.node), False

    def _scan(self) -> None:
        self._scanned = True
        self._arrays: dict[str, np.ndarray] = {}
        self._int64_casts: dict[str, str] = {}  # a Cast's output -> its float constant, converted on first read
        for node in itertools.islice(self._graph.node, self._own):
            if node.op_type == "Constant" and node.domain in ONNX_DOMAINS:
                for attribute in node.attribute:
                    if attribute.name == "value":
                        self._tensors[node.output[0]] = attribute.t
                    elif attribute.name == "value_ints":
                        self._arrays[node.output[0]] = np.array(attribute.ints, dtype=np.int64)
            elif (node.op_type == "Cast" and node.domain in ONNX_DOMAINS and node.input[0] in self._tensors
                  and next((a.i for a in node.attribute if a.name == "to"), 0) == TensorProto.INT64
                  and self._tensors[node.input[0]].data_type in _FLOAT_TYPES):
                self._int64_casts[node.output[0]] = node.input[0]

    def _view_of(self, name: str) -> "ConstantView | None":
        """The scope whose own constant ``name`` is (this one or an enclosing one), or None."""
        if not self._scanned:
            self._scan()
        if name in self._arrays or name in self._tensors or name in self._int64_casts:
            return self
        return None if self._outer is None or name in self._hidden else self._outer._view_of(name)

    def tensor(self, name: str) -> TensorProto | None:
        """The TensorProto of ``name`` (an initializer or a Constant's value), or None.

        Args:
            name: a value's name.

        Returns:
            The TensorProto (payload not read), or None.
        """
        view = self._view_of(name)
        return None if view is None else view._tensors.get(name)

    def initializer(self, name: str) -> TensorProto | None:
        """The TensorProto of ``name`` when it is an initializer of this scope itself (not an enclosing
        scope's, not a Constant's value; external data not read: its location is in the proto), or None.

        Args:
            name: a value's name.

        Returns:
            The TensorProto, or None.
        """
        return self._initializers.get(name)

    def dtype(self, name: str) -> np.dtype | None:
        """The element type of the constant ``name`` as NumPy's, read from its proto (no payload), or None.

        Args:
            name: a value's name.

        Returns:
            The NumPy dtype, or None (not a constant, or a type NumPy has no dtype for).
        """
        view = self._view_of(name)
        if view is None:
            return None
        if name in view._arrays:
            return view._arrays[name].dtype
        if name in view._int64_casts:
            return np.dtype(np.int64)
        try:
            return np.dtype(helper.tensor_dtype_to_np_dtype(view._tensors[name].data_type))
        except (KeyError, ValueError, TypeError):
            return None

    def size(self, name: str) -> int | None:
        """How many elements the constant ``name`` has, read from its proto (no payload), or None.

        Args:
            name: a value's name.

        Returns:
            The element count, or None (not a constant).
        """
        view = self._view_of(name)
        if view is None:
            return None
        if name in view._arrays:
            return int(view._arrays[name].size)
        return math.prod(view._tensors[view._int64_casts.get(name, name)].dims)

    def learn(self, name: str, value: np.ndarray) -> None:
        """Record ``value`` for ``name``: a value of this scope that a pass found constant.

        Args:
            name: the value's name.
            value: its values.
        """
        if not self._scanned:
            self._scan()
        self._arrays[name] = value

    def __getitem__(self, name: str) -> np.ndarray:
        view = self._view_of(name)
        if view is None:
            raise KeyError(name)
        if name not in view._arrays:
            if name in view._int64_casts:
                view._arrays[name] = view[view._int64_casts[name]].astype(np.int64)
            else:
                view._arrays[name] = tensor_array(view._tensors[name], self.external_data_folder)
        return view._arrays[name]

    def __contains__(self, name) -> bool:
        return self._view_of(name) is not None

    def __iter__(self) -> Iterator[str]:
        if not self._scanned:
            self._scan()
        outer = (n for n in (self._outer or ()) if n not in self._hidden)
        return iter(dict.fromkeys(itertools.chain(self._tensors, self._arrays, self._int64_casts, outer)))

    def __len__(self) -> int:
        return sum(1 for _ in self)


_FLOAT_TYPES = (TensorProto.DOUBLE, TensorProto.FLOAT, TensorProto.FLOAT16)


def tensor_array(tensor: TensorProto, external_data_folder: str | os.PathLike | None) -> np.ndarray:
    """The values of ``tensor`` as an array. A tensor kept in an external file is read from
    ``external_data_folder`` (the model's folder), after the checks ONNX Runtime makes
    (``modelfile.check_external_data``: never a file outside that folder, nor one of the wrong size),
    and never from the working folder: without a folder it is an ExternalDataError.

    Args:
        tensor: the tensor.
        external_data_folder: the model's folder, which external data locations are relative to; None
            when the model's folder is not known.

    Returns:
        The NumPy array, in the tensor's dims and element type.

    Raises:
        ExternalDataError: the tensor's data are external and ``external_data_folder`` is None, or its
            location fails ``check_external_data``.
    """
    if tensor.data_location != TensorProto.EXTERNAL:
        return numpy_helper.to_array(tensor)
    if external_data_folder is None:
        raise ExternalDataError(f"external data of {tensor.name!r}: the model's folder is not known, and its "
                                f"values are needed (give the pass the folder its locations are relative to)")
    where = check_external_data(tensor, external_data_folder)
    dtype = None
    if tensor.data_type not in (TensorProto.STRING, TensorProto.UNDEFINED):
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    count = math.prod(tensor.dims)
    if dtype is not None and count * dtype.itemsize == where.size:  # (not packed 4- or 2-bit values)
        # one read into the array, little-endian as ONNX stores it
        stored = np.fromfile(where.path, dtype=dtype.newbyteorder("<"), count=count, offset=where.offset)
        return stored.astype(dtype, copy=False).reshape(tuple(tensor.dims))
    with open(where.path, "rb") as file:
        file.seek(where.offset)
        payload = file.read(where.size)
    inline = TensorProto()
    inline.CopyFrom(tensor)
    del inline.external_data[:]
    inline.data_location = TensorProto.DEFAULT
    inline.raw_data = payload
    return numpy_helper.to_array(inline)


def names_read(graph: GraphProto) -> Iterator[str]:
    """Every name the nodes of ``graph`` and of its subgraphs read (a subgraph may read outer names).

    Args:
        graph: the graph.

    Returns:
        An iterator over the names, once per read (repeats included).
    """
    for node in nodes_within(graph.node):
        yield from node.input


def drop_unused(graph: GraphProto, candidates: list[NodeProto], names: AbstractSet[str] = frozenset(),
                cascade: bool = False, all_initializers: bool = True) -> frozenset[str]:
    """Remove each of ``candidates`` (nodes of ``graph``) whose outputs nothing reads, then the producers
    of what it read that nothing reads any more: among the candidates, or any node with ``cascade``.
    Then the initializers nothing reads: all of them, or (not ``all_initializers``) only those in
    ``names`` or read by a removed node. Graph outputs, and initializers that are graph inputs, stay.
    A worklist, and the node list rebuilt once: removing nodes one by one, or repeated passes, is
    quadratic (50k bound gathers took over 15 minutes). Returns ``names`` and the names the removed
    nodes read (which another graph may now produce for nothing), or nothing when nothing was removed.

    Args:
        graph: the graph, changed in place.
        candidates: nodes of ``graph`` that may be removed.
        names: names whose producers or initializers may be unused now.
        cascade: follow the reads to any node of ``graph``, not only the candidates.
        all_initializers: remove every unread initializer, not only those in ``names`` or read by a
            removed node.

    Returns:
        The frozenset of freed names (empty when nothing was removed).
    """
    uses: dict[str, int] = {}
    for name in names_read(graph):
        uses[name] = uses.get(name, 0) + 1
    for value in graph.output:
        uses[value.name] = uses.get(value.name, 0) + 1
    producer = {name: node for node in (graph.node if cascade else candidates) for name in node.output}
    work, dropped, freed = list(candidates), set(), set(names)
    while work:
        node = work.pop()
        if id(node) in dropped or not node.output or any(uses.get(name, 0) for name in node.output):
            continue
        dropped.add(id(node))
        for name in node.input:
            uses[name] -= 1
            freed.add(name)
            if name in producer:
                work.append(producer[name])
    if dropped:
        kept_nodes = [node for node in graph.node if id(node) not in dropped]
        del graph.node[:]
        graph.node.extend(kept_nodes)
    inputs = {value.name for value in graph.input}
    kept = [t for t in graph.initializer if uses.get(t.name, 0) or t.name in inputs
            or not (all_initializers or t.name in freed)]
    removed_initializers = len(kept) != len(graph.initializer)
    if removed_initializers:
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return frozenset(freed) if dropped or removed_initializers else frozenset()


__all__ = ["MOVING_OPS", "ONNX_DOMAINS", "ConstantView", "all_names", "attribute", "constant_value", "default_opset", "drop_unused", "holds_subgraph", "names_read",
           "moves_elements", "node_holders", "nodes_within", "round_trip_cast", "subgraphs", "tensor_array"]
