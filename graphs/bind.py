"""The session's bind step: the in-memory model ``gathermultiaxis.InferenceSession`` runs, made from a
rewritten model (a pass over the graph, like the rewrite and the lowering; the session module only
runs what this returns).

What it changes in the session's in-memory copy of the model (the file stays standard and
self-contained):

* Every GatherMultiaxis node gets one more input, a hidden int64 scalar graph input (``RUN_TOKEN``, or
  ``RUN_TOKEN_n`` when the model already has that name), and becomes ``GatherMultiaxisRun``, or
  ``GatherMultiaxisRunFixedAxes`` when its axes are constant (they travel as an attribute). Each run
  feeds a fresh token; the op records an error under it; the run wrapper (``run``,
  ``run_with_ort_values``, ``run_with_iobinding``, ``run_with_ortvaluevector``, ``run_async``'s
  callback) pops that token's error and raises it (``run_async``: passes it as the callback's error
  argument). Neither ``get_inputs()`` nor ORT's missing-input message shows the token.
* A node of the main graph whose data operand is a constant (an initializer that is not a graph input,
  or a Constant node, seen through Unsqueeze with constant axes and through the rewriter's Cast of a
  float16/bfloat16 table to float) and whose axes are constant becomes
  ``GatherMultiaxisBound<Type>(indices, token)``: the table, axes, mode and the indices' alignment
  Unsqueeze (absorbed) are handed to the kernel once (``PreparedModel.tables``, which the session
  holds) instead of being copied through the bridge on every call. float16 tables are gathered and
  returned as float16 (the Cast back is dropped); bfloat16 tables are gathered as they are and only the
  gathered output is widened to float32, which the Cast after the op turns back exactly. A float16
  graph input crossing the bridge (widened by ORT's exact Cast) comes back as float16 from
  ``GatherMultiaxisRunFixedAxesToFloat16``. External-data tables are memory-mapped, after
  ``graphs.modelfile.check_external_data`` has checked their entry as ORT would (ORT never sees a bound
  table). Nodes and initializers that only fed a bound operand are dropped from the in-memory model.
* Other external data is not read: the model ORT gets keeps its references, and ORT maps them itself
  from the model's folder (``EXTERNAL_DATA_FOLDER``), with its own checks.
* Model-local functions holding GatherMultiaxis are inlined first, so that every node takes the token.
"""

from __future__ import annotations

import itertools
import os
import stat
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from ..ops.contract import DOMAIN, OP_TYPE
from ..ops.run_ops import (FIXED_RUN_OP_TYPE, NARROWING_RUN_OP_TYPE, RUN_OP_TYPE, BoundTable, axes_attribute,
                           bound_op_type)
from .modelfile import ExternalData, ExternalDataError, check_external_data
from .passes import inline_functions_holding
from .walk import all_names, attribute, drop_unused, names_read, nodes_with_graph, round_trip_cast, subgraphs

RUN_TOKEN = "gathermultiaxis::run_token"
_session_numbers = itertools.count(1)  # bound tables are keyed "session<n>/<node number>"
_WIDENED = {TensorProto.FLOAT16: "float16", TensorProto.BFLOAT16: "bfloat16"}


@dataclass
class PreparedModel:
    """The in-memory model a session runs and the tables it binds."""

    model: ModelProto
    tokened: bool = False                                   # has the hidden run-token input
    token: str = ""                                         # its name (RUN_TOKEN, or RUN_TOKEN_n if taken)
    tables: dict[str, BoundTable] = field(default_factory=dict)
    string_inputs: list[str] = field(default_factory=list)  # checked for NUL when data crosses the bridge
    shared: dict[str, tuple[np.ndarray, int]] = field(default_factory=dict)  # bound initializers ORT still
    # reads elsewhere: (array, ONNX type), handed to ORT with SessionOptions.add_initializer (one buffer)


# ---------------------------------------------------------------- constant operands

def _tensor_array(tensor: TensorProto, base_dir: str | None) -> tuple[np.ndarray, str | None] | None:
    """A tensor's values without an extra copy where possible, and the 16-bit float format of its
    raw values (float16/bfloat16 are kept raw: float16 as numpy float16, bfloat16 as uint16 bits)."""
    widen = _WIDENED.get(tensor.data_type)
    if uses_external_data(tensor):
        if base_dir is None:
            return None
        dtype = (np.dtype(np.uint16) if tensor.data_type == TensorProto.BFLOAT16
                 else helper.tensor_dtype_to_np_dtype(tensor.data_type))
        if dtype == object:
            return None
        return _mapped(tensor.name, check_external_data(tensor, base_dir), dtype, tuple(tensor.dims)), widen
    if tensor.data_type == TensorProto.STRING:
        decoded = []
        for value in tensor.string_data:
            try:  # like ORT: undecodable bytes stay bytes, and fail as builtin does when returned
                decoded.append(value.decode("utf-8"))
            except UnicodeDecodeError:
                decoded.append(value)
        array = np.empty(len(decoded), dtype=object)
        array[:] = decoded
        return array.reshape(tuple(tensor.dims)), None
    if tensor.data_type == TensorProto.BFLOAT16:
        if tensor.HasField("raw_data"):
            return np.frombuffer(tensor.raw_data, dtype=np.uint16).reshape(tuple(tensor.dims)), widen
        return np.asarray(tensor.int32_data, dtype=np.uint32).astype(np.uint16).reshape(tuple(tensor.dims)), widen
    if tensor.HasField("raw_data") and tensor.data_type != TensorProto.BOOL:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
        array = np.frombuffer(tensor.raw_data, dtype=dtype).reshape(tuple(tensor.dims))  # one copy: the bytes
        return array.astype(array.dtype.newbyteorder("=")) if not array.dtype.isnative else array, widen
    return numpy_helper.to_array(tensor), widen


def _mapped(name: str, where: ExternalData, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The external bytes of tensor ``name`` (checked by ``check_external_data``) as a read-only
    memory-mapped array. The file is opened without blocking and checked again once open: it may have
    been replaced (by a FIFO, say) since it was checked."""
    if where.size == 0:
        return np.zeros(shape, dtype)
    descriptor = os.open(where.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(descriptor, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode) or where.offset + where.size > status.st_size:
            raise ExternalDataError(f"external data file of {name!r} changed while the model was loaded")
        return np.memmap(file, dtype=dtype, mode="r", offset=where.offset, shape=shape)


class _Graph:
    """Producers, consumers and initializers of one graph, with names used by its subgraphs."""

    def __init__(self, graph: onnx.GraphProto):
        inputs = {value.name for value in graph.input}
        self.initializers = {t.name: t for t in graph.initializer if t.name not in inputs}
        self.producer = {name: node for node in graph.node for name in node.output}
        self.bound_initializers: dict[str, tuple[np.ndarray, int]] = {}  # read by a bound operand
        self.uses: dict[str, int] = {}
        for node in graph.node:
            for name in node.input:
                self.uses[name] = self.uses.get(name, 0) + 1
            for proto in node.attribute:
                for sub in subgraphs(proto):
                    for name in names_read(sub):
                        self.uses[name] = self.uses.get(name, 0) + 1
        for value in graph.output:
            self.uses[value.name] = self.uses.get(value.name, 0) + 1

    def constant_ints(self, name: str) -> list[int] | None:
        resolved = self.resolve(name, base_dir=None)
        return None if resolved is None else [int(v) for v in np.asarray(resolved[0]).reshape(-1)]

    def unsqueeze_axes(self, node: onnx.NodeProto) -> list[int] | None:
        """An Unsqueeze's axes when they are constant (its attribute before opset 13, its second input
        from 13 on), else None."""
        axes = attribute(node, "axes")
        if axes is None and len(node.input) > 1:
            axes = self.constant_ints(node.input[1])
        return axes if isinstance(axes, list) else None  # not a list: an ill-typed attribute

    def resolve(self, name: str, base_dir: str | None, chain: list | None = None):
        """(array, widen) when ``name`` is a constant seen through Unsqueeze and a widening Cast, else None.
        Appends the nodes passed through to ``chain``."""
        if name in self.initializers:
            found = _tensor_array(self.initializers[name], base_dir)
            if found is not None and chain is not None:
                self.bound_initializers[name] = (found[0], self.initializers[name].data_type)
            return found
        node = self.producer.get(name)
        if node is None or node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type == "Constant":
            value = attribute(node, "value")
            if not isinstance(value, TensorProto):
                return None
            found = _tensor_array(value, base_dir)
        elif node.op_type == "Unsqueeze":
            axes = self.unsqueeze_axes(node)
            found = self.resolve(node.input[0], base_dir, chain) if axes is not None else None
            if found is not None:
                found = (np.expand_dims(found[0], tuple(axes)), found[1])
        elif node.op_type == "Cast":
            to = attribute(node, "to")
            found = self.resolve(node.input[0], base_dir, chain) if to == TensorProto.FLOAT else None
            if found is not None and found[1] is None:
                found = None  # only the widening of a 16-bit float table is folded into the kernel
        else:
            return None
        if found is not None and chain is not None:
            chain.append(node)
        return found


def _gather_nodes(graph: onnx.GraphProto):
    return ((holder, node) for holder, node in nodes_with_graph(graph) if node.op_type == OP_TYPE and node.domain == DOMAIN)


def _is_gather(node: onnx.NodeProto) -> bool:
    return node.op_type == OP_TYPE and node.domain == DOMAIN


def _inline_gather_functions(model: ModelProto) -> ModelProto:
    """``model`` with the model-local functions that hold a GatherMultiaxis node inlined (as the rewriter
    does), so that every such node is in a graph and takes the run token: a function body cannot see
    the token, and a node without it would report its error to no run."""
    ir_version = model.ir_version
    inlined, failure = inline_functions_holding(model, _is_gather)
    if failure:
        holding = sorted(f.name for f in model.functions if any(_is_gather(n) for n in f.node))
        raise ValueError(f"{OP_TYPE} inside model-local functions {holding}: {failure}")
    inlined.ir_version = ir_version
    return inlined


# Node forms of the bind step that can be switched off, for `bench --runtime`'s breakdown of what each buys:
# constant axes as an attribute, the indices' alignment Unsqueeze absorbed into bound nodes, float16 outputs.
BIND_FORMS = {"fixed_axes": True, "absorb_alignment": True, "float16_output": True}


def _token_name(model: ModelProto) -> str:
    """A name for the hidden run-token input that no value of ``model`` has."""
    taken = all_names(model)
    name, number = RUN_TOKEN, itertools.count(1)
    while name in taken:
        name = f"{RUN_TOKEN}_{next(number)}"
    return name


def _unsqueezed(info: _Graph, name: str) -> tuple[str, tuple[int, ...]] | None:
    """(input, axes) when ``name`` is the output of an Unsqueeze with constant axes that nothing else reads
    (the rewriter's alignment of the indices), else None."""
    node = info.producer.get(name)
    if node is None or node.op_type != "Unsqueeze" or node.domain not in ("", "ai.onnx") or info.uses.get(name) != 1:
        return None
    axes = info.unsqueeze_axes(node)
    return None if axes is None else (node.input[0], tuple(axes))


def _float16_cast_after(info: _Graph, consumers: dict, name: str) -> onnx.NodeProto | None:
    """The Cast to float16 that is the only reader of ``name`` (the rewriter's way back from float32)."""
    readers = consumers.get(name, [])
    if len(readers) != 1 or info.uses.get(name) != 1:
        return None
    return readers[0] if round_trip_cast(readers[0], TensorProto.FLOAT16) else None


def _elem_types(graph: onnx.GraphProto) -> dict[str, int]:
    types = {value.name: value.type.tensor_type.elem_type for values in (graph.input, graph.value_info, graph.output)
             for value in values if value.type.HasField("tensor_type")}
    types.update((tensor.name, tensor.data_type) for tensor in graph.initializer)
    return types


def _widened_float16(info: _Graph, types: dict, name: str) -> bool:
    """Whether ``name`` is a Cast to float of a float16 value (exact: every value it holds is a float16 one)."""
    cast = info.producer.get(name)
    return round_trip_cast(cast) and types.get(cast.input[0]) == TensorProto.FLOAT16


def _fixed_axes(infos: dict, graph: onnx.GraphProto, name: str) -> tuple[int, ...] | None:
    """The constant axes ``name`` holds in ``graph`` (seen by the graph itself), or None."""
    info = infos.get(id(graph))
    if info is None:
        info = infos[id(graph)] = _Graph(graph)
    try:
        resolved = info.resolve(name, base_dir=None)
    except Exception:  # noqa: BLE001 - an unreadable constant: leave the axes to the run, which reports it
        return None
    if resolved is None:
        return None
    values = np.asarray(resolved[0])
    if values.dtype != np.int64 or values.ndim != 1:  # not the op's 1-D int64: stays an input, which ORT refuses
        return None
    return tuple(int(v) for v in values)


def prepare_model(model: ModelProto, base_dir: str | None = None, bind: bool = True, *,
                  float16_outputs: bool) -> PreparedModel:
    """Turn ``model`` (changed in place: pass a copy) into what the session runs: see the module docstring.
    ``base_dir``: the folder external data is relative to (None: tables in external data are not bound).
    ``float16_outputs``: whether the op may return float16 (the installed PyOp bridge hands arrays back:
    ``ortop.bridge_info()["handback_supported"]``, which the session asks)."""
    if model.functions:
        model = _inline_gather_functions(model)
    nodes = list(_gather_nodes(model.graph))
    prepared = PreparedModel(model)
    if not nodes:
        return prepared
    prepared.tokened = True
    token = prepared.token = _token_name(model)
    model.graph.input.append(helper.make_tensor_value_info(token, TensorProto.INT64, []))
    session_number = next(_session_numbers)
    info = _Graph(model.graph)
    infos = {id(model.graph): info}
    consumers: dict[str, list] = {}
    for graph_node in model.graph.node:
        for name in graph_node.input:
            consumers.setdefault(name, []).append(graph_node)
    narrow_float16 = float16_outputs and BIND_FORMS["float16_output"]
    types = _elem_types(model.graph) if narrow_float16 else {}
    chain: list = []
    dropped_value_info: set = set()
    crosses_bridge = False
    for number, (graph, node) in enumerate(nodes):
        mode = attribute(node, "mode")
        axes = _fixed_axes(infos, graph, node.input[2]) if len(node.input) > 2 and node.input[2] else None
        bound = None
        if bind and graph is model.graph and axes is not None and mode is not None:
            passed: list = []
            bound = info.resolve(node.input[0], base_dir, passed)
            if bound is not None:
                chain.extend(passed)
        if bound is None:
            crosses_bridge = True
            if axes is None or not BIND_FORMS["fixed_axes"]:
                node.op_type = RUN_OP_TYPE
                node.input.append(token)
            else:  # constant axes travel as an attribute: one input less to copy per call
                op_type, outputs = FIXED_RUN_OP_TYPE, list(node.output)
                cast = (_float16_cast_after(info, consumers, outputs[0])
                        if graph is model.graph and _widened_float16(info, types, node.input[0]) else None)
                if cast is not None:  # float16 data, widened to cross the bridge: back to float16 in the op
                    op_type, outputs = NARROWING_RUN_OP_TYPE, [cast.output[0]]
                    dropped_value_info.add(node.output[0])
                    model.graph.node.remove(cast)
                replacement = helper.make_node(op_type, [node.input[0], node.input[1], token],
                                               outputs, name=node.name, domain=DOMAIN,
                                               axes=axes_attribute(axes),
                                               **({} if mode is None else {"mode": mode}))
                node.CopyFrom(replacement)
            continue
        array, widen = bound
        indices, indices_axes = node.input[1], ()
        unsqueezed = _unsqueezed(info, indices) if BIND_FORMS["absorb_alignment"] else None
        if unsqueezed is not None:  # the alignment Unsqueeze of the indices: a free view in the kernel
            indices, indices_axes = unsqueezed
            chain.append(info.producer[node.input[1]])
        outputs = list(node.output)
        cast = _float16_cast_after(info, consumers, outputs[0]) if widen == "float16" and narrow_float16 else None
        if cast is not None:  # the gathered rows stay float16: no widening, no Cast back
            widen = None
            dropped_value_info.add(outputs[0])
            outputs = [cast.output[0]]
            model.graph.node.remove(cast)
        table = BoundTable(array, widen, axes, mode, indices_axes)
        key = f"session{session_number}/{number}"
        prepared.tables[key] = table
        output_type = (TensorProto.STRING if array.dtype == object
                       else helper.np_dtype_to_tensor_dtype(table.output_dtype()))
        replacement = helper.make_node(bound_op_type(output_type), [indices, token], outputs, name=node.name,
                                       domain=DOMAIN, table=key)
        node.CopyFrom(replacement)
    if dropped_value_info:
        kept_info = [value for value in model.graph.value_info if value.name not in dropped_value_info]
        del model.graph.value_info[:]
        model.graph.value_info.extend(kept_info)
    if bind:  # the nodes that fed a bound operand, and the Constants and initializers nothing reads any more
        constants = [node for node in model.graph.node if node.op_type == "Constant" and node.domain == ""]
        drop_unused(model.graph, chain + constants)
        kept = {tensor.name for tensor in model.graph.initializer}
        prepared.shared = {name: value for name, value in info.bound_initializers.items()
                           if name in kept and value[0].dtype != object}
    if crosses_bridge:  # a string fed in may reach a GatherMultiaxisRun node, whose bridge cuts it at a NUL
        prepared.string_inputs = [value.name for value in model.graph.input
                                  if value.type.tensor_type.elem_type == TensorProto.STRING]
    return prepared




__all__ = ["BIND_FORMS", "RUN_TOKEN", "PreparedModel", "prepare_model"]
