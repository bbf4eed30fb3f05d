"""GatherMultiaxis as an ONNX Runtime custom operator, through onnxruntime-extensions' PyOp bridge.

Node signature (domain ``ai.onnx.contrib``, version 1), the one model files carry::

    output = GatherMultiaxis(input, indices, axes, mode="error")
      input   T     any type in DATA_TYPES (not float16/bfloat16: the bridge cannot carry them)
      indices int32 or int64, same rank as input
      axes    int64 1-D tensor
      mode    string attribute, required on the node: "error", "zero" or "clamp"

Two more op types exist only inside the in-memory model of a ``gathermultiaxis.InferenceSession``
(``ops/session.py``), never in a file::

    output = GatherMultiaxisRun(input, indices, axes, run_token, mode)          # data through the bridge
    output = GatherMultiaxisBound<Type>(indices, axes, run_token, mode, table)  # data bound once (BOUND_TABLES)

``run_token`` is an int64 scalar the session feeds on every run: an error is recorded under it and the
session's run wrapper raises it, so each error belongs to the run that caused it in every run API and
execution mode.

Properties of the bridge (onnxruntime-extensions 0.15, ORT 1.31) that shape this module:

* Any C++ exception leaving a PyOp (a Python exception included) ends the process with
  ``std::terminate``. So the op never raises: it records the error and returns an output of the
  right shape and type (zeros; the shape is known for index errors) so that nothing downstream
  (Squeeze, Scan outputs, pre-allocated IOBinding outputs) aborts on a placeholder.
* Plain ``GatherMultiaxis`` nodes (sessions built by the user with ``session_options()``) have no
  token: their errors go through a per-thread channel and a wrapper of ``onnxruntime``'s
  ``Session.run*`` methods installed by the first ``session_options()`` call, never by import. That
  path cannot attribute errors under ``ExecutionMode.ORT_PARALLEL`` (ORT pool threads) or
  ``run_async``: see the README.
* The default return path converts every output to a Python list (6x slower on large outputs). The
  bridge copies any array with ``memcpy``, so the op hands back the C-contiguous array itself, wrapped
  so that the bridge's ``rv.flatten().tolist()`` yields it. A self-test against the installed bridge
  decides at registration whether that works; otherwise outputs go the list path, uint64 as int64 bits
  (a list of Python ints above 2**63 would come back through float64).
* Strings cross the bridge as C strings in both directions: a NUL character ends them. The op refuses
  to return a string holding NUL (a clear error instead of a truncated value).
"""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
from onnx import TensorProto
from onnxruntime.capi import onnxruntime_inference_collection as _ort_collection
from . import extensions  # noqa: F401, I001 - first: onnxruntime_extensions without transformers/torch
from onnxruntime_extensions import PyCustomOpDef, get_library_path, onnx_op
from onnxruntime_extensions import _ocos

from .geometry import GatherGeometry, normalize_axes
from .kernel import GatherIndexError, gather_multiaxis
from .signature import DATA_TYPES, DOMAIN, INDEX_TYPES, OP_TYPE

RUN_OP_TYPE = "GatherMultiaxisRun"
BOUND_OP_PREFIX = "GatherMultiaxisBound"

# ONNX element type -> PyOp bridge type (the signature and its types: ops/signature.py).
_BRIDGE_TYPES = {
    TensorProto.FLOAT: PyCustomOpDef.dt_float,
    TensorProto.DOUBLE: PyCustomOpDef.dt_double,
    TensorProto.INT8: PyCustomOpDef.dt_int8,
    TensorProto.INT16: PyCustomOpDef.dt_int16,
    TensorProto.INT32: PyCustomOpDef.dt_int32,
    TensorProto.INT64: PyCustomOpDef.dt_int64,
    TensorProto.UINT8: PyCustomOpDef.dt_uint8,
    TensorProto.UINT16: PyCustomOpDef.dt_uint16,
    TensorProto.UINT32: PyCustomOpDef.dt_uint32,
    TensorProto.UINT64: PyCustomOpDef.dt_uint64,
    TensorProto.BOOL: PyCustomOpDef.dt_bool,
    TensorProto.STRING: PyCustomOpDef.dt_string,
}


def bound_op_type(elem_type: int) -> str:
    """The op type of a bound gather whose output has ONNX type ``elem_type``, e.g. GatherMultiaxisBoundFloat.
    (One op type per output type: a bound node has no data input from which ORT could pick the type.)"""
    return BOUND_OP_PREFIX + TensorProto.DataType.Name(elem_type).capitalize()


def _rebuilt(error: BaseException) -> BaseException:
    """A fresh exception of the same type and message, naming the op."""
    message = f"{OP_TYPE}: {error}"
    try:
        return type(error)(message)
    except Exception:  # an exception type whose constructor takes other arguments
        return RuntimeError(message)


class RunErrors:
    """Errors of the token-taking op types, kept under the run token until that run's wrapper pops them.

    ``dict.setdefault`` and ``dict.pop`` are atomic under the GIL, so no lock is needed; the first
    error of a run wins (a run can hold several GatherMultiaxis nodes)."""

    def __init__(self):
        self._errors: dict[int, BaseException] = {}
        self._tokens = itertools.count(1)

    def new_token(self) -> int:
        return next(self._tokens)

    def record(self, token: int, error: BaseException) -> None:
        self._errors.setdefault(token, error)

    def pop(self, token: int) -> BaseException | None:
        """The error of run ``token`` rebuilt to name the op, or None; forgets it."""
        error = self._errors.pop(token, None)
        return None if error is None else _rebuilt(error)


RUN_ERRORS = RunErrors()


class _ErrorChannel:
    """Carries an exception raised inside a plain (token-less) GatherMultiaxis node to the Python caller
    of the session's run method: per calling thread, then first-in-first-out for errors raised on ORT's
    pool threads. Only sessions built with ``session_options()`` need it (best effort, see the README)."""

    def __init__(self):
        self._local = threading.local()
        self._lock = threading.Lock()
        self._unattributed: list[BaseException] = []  # raised on an ORT pool thread (parallel mode)

    # Errors no run takes are dropped, oldest first, beyond this many: a session that never runs
    # through a guarded method would otherwise keep every one (each traceback holds its call's arrays).
    MAX_UNATTRIBUTED = 64

    def record(self, error: BaseException) -> None:
        if getattr(self._local, "depth", 0):
            if getattr(self._local, "error", None) is None:
                self._local.error = error
            return
        with self._lock:
            self._unattributed.append(error.with_traceback(None))  # its frames hold the call's arrays
            del self._unattributed[:-self.MAX_UNATTRIBUTED]

    def _enter(self) -> None:
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            self._local.error = None
        self._local.depth = depth + 1

    def _leave(self) -> BaseException | None:
        self._local.depth -= 1
        error, self._local.error = self._local.error, None
        if error is None and self._unattributed:  # a cheap look first: the lock is for the rare case
            with self._lock:
                if self._unattributed:
                    error = self._unattributed.pop(0)
        return error

    def guard(self, run):
        """Wrap a Session.run* method so that an error recorded during the run is raised from it."""
        if getattr(run, "_gathermultiaxis_guard", False):
            return run

        @functools.wraps(run)
        def guarded(*args, **kwargs):
            self._enter()
            try:
                result = run(*args, **kwargs)
            except BaseException as exc:
                error = self._leave()
                if error is None:
                    raise
                raise _rebuilt(error) from exc
            error = self._leave()
            if error is not None:
                raise _rebuilt(error) from error
            return result

        guarded._gathermultiaxis_guard = True
        return guarded


ERRORS = _ErrorChannel()
_GUARDED_METHODS = ("run", "run_with_ort_values", "run_with_iobinding", "run_with_ortvaluevector")


def _guard_sessions() -> None:
    """Install the plain op's error channel on onnxruntime's Session class (first ``session_options()``)."""
    for name in _GUARDED_METHODS:
        method = getattr(_ort_collection.Session, name, None)
        if method is not None:
            setattr(_ort_collection.Session, name, ERRORS.guard(method))


@dataclass(frozen=True)
class BoundTable:
    """A constant data operand handed to the kernel once. ``widen`` names the 16-bit float format whose
    raw values ``array`` holds ("float16" or "bfloat16", gathered as they are and widened to float32
    exactly), or is None."""

    array: np.ndarray
    widen: str | None = None

    def output_dtype(self) -> np.dtype:
        return np.dtype(np.float32) if self.widen else self.array.dtype


BOUND_TABLES: dict[str, BoundTable] = {}  # key (the node's "table" attribute) -> table; owned by sessions


@functools.lru_cache(maxsize=1)
def _float16_to_float32() -> np.ndarray:
    """float32 value of every float16 bit pattern (256 KiB): one lookup per element is ~20% faster than
    NumPy's float16 -> float32 cast here, and exact for every pattern (NaN payloads included)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


def _widen(values: np.ndarray, kind: str | None) -> np.ndarray:
    if kind is None:
        return values
    if kind == "float16":
        return np.take(_float16_to_float32(), values.view(np.uint16))
    return (values.astype(np.uint32) << 16).view(np.float32)  # bfloat16 bits are float32's high half


class _ArrayHandback:
    """Looks enough like an ndarray for the bridge's ``rv.shape`` / ``rv.flatten().tolist()`` to
    return the array itself, which the C++ side then copies with one memcpy."""

    __slots__ = ("array", "shape")

    def __init__(self, array: np.ndarray):
        self.array = array
        self.shape = array.shape

    def flatten(self):
        return self

    def tolist(self):
        return self.array


_state = {"registered": False, "handback": False, "opdefs": [], "guarded": False}
_lock = threading.RLock()

NUL_LIMIT = ("a string holding a NUL character cannot cross onnxruntime-extensions' PyOp bridge (it passes "
              "strings as C strings, which end at the first NUL)")


def _handed_back(output: np.ndarray):
    """The op's return value for ``output``, in the form the active output path needs."""
    if output.dtype == object:
        for value in output.flat:  # the bridge would cut the string at the NUL: refuse instead
            if "\x00" in value if isinstance(value, str) else b"\x00" in value:
                raise ValueError(NUL_LIMIT)
        return output
    if not _state["handback"]:
        # the list path rebuilds an array from Python ints: uint64 above 2**63 would go through float64
        return output.view(np.int64) if output.dtype == np.uint64 else output
    # np.ascontiguousarray would turn a 0-d output into shape (1,)
    return _ArrayHandback(output if output.flags.c_contiguous else output.copy(order="C"))


def _placeholder(error: BaseException, dtype: np.dtype, input_shape, indices_shape, axes):
    """What a failed call returns: zeros of the output's shape when it is known (index errors), else an
    empty array of the input's rank."""
    shape = (0,) * max(len(input_shape), 1)
    if isinstance(error, GatherIndexError):
        try:
            shape = GatherGeometry.infer(tuple(input_shape), tuple(indices_shape),
                                         normalize_axes(axes.tolist(), len(input_shape))).output_shape
        except Exception:  # noqa: BLE001 - fall back to the empty placeholder
            pass
    output = np.full(shape, "", dtype=object) if dtype == object else np.zeros(shape, dtype=dtype)
    return _handed_back(output)


def _gather(data, indices, axes, mode, widen=None):
    if axes.ndim != 1:
        raise ValueError(f"axes must be a 1-D int64 tensor, got shape {list(axes.shape)}")
    return _handed_back(_widen(gather_multiaxis(data, indices, axes.tolist(), mode), widen))


def _compute(input, indices, axes, mode):
    """The plain op body as the bridge calls it: never raises (see the module docstring)."""
    try:
        return _gather(input, indices, axes, mode)
    except Exception as exc:  # noqa: BLE001 - every error must travel to the caller, not kill the process
        ERRORS.record(exc)
        return _placeholder(exc, input.dtype, input.shape, indices.shape, axes)


def _compute_run(input, indices, axes, run_token, mode):
    """GatherMultiaxisRun: the error goes under the run's token."""
    try:
        return _gather(input, indices, axes, mode)
    except Exception as exc:  # noqa: BLE001
        RUN_ERRORS.record(int(run_token), exc)
        return _placeholder(exc, input.dtype, input.shape, indices.shape, axes)


def _compute_bound(indices, axes, run_token, mode, table):
    """GatherMultiaxisBound<Type>: the data is the session's bound table ``table``."""
    bound = BOUND_TABLES.get(table)
    if bound is None:  # the session that bound it is gone: cannot happen while it runs
        RUN_ERRORS.record(int(run_token), RuntimeError(f"no bound table {table!r} (its session was released)"))
        return np.zeros((0,) * max(indices.ndim, 1), dtype=np.float32)
    try:
        return _gather(bound.array, indices, axes, mode, bound.widen)
    except Exception as exc:  # noqa: BLE001
        RUN_ERRORS.record(int(run_token), exc)
        return _placeholder(exc, bound.output_dtype(), bound.array.shape, indices.shape, axes)


def _string_attributes(attributes):
    """Replaces the invoker's ``Opdef.cast_attributes``: every attribute of these op types is a string,
    which the bridge already hands over as ``str``, so the per-call conversion loop has nothing to do."""
    return attributes


def _define(op_type, inputs, output, attrs, body):
    opdef = onnx_op(op_type=op_type, inputs=inputs, outputs=[output], attrs=attrs)(body)
    if all(kind == PyCustomOpDef.dt_string for kind in attrs.values()):
        opdef.cast_attributes = _string_attributes
    _state["opdefs"].append(opdef)
    return opdef


def _handback_works(opdef) -> bool:
    """Run the installed bridge's Python invocation hook on one call and check it hands the array on."""
    hook = getattr(_ocos, "_on_pyop_invocation", None)
    if hook is None:
        return False
    probe_input = np.arange(6, dtype=np.float32).reshape(2, 3)
    feed = [probe_input, np.array([[2, 0]], dtype=np.int64), np.array([1], dtype=np.int64)]
    _state["handback"] = True
    try:
        result = hook(opdef._id, feed, {"mode": "error"})
        payload = result[2]
        return (isinstance(payload, np.ndarray) and tuple(result[1]) == (2, 2)
                and np.array_equal(payload, np.array([[2, 0], [5, 3]], dtype=np.float32)))
    except Exception:  # noqa: BLE001 - any surprise means: use the default path
        return False
    finally:
        _state["handback"] = False


def register(handback: bool | None = None) -> None:
    """Define every GatherMultiaxis op type with the PyOp bridge: plain, Run and Bound, for every
    (data type, index type) pair.

    Idempotent. ``handback=False`` forces the bridge's default (list) output path; ``None`` uses the
    array handback when the installed bridge passes the self-test.
    """
    with _lock:
        if not _state["registered"]:
            string, int64 = PyCustomOpDef.dt_string, PyCustomOpDef.dt_int64
            for elem_type in DATA_TYPES:
                data_type = _BRIDGE_TYPES[elem_type]
                for index_type in (_BRIDGE_TYPES[t] for t in INDEX_TYPES):
                    _define(OP_TYPE, [data_type, index_type, int64], data_type, {"mode": string}, _compute)
                    _define(RUN_OP_TYPE, [data_type, index_type, int64, int64], data_type, {"mode": string},
                            _compute_run)
                    _define(bound_op_type(elem_type), [index_type, int64, int64], data_type,
                            {"mode": string, "table": string}, _compute_bound)
            _state["registered"] = True
            _state["handback_supported"] = _handback_works(_state["opdefs"][0])
        _state["handback"] = _state["handback_supported"] if handback is None else (
            handback and _state["handback_supported"])


def bridge_info() -> dict:
    """What the registration found out about the installed bridge."""
    register_if_needed = not _state["registered"]
    if register_if_needed:
        register()
    return {"registered": _state["registered"], "handback_supported": _state["handback_supported"],
            "handback_active": _state["handback"], "registrations": len(_state["opdefs"])}


_registered_options: "weakref.WeakSet[ort.SessionOptions]" = weakref.WeakSet()


def registered_by_us(options: ort.SessionOptions) -> bool:
    return options in _registered_options


def register_library(options: ort.SessionOptions) -> ort.SessionOptions:
    """Register the extensions library (with every GatherMultiaxis op type) on ``options`` once."""
    with _lock:
        if not _state["registered"]:
            register()
        if options not in _registered_options:
            options.register_custom_ops_library(get_library_path())
            _registered_options.add(options)
        return options


def session_options(options: ort.SessionOptions | None = None) -> ort.SessionOptions:
    """An ``onnxruntime.SessionOptions`` with the custom-op library (and GatherMultiaxis) registered,
    for users who build ``onnxruntime.InferenceSession`` themselves (``gathermultiaxis.InferenceSession``
    is the better way: see the README for what this path cannot guarantee).

    Pass existing options to add the library to them; calling it again on the same options is a no-op
    (registering the library twice would make session creation fail). The first call installs the plain
    op's error channel on ``onnxruntime``'s ``Session.run*`` methods. Thread-safe.
    """
    with _lock:
        if not _state["guarded"]:
            _guard_sessions()
            _state["guarded"] = True
        return register_library(ort.SessionOptions() if options is None else options)
