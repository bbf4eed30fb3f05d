"""``gathermultiaxis.InferenceSession``: an ``onnxruntime.InferenceSession`` for models with GatherMultiaxis.

The session takes the same arguments as ORT's and changes only its own in-memory copy of the model
(the file stays standard and self-contained):

* Every GatherMultiaxis node gets one more input, the hidden int64 scalar graph input ``RUN_TOKEN``,
  and becomes ``GatherMultiaxisRun``. Each run feeds a fresh token; the op records an error under it;
  the run wrapper (``run``, ``run_with_ort_values``, ``run_with_iobinding``, ``run_async``'s callback)
  pops that token's error and raises it (``run_async``: passes it as the
  callback's error argument). ``get_inputs()`` does not show the token.
* A node of the main graph whose data operand is a constant (an initializer that is not a graph input,
  or a Constant node, seen through Unsqueeze with constant axes and through the rewriter's Cast of a
  float16/bfloat16 table to float) becomes ``GatherMultiaxisBound<Type>(indices, axes, token)``: the
  table is handed to the kernel once (``ortop.BOUND_TABLES``, released with the session) instead of
  being copied through the bridge on every call. float16/bfloat16 tables stay 16-bit: the kernel
  gathers them as they are and widens only the gathered output to float32, which the Cast after the
  op turns back exactly. External-data tables are memory-mapped, after ``graphs.io.check_external_data``
  has checked their entry as ORT would (ORT never sees a bound table). Nodes and initializers that
  only fed a bound operand are dropped from the in-memory model.
* Other external data is not read: the model ORT gets keeps its references, and ORT maps them itself
  from the model's folder (``EXTERNAL_DATA_FOLDER``), with its own checks.
* Model-local functions holding GatherMultiaxis are inlined first, so that every node takes the token.
"""

from __future__ import annotations

import itertools
import os
import stat
import weakref
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
from onnx import AttributeProto, ModelProto, TensorProto, helper, numpy_helper
from onnx.external_data_helper import uses_external_data
from onnxruntime.capi import onnxruntime_inference_collection as _ort_collection
from onnxruntime.capi.onnxruntime_pybind11_state import Fail

from ..graphs.io import ExternalData, ExternalDataError, check_external_data, external_tensors
from ..graphs.rewrite import inline_functions_holding
from . import ortop
from .ortop import BOUND_TABLES, DOMAIN, OP_TYPE, RUN_ERRORS, RUN_OP_TYPE, BoundTable, bound_op_type

RUN_TOKEN = "gathermultiaxis::run_token"
# ORT's session config entry naming the folder external data is relative to (for a model given as bytes;
# it overrides the model file's own folder too).
EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"
_WIDENED = {TensorProto.FLOAT16: "float16", TensorProto.BFLOAT16: "bfloat16"}
_session_numbers = itertools.count(1)


@dataclass
class PreparedModel:
    """The in-memory model a session runs and the tables it binds."""

    model: ModelProto
    tokened: bool = False                                   # has the RUN_TOKEN input
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
        self.graph = graph
        inputs = {value.name for value in graph.input}
        self.initializers = {t.name: t for t in graph.initializer if t.name not in inputs}
        self.producer = {name: node for node in graph.node for name in node.output}
        self.bound_initializers: dict[str, tuple[np.ndarray, int]] = {}  # read by a bound operand
        self.uses: dict[str, int] = {}
        for node in graph.node:
            for name in node.input:
                self.uses[name] = self.uses.get(name, 0) + 1
            for attribute in node.attribute:
                for sub in _subgraphs(attribute):
                    for name in _names_read(sub):
                        self.uses[name] = self.uses.get(name, 0) + 1
        for value in graph.output:
            self.uses[value.name] = self.uses.get(value.name, 0) + 1

    def constant_ints(self, name: str) -> list[int] | None:
        resolved = self.resolve(name, base_dir=None)
        return None if resolved is None else [int(v) for v in np.asarray(resolved[0]).reshape(-1)]

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
            value = next((a for a in node.attribute if a.name == "value" and a.type == AttributeProto.TENSOR), None)
            if value is None:
                return None
            found = _tensor_array(value.t, base_dir)
        elif node.op_type == "Unsqueeze":
            axes_attribute = next((a for a in node.attribute if a.name == "axes"), None)
            axes = (list(axes_attribute.ints) if axes_attribute is not None
                    else self.constant_ints(node.input[1]) if len(node.input) > 1 else None)
            found = self.resolve(node.input[0], base_dir, chain) if axes is not None else None
            if found is not None:
                found = (np.expand_dims(found[0], tuple(axes)), found[1])
        elif node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), None)
            found = self.resolve(node.input[0], base_dir, chain) if to == TensorProto.FLOAT else None
            if found is not None and found[1] is None:
                found = None  # only the widening of a 16-bit float table is folded into the kernel
        else:
            return None
        if found is not None and chain is not None:
            chain.append(node)
        return found


def _subgraphs(attribute: AttributeProto):
    if attribute.type == AttributeProto.GRAPH:
        yield attribute.g
    elif attribute.type == AttributeProto.GRAPHS:
        yield from attribute.graphs


def _names_read(graph: onnx.GraphProto):
    for node in graph.node:
        yield from node.input
        for attribute in node.attribute:
            for sub in _subgraphs(attribute):
                yield from _names_read(sub)


def _gather_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        if node.op_type == OP_TYPE and node.domain == DOMAIN:
            yield graph, node
        for attribute in node.attribute:
            for sub in _subgraphs(attribute):
                yield from _gather_nodes(sub)


def _drop_unused(info: _Graph, candidates: list) -> None:
    """Remove ``candidates`` (nodes that fed a bound operand) and initializers nothing reads any more."""
    graph = info.graph
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
        for attribute in node.attribute:
            for sub in _subgraphs(attribute):
                for name in _names_read(sub):
                    uses[name] = uses.get(name, 0) + 1
    for value in graph.output:
        uses[value.name] = uses.get(value.name, 0) + 1
    changed = True
    pending = {id(node): node for node in candidates}
    pending.update((id(node), node) for node in graph.node if node.op_type == "Constant" and node.domain == "")
    while changed:
        changed = False
        for key, node in list(pending.items()):
            if all(uses.get(name, 0) == 0 for name in node.output):
                graph.node.remove(node)
                for name in node.input:
                    uses[name] -= 1
                del pending[key]
                changed = True
    inputs = {v.name for v in graph.input}  # once, not once per initializer
    kept = [t for t in graph.initializer if uses.get(t.name, 0) or t.name in inputs]
    if len(kept) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(kept)


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


def prepare_model(model: ModelProto, base_dir: str | None = None, bind: bool = True) -> PreparedModel:
    """Turn ``model`` (changed in place: pass a copy) into what the session runs: see the module docstring.
    ``base_dir``: the folder external data is relative to (None: tables in external data are not bound)."""
    if model.functions:
        model = _inline_gather_functions(model)
    nodes = list(_gather_nodes(model.graph))
    prepared = PreparedModel(model)
    if not nodes:
        return prepared
    prepared.tokened = True
    model.graph.input.append(helper.make_tensor_value_info(RUN_TOKEN, TensorProto.INT64, []))
    session_number = next(_session_numbers)
    info = _Graph(model.graph) if bind else None
    chain: list = []
    crosses_bridge = False
    for number, (graph, node) in enumerate(nodes):
        bound = None
        if info is not None and graph is model.graph:
            passed: list = []
            bound = info.resolve(node.input[0], base_dir, passed)
            if bound is not None:
                chain.extend(passed)
        if bound is None:
            crosses_bridge = True
            node.op_type = RUN_OP_TYPE
            node.input.append(RUN_TOKEN)
            continue
        array, widen = bound
        table = BoundTable(array, widen)
        key = f"session{session_number}/{number}"
        prepared.tables[key] = table
        output_type = (TensorProto.STRING if array.dtype == object
                       else helper.np_dtype_to_tensor_dtype(table.output_dtype()))
        mode = next((a.s.decode() for a in node.attribute if a.name == "mode"), None)
        replacement = helper.make_node(bound_op_type(output_type), [node.input[1], node.input[2], RUN_TOKEN],
                                       list(node.output), name=node.name, domain=DOMAIN, table=key,
                                       **({} if mode is None else {"mode": mode}))
        node.CopyFrom(replacement)
    if info is not None:
        _drop_unused(info, chain)
        kept = {tensor.name for tensor in model.graph.initializer}
        prepared.shared = {name: value for name, value in info.bound_initializers.items()
                           if name in kept and value[0].dtype != object}
    if crosses_bridge:  # a string fed in may reach a GatherMultiaxisRun node, whose bridge cuts it at a NUL
        prepared.string_inputs = [value.name for value in model.graph.input
                                  if value.type.tensor_type.elem_type == TensorProto.STRING]
    return prepared


def _load(path_or_bytes) -> tuple[ModelProto, str | None]:
    """The model without its external data, and the folder of its file (None for bytes or a ModelProto)."""
    if isinstance(path_or_bytes, ModelProto):
        model = ModelProto()
        model.CopyFrom(path_or_bytes)
        return model, None
    if isinstance(path_or_bytes, (bytes, bytearray)):
        return onnx.load_from_string(bytes(path_or_bytes)), None
    if isinstance(path_or_bytes, (str, os.PathLike)):
        path = os.fspath(path_or_bytes)
        return onnx.load(path, load_external_data=False), os.path.dirname(os.path.abspath(path))
    raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")


def _configured_folder(options: ort.SessionOptions | None) -> str:
    if options is None:
        return ""
    try:
        return options.get_session_config_entry(EXTERNAL_DATA_FOLDER)
    except RuntimeError:  # not set
        return ""


def _external_data_folder(model_folder: str | None, options: ort.SessionOptions | None) -> str | None:
    """The folder ORT reads external data from: the options' EXTERNAL_DATA_FOLDER entry when set, else
    the model file's folder; None for a model given as bytes without the entry (ORT then uses the
    working folder, and the session binds no external table)."""
    return _configured_folder(options) or model_folder


class _ExternalDataFolder:
    """Points ``options`` at ``folder`` while ORT creates the session from the prepared model's bytes, so
    that ORT reads (memory-maps) the external data it still references itself, from the model's own
    folder and with its own checks. Options the caller keeps using get their entry back afterwards
    ("" is ORT's default: the working folder)."""

    def __init__(self, options: ort.SessionOptions, folder: str | None, model: ModelProto, owned: bool):
        self.options, self.restore = options, None
        if folder is None or not external_tensors(model):
            return
        before = _configured_folder(options)
        if before != folder:
            options.add_session_config_entry(EXTERNAL_DATA_FOLDER, folder)
            self.restore = None if owned else before

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.restore is not None:
            self.options.add_session_config_entry(EXTERNAL_DATA_FOLDER, self.restore)


# The public SessionOptions properties, copied onto the session's own options.
_OPTION_PROPERTIES = ("enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "enable_profiling",
                      "execution_mode", "execution_order", "graph_optimization_level", "inter_op_num_threads",
                      "intra_op_num_threads", "log_severity_level", "log_verbosity_level", "logid",
                      "optimized_model_filepath", "profile_file_prefix", "use_deterministic_compute",
                      "use_per_session_threads")


def own_options(options: ort.SessionOptions | None) -> ort.SessionOptions:
    """The options the session is created with: ``options`` itself when ``session_options()`` registered the
    library on it, else a copy of its public properties with the library registered.

    Why a copy: onnxruntime-extensions (0.15) crashes at session creation on options where its library
    was registered before a PyOp was defined (the user's own registration, for its tokenizers, say, made
    before gathermultiaxis defined its op types), and refuses options registered twice. A copy has
    neither problem; the library registered on it brings the extensions' own ops too. What ORT gives no
    way to read (session config entries, initializers, custom op libraries added to ``options``) is
    not copied: see the README."""
    if options is not None and ortop.registered_by_us(options):
        return options
    copy = ort.SessionOptions()
    if options is not None:
        for name in _OPTION_PROPERTIES:
            setattr(copy, name, getattr(options, name))
    _own_copies.add(copy)
    return ortop.register_library(copy)


_own_copies: "weakref.WeakSet[ort.SessionOptions]" = weakref.WeakSet()


def _ort_method(name: str):
    """onnxruntime's own Session method, without the plain op's error channel that session_options()
    installs (this session's errors travel by token)."""
    method = getattr(_ort_collection.Session, name)
    return method.__wrapped__ if getattr(method, "_gathermultiaxis_guard", False) else method


def _release(keys) -> None:
    for key in keys:
        BOUND_TABLES.pop(key, None)


class InferenceSession(ort.InferenceSession):
    """``onnxruntime.InferenceSession`` for models holding GatherMultiaxis nodes (see the module docstring).

    Same arguments as ORT's (``path_or_bytes`` may also be a ``ModelProto``); ``bind_constants=False``
    keeps every data operand on the bridge. The session runs on its own copy of ``sess_options`` (see
    ``own_options``).
    """

    def __init__(self, path_or_bytes, sess_options: ort.SessionOptions | None = None, providers=None,
                 provider_options=None, bind_constants: bool = True, **kwargs):
        if isinstance(path_or_bytes, (str, os.PathLike)) and os.fspath(path_or_bytes).endswith(".ort"):
            raise ValueError("ORT format models are not supported: pass the ONNX model")
        model, model_folder = _load(path_or_bytes)
        folder = _external_data_folder(model_folder, sess_options)
        try:
            prepared = prepare_model(model, folder, bind=bind_constants)
        except ExternalDataError as error:  # ORT's exception type for the same refusal
            raise Fail(f"cannot load the model: {error}") from error
        self._gathermultiaxis_token = prepared.tokened
        self._gathermultiaxis_string_inputs = prepared.string_inputs
        self._gathermultiaxis_tables = list(prepared.tables)
        BOUND_TABLES.update(prepared.tables)
        self._gathermultiaxis_release = weakref.finalize(self, _release, list(prepared.tables))
        options = own_options(sess_options)
        self._gathermultiaxis_shared = []  # OrtValues over bound arrays that ORT reads too: alive with the session
        if options in _own_copies:  # never add initializers to options the caller keeps using
            for name, (array, elem_type) in prepared.shared.items():
                value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(array), elem_type)
                options.add_initializer(name, value)
                self._gathermultiaxis_shared.append(value)
        # External data not bound stays external: ORT maps it from ``folder`` (the bytes stay small).
        pointed = _ExternalDataFolder(options, folder, prepared.model, owned=options in _own_copies)
        serialized = prepared.model.SerializeToString()
        del model, prepared
        with pointed:
            super().__init__(serialized, options, providers, provider_options, **kwargs)

    @property
    def bound_tables(self) -> int:
        """How many constant data operands this session handed to the kernel."""
        return len(self._gathermultiaxis_tables)

    def get_inputs(self):
        return [value for value in super().get_inputs() if value.name != RUN_TOKEN]

    # ------------------------------------------------------------ run APIs
    def _token(self):
        return RUN_ERRORS.new_token() if self._gathermultiaxis_token else None

    @staticmethod
    def _finish(token, result):
        error = RUN_ERRORS.pop(token) if token is not None else None
        if error is not None:
            raise error
        return result

    def _guarded(self, token, call):
        try:
            result = call()
        except BaseException as exc:
            error = RUN_ERRORS.pop(token) if token is not None else None
            if error is None:
                raise
            raise error from exc
        return self._finish(token, result)

    def _check_strings(self, input_feed) -> None:
        for name in self._gathermultiaxis_string_inputs:
            value = input_feed.get(name)
            if value is None:
                continue
            values = np.asarray(value)
            if values.dtype.kind in "OU" and any("\x00" in v if isinstance(v, str) else b"\x00" in v
                                                  for v in values.reshape(-1).tolist()
                                                  if isinstance(v, (str, bytes))):
                raise ValueError(f"input {name!r}: {ortop.NUL_LIMIT}")

    def run(self, output_names, input_feed, run_options=None):
        self._check_strings(input_feed)
        token = self._token()
        if token is not None:
            input_feed = {**input_feed, RUN_TOKEN: np.array(token, dtype=np.int64)}
        return self._guarded(token, lambda: _ort_method("run")(self, output_names, input_feed, run_options))

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        token = self._token()
        if token is not None:
            input_dict_ort_values = {**input_dict_ort_values,
                                     RUN_TOKEN: ort.OrtValue.ortvalue_from_numpy(np.array(token, dtype=np.int64))}
        return self._guarded(token, lambda: _ort_method("run_with_ort_values")(
            self, output_names, input_dict_ort_values, run_options))

    def run_with_iobinding(self, iobinding, run_options=None):
        token = self._token()
        if token is not None:
            value = np.array(token, dtype=np.int64)  # alive until the run returns
            iobinding.bind_cpu_input(RUN_TOKEN, value)
        return self._guarded(token, lambda: _ort_method("run_with_iobinding")(self, iobinding, run_options))

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None):
        self._check_strings(input_feed)
        token = self._token()
        if token is None:
            return super().run_async(output_names, input_feed, callback, user_data, run_options)
        input_feed = {**input_feed, RUN_TOKEN: np.array(token, dtype=np.int64)}

        def finished(results, data, err):
            error = RUN_ERRORS.pop(token)
            if error is not None:
                err = f"{type(error).__name__}: {error}" + (f" ({err})" if err else "")
            callback(results, data, err)

        return super().run_async(output_names, input_feed, finished, user_data, run_options)
