"""GatherMultiaxis as an ONNX Runtime custom operator, through onnxruntime-extensions' PyOp bridge.

Node signature (domain ``ai.onnx.contrib``, version 1)::

    output = GatherMultiaxis(input, indices, axes, mode="error")
      input   T     any type in DATA_TYPES (not float16/bfloat16: the bridge cannot carry them)
      indices int32 or int64, same rank as input
      axes    int64 1-D tensor
      mode    string attribute, required on the node: "error", "zero" or "clamp"

Two properties of the bridge (onnxruntime-extensions 0.15, ORT 1.31) shape this module:

* Any C++ exception leaving a PyOp (a Python exception included) ends the process with
  ``std::terminate``: ORT's executor does not catch exception types thrown by the extensions library.
  So the op never raises. It records the error for the thread running it and returns an empty
  placeholder; a wrapper around ``onnxruntime``'s Python ``Session.run*`` methods raises the recorded
  error once the run returns, so the caller of ``session.run`` gets the kernel's exception.
* The default return path converts every output to a Python list (6x slower on large outputs). The
  bridge copies any array with ``memcpy``, so the op hands back the C-contiguous array itself, wrapped
  so that the bridge's ``rv.flatten().tolist()`` yields it. A self-test against the installed bridge
  decides at registration whether that works; otherwise plain arrays go the default (list) path.
"""

from __future__ import annotations

import functools
import threading
import weakref

import numpy as np
import onnxruntime as ort
from onnx import TensorProto
from onnxruntime.capi import onnxruntime_inference_collection as _ort_collection
from onnxruntime_extensions import PyCustomOpDef, get_library_path, onnx_op
from onnxruntime_extensions import _ocos

from .kernel import gather_multiaxis
from .signature import DATA_TYPES, INDEX_TYPES, OP_TYPE

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


class _ErrorChannel:
    """Carries an exception raised inside the op to the Python caller of the session's run method."""

    def __init__(self):
        self._local = threading.local()
        self._lock = threading.Lock()
        self._active_threads: dict[int, int] = {}
        self._unattributed: list[BaseException] = []  # raised on an ORT pool thread (parallel mode)

    def record(self, error: BaseException) -> None:
        if getattr(self._local, "depth", 0):
            if getattr(self._local, "error", None) is None:
                self._local.error = error
            return
        with self._lock:
            self._unattributed.append(error)

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


def _rebuilt(error: BaseException) -> BaseException:
    """A fresh exception of the same type and message, naming the op."""
    message = f"{OP_TYPE}: {error}"
    try:
        return type(error)(message)
    except Exception:  # an exception type whose constructor takes other arguments
        return RuntimeError(message)


ERRORS = _ErrorChannel()
_GUARDED_METHODS = ("run", "run_with_ort_values", "run_with_iobinding", "run_with_ortvaluevector")


def _guard_sessions() -> None:
    for name in _GUARDED_METHODS:
        method = getattr(_ort_collection.Session, name, None)
        if method is not None:
            setattr(_ort_collection.Session, name, ERRORS.guard(method))


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


_state = {"registered": False, "handback": False, "opdefs": []}
_lock = threading.RLock()


def _compute(input, indices, axes, mode):
    """The op body as the bridge calls it: never raises (see the module docstring)."""
    try:
        if axes.ndim != 1:
            raise ValueError(f"axes must be a 1-D int64 tensor, got shape {list(axes.shape)}")
        output = gather_multiaxis(input, indices, axes.tolist(), mode)
        if output.dtype == object or not _state["handback"]:
            return output
        # np.ascontiguousarray would turn a 0-d output into shape (1,)
        return _ArrayHandback(output if output.flags.c_contiguous else output.copy(order="C"))
    except Exception as exc:  # noqa: BLE001 - every error must travel to the caller, not kill the process
        ERRORS.record(exc)
        return np.empty((0,) * max(np.ndim(input), 1), dtype=np.asarray(input).dtype)


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
    """Register GatherMultiaxis for every (data type, index type) pair with the PyOp bridge.

    Idempotent. ``handback=False`` forces the bridge's default (list) output path; ``None`` uses the
    array handback when the installed bridge passes the self-test.
    """
    with _lock:
        if not _state["registered"]:
            for data_type in DATA_TYPES:
                for index_type in INDEX_TYPES:
                    _state["opdefs"].append(onnx_op(
                        op_type=OP_TYPE, inputs=[_BRIDGE_TYPES[data_type], _BRIDGE_TYPES[index_type],
                                                 PyCustomOpDef.dt_int64],
                        outputs=[_BRIDGE_TYPES[data_type]], attrs={"mode": PyCustomOpDef.dt_string})(_compute))
            _guard_sessions()
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


def session_options(options: ort.SessionOptions | None = None) -> ort.SessionOptions:
    """An ``onnxruntime.SessionOptions`` with the custom-op library (and GatherMultiaxis) registered.

    Pass existing options to add the library to them; calling it again on the same options is a no-op
    (registering the library twice would make session creation fail). Thread-safe.
    """
    with _lock:
        if not _state["registered"]:
            register()
        options = ort.SessionOptions() if options is None else options
        if options not in _registered_options:
            options.register_custom_ops_library(get_library_path())
            _registered_options.add(options)
        return options
