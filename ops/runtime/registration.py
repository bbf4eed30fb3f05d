"""GatherMultiaxis as an ONNX Runtime custom operator, through onnxruntime-extensions' PyOp bridge.

Any exception leaving a PyOp ends the process, so the op never raises: it records the error (``run_errors``,
by run token) and returns a placeholder of the right shape and type. Other PyOps go to the extensions'
invoker. Strings holding NUL are refused (the bridge cuts them)."""

from __future__ import annotations

import functools
import threading
import warnings
import weakref
from typing import Any, NamedTuple, cast

import numpy as np
import onnxruntime as ort
from onnx import TensorProto
from . import extensions  # noqa: F401, I001 - first: onnxruntime_extensions without transformers/torch
from onnxruntime_extensions import PyCustomOpDef, get_library_path, onnx_op

from .bridge_strings import check_output_strings
from .internals import pyop_id, pyop_internals
from ..contract import CHECKING_MODE_VALUES, DATA_TYPES, INDEX_TYPES, OP_TYPE, GatherIndexError, Mode, normalize_axes
from ..fast_plan import FAST_PLANS, GatherCall, fast_gather, index_rows
from ..geometry import GatherGeometry
from ..kernel import gather_multiaxis
from .recorded_op import recorded_output
from .run_ops import (BOUND_OUTPUT_TYPES, FIXED_RUN_OP_TYPE, NARROWING_AXES_RUN_OP_TYPE, NARROWING_RUN_OP_TYPE,
                      RECORDED_OP_TYPE, RUN_OP_TYPE, BoundTable,
                      bound_op_type, group_op_type, group_signatures, parse_axes, parse_group)
from .run_errors import ERRORS, RUN_ERRORS, guard_onnxruntime_sessions, guard_sessions_made_with  # noqa: F401 - guard_onnxruntime_sessions: public here too (README)

# ONNX element type -> PyOp bridge type (the signature and its types: ops/contract.py).
_BRIDGE_TYPES: dict[int, Any] = {  # Any: the bridge's type constants (no type information)
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
_BRIDGE_OUTPUT_TYPES = {**_BRIDGE_TYPES, TensorProto.FLOAT16: PyCustomOpDef.dt_float16}


# The tables of live sessions, by the key a bound node's ``table`` attribute holds: the bridge hands the op
# nothing but strings, so this is how a call finds its table. It owns none: each session holds the tables
# it bound (``InferenceSession._gathermultiaxis_tables``), and a table leaves this index when its session
# lets it go.
_bound_index: "weakref.WeakValueDictionary[str, BoundTable]" = weakref.WeakValueDictionary()


def publish_bound_tables(tables: dict[str, BoundTable]) -> None:
    """Let the op find ``tables`` by their keys while the session that bound them holds them."""
    _bound_index.update(tables)


def bound_table(key: str) -> BoundTable | None:
    """The table a bound node's ``table`` attribute names, or None once its session is gone."""
    return _bound_index.get(key)


def bound_table_keys() -> frozenset[str]:
    """The keys of every table a live session holds (for tests and diagnostics)."""
    return frozenset(_bound_index.keys())


@functools.lru_cache(maxsize=1)
def _float16_to_float32() -> np.ndarray:
    """float32 of every float16 bit pattern: a lookup is ~20% faster than NumPy's cast, exact for NaN payloads."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


def _widen(values: np.ndarray, kind: str | None) -> np.ndarray:
    if kind is None:
        return values
    if kind == "float16":
        return _float16_to_float32().take(values.view(np.uint16))  # the method: no dispatch per call
    return (values.astype(np.uint32) << 16).view(np.float32)  # bfloat16 bits are float32's high half


class _ArrayHandback:
    """Passes the bridge's ``rv.shape`` / ``rv.flatten().tolist()`` the array itself (one memcpy in C++)."""

    __slots__ = ("array", "shape")

    def __init__(self, array: np.ndarray):
        self.array = array
        self.shape = array.shape

    def flatten(self):
        """The handback itself (the bridge calls ``rv.flatten().tolist()``)."""
        return self

    def tolist(self):
        """The wrapped array, which the bridge's C++ side copies in one memcpy."""
        return self.array


class CallPath(NamedTuple):
    """Steps of the op's call path that ``register(call_path=...)`` can switch off (``bench runtime``)."""

    take_1d: bool = True  # ndarray.take for the tiny 1-D gathers of shape arithmetic
    take_bound: bool = True  # ndarray.take for a bound table's embedding form
    fast_plan: bool = True  # one NumPy call per (axes, mode, shapes), planned once (ops.fast_plan)


_state: dict[str, Any] = {"registered": False, "handback": False, "opdefs": [], "hook": False, "registered_early": None,
                          "call_path": CallPath()}
_lock = threading.RLock()

def _handed_back(output: np.ndarray):
    """The op's return value for ``output``, in the form the generic invoker's output path needs."""
    if output.dtype == object:
        check_output_strings(output)
        return output
    if not _state["handback"] and output.dtype != np.float16:  # float16 has no list path (only the array)
        # the list path rebuilds an array from Python ints: uint64 above 2**63 would go through float64
        return output.view(np.int64) if output.dtype == np.uint64 else output
    # np.ascontiguousarray would turn a 0-d output into shape (1,)
    return _ArrayHandback(output if output.flags.c_contiguous else output.copy(order="C"))


def _payload(output: np.ndarray):
    """What the own hook returns as the output's data (strings checked by the caller)."""
    if output.dtype == object:
        return output.reshape(-1).tolist()
    if not _state["handback"] and output.dtype != np.float16:
        return (output.view(np.int64) if output.dtype == np.uint64 else output).reshape(-1).tolist()
    return output if output.flags.c_contiguous else output.copy(order="C")


def _placeholder_array(error: BaseException, dtype: np.dtype, input_shape, indices_shape, axes) -> np.ndarray:
    """A failed call's result: zeros of the output shape when known, else an empty array of the input's rank."""
    shape = (0,) * max(len(input_shape), 1)
    if isinstance(error, GatherIndexError):
        try:
            shape = GatherGeometry.infer(tuple(input_shape), tuple(indices_shape),
                                         normalize_axes(list(axes), len(input_shape))).output_shape
        except Exception:  # noqa: BLE001 - fall back to the empty placeholder
            pass
    return np.full(shape, "", dtype=object) if dtype == object else np.zeros(shape, dtype=dtype)


def _placeholder(error: BaseException, dtype: np.dtype, input_shape, indices_shape, axes):
    return _handed_back(_placeholder_array(error, dtype, input_shape, indices_shape, axes))


def _axes_list(axes: np.ndarray) -> list:
    if axes.ndim != 1:
        raise ValueError(f"axes must be a 1-D int64 tensor, got shape {list(axes.shape)}")
    return axes.tolist()


def _gather(data, indices, axes, mode, widen=None):
    return _handed_back(_widen(_gather_call(data, indices, _axes_list(axes), mode), widen))


# ---------------------------------------------------------------- op bodies for the generic invoker

def _compute(input, indices, axes, mode):
    """The plain op body as the bridge calls it: never raises (see the module docstring)."""
    try:
        return _gather(input, indices, axes, mode)
    except Exception as exc:  # noqa: BLE001 - every error must travel to the caller, not kill the process
        ERRORS.record(exc)
        return _placeholder(exc, input.dtype, input.shape, indices.shape, axes.reshape(-1).tolist())


def _compute_run(input, indices, axes, run_token, mode):
    """GatherMultiaxisRun: the error goes under the run's token."""
    try:
        return _gather(input, indices, axes, mode)
    except Exception as exc:  # noqa: BLE001
        RUN_ERRORS.record(int(run_token), exc)
        return _placeholder(exc, input.dtype, input.shape, indices.shape, axes.reshape(-1).tolist())


def _compute_fixed(input, indices, run_token, mode, axes):
    """GatherMultiaxisRunFixedAxes: axes from the attribute."""
    try:
        return _handed_back(_gather_call(input, indices, parse_axes(axes), mode))
    except Exception as exc:  # noqa: BLE001
        RUN_ERRORS.record(int(run_token), exc)
        return _placeholder(exc, input.dtype, input.shape, indices.shape, parse_axes(axes))


def _compute_bound(indices, run_token, table):
    """GatherMultiaxisBound<Type>: the data is the session's bound table ``table``."""
    return _handed_back(_bound_output(indices, run_token, table))


def _bound_output(indices, run_token, table) -> np.ndarray:
    bound = _bound_index.get(table)
    if bound is None:  # the session that bound it is gone: cannot happen while it runs
        RUN_ERRORS.record(int(run_token), RuntimeError(f"no bound table {table!r} (its session was released)"))
        return np.zeros((0,) * max(indices.ndim, 1), dtype=np.float32)
    take_table = bound.take_table
    if take_table is not None and indices.ndim == bound.array.ndim - len(bound.indices_axes) and _state["call_path"].take_bound:
        try:  # the embedding form: refusals go the general way below, which names the index
            return _widen(take_table.take(indices, axis=0), bound.widen)
        except (IndexError, TypeError):
            pass
    if _state["call_path"].fast_plan:
        output = fast_gather(bound.array, indices, bound.axes, bound.mode, bound.indices_axes)
        if output is not None:
            return _widen(output, bound.widen)
    try:
        indices = bound.indices(indices)
        output = _widen(_gather_call(bound.array, indices, bound.axes, bound.mode), bound.widen)
        if output.dtype == object:
            check_output_strings(output)
        return output
    except Exception as exc:  # noqa: BLE001
        RUN_ERRORS.record(int(run_token), exc)
        return _placeholder_array(exc, bound.output_dtype(), bound.array.shape, indices.shape, bound.axes)


# ---------------------------------------------------------------- the own invocation hook

def _gather_call(data: np.ndarray, indices: np.ndarray, axes, mode: str) -> np.ndarray:
    """gather_multiaxis, after an ``ndarray.take`` shortcut for tiny 1-D shape-arithmetic gathers (as mode
    "error") or else the fast plan; any refusal goes the general way, which names the offending index."""
    call_path = _state["call_path"]
    if data.ndim == 1 and indices.ndim == 1 and len(axes) == 1 and axes[0] in (0, -1) and (
            mode in CHECKING_MODE_VALUES) and call_path.take_1d:
        try:
            return data.take(indices)
        except (IndexError, TypeError):
            pass
    elif call_path.fast_plan:
        output = fast_gather(data, indices, tuple(axes), mode)
        if output is not None:
            return output
    return gather_multiaxis(data, indices, axes, mode)


def _answer(k_id, output: np.ndarray):
    return (k_id, output.shape, _payload(output))


def _hook_plain(k_id, feed, attributes):
    input, indices, axes = feed
    mode = attributes["mode"]
    try:
        output = _gather_call(input, indices, _axes_list(axes), mode)
        if output.dtype == object:
            check_output_strings(output)
    except Exception as exc:  # noqa: BLE001
        ERRORS.record(exc)
        output = _placeholder_array(exc, input.dtype, input.shape, indices.shape, axes.reshape(-1).tolist())
    return _answer(k_id, output)


def _hook_run(k_id, feed, attributes):
    input, indices, axes, token = feed
    try:
        output = _gather_call(input, indices, _axes_list(axes), attributes["mode"])
        if output.dtype == object:
            check_output_strings(output)
    except Exception as exc:  # noqa: BLE001
        RUN_ERRORS.record(int(token), exc)
        output = _placeholder_array(exc, input.dtype, input.shape, indices.shape, axes.reshape(-1).tolist())
    return _answer(k_id, output)


# What a fixed-axes node's attributes say, parsed once per distinct (axes, mode) pair: the bridge hands the
# same attribute strings over on every call, and the op definition alone does not say which node is calling.
_fixed_nodes: dict[tuple[str, str], tuple[tuple[int, ...], bool]] = {}


def _fixed_node(axes_text: str, mode: str) -> tuple[tuple[int, ...], bool]:
    """(axes, whether a 1-D gather of this node may be ``ndarray.take``: one axis 0 or -1, an error mode)."""
    node = _fixed_nodes.get((axes_text, mode))
    if node is None:
        axes = parse_axes(axes_text)
        node = (axes, len(axes) == 1 and axes[0] in (0, -1) and mode in CHECKING_MODE_VALUES)
        if len(_fixed_nodes) < 4096:  # bounded: the attribute strings come from the models' nodes
            _fixed_nodes[(axes_text, mode)] = node
    return node


# A fixed-axes call's one NumPy call, by (op definition id, axes text, mode, data shape, indices shape), or None
# for the kernel: the definition fixes the data and index types, so one lookup stands for the node's parse,
# the type checks, the 1-D shortcut's test and the fast plan's key. Emptied when the plans or the call path change.
_fixed_calls: dict[tuple, GatherCall | None] = {}
FIXED_CALLS_MAX = 4096
_STRING_DATA: set[int] = set()  # op definition ids whose data input is a string tensor


def _plan_fixed_call(key: tuple) -> GatherCall | None:
    k_id, axes_text, mode, data_shape, indices_shape = key
    call: GatherCall | None = None
    if k_id not in _STRING_DATA:  # strings take the kernel's path, which checks them for the bridge
        axes, take_1d = _fixed_node(axes_text, mode)
        call_path = _state["call_path"]
        if take_1d and len(data_shape) == 1 and len(indices_shape) == 1 and call_path.take_1d:
            call = index_rows
        elif call_path.fast_plan:
            call = FAST_PLANS(axes, mode, data_shape, indices_shape)
    if len(_fixed_calls) >= FIXED_CALLS_MAX:
        _fixed_calls.clear()
    _fixed_calls[key] = call
    return call


FAST_PLANS.on_clear.append(_fixed_calls.clear)


def _hook_fixed(k_id, feed, attributes):
    input, indices, token = feed
    key = (k_id, attributes["axes"], attributes["mode"], input.shape, indices.shape)
    try:
        call = _fixed_calls[key]
    except KeyError:
        call = _plan_fixed_call(key)
    if call is not None:
        try:  # a refusal goes the general way, which names the offending index
            output = call(input, indices)
        except (IndexError, TypeError, ValueError):
            pass
        else:  # a new C-contiguous array
            return (k_id, output.shape, output if _state["handback"] else _payload(output))
    axes = _fixed_node(key[1], key[2])[0]
    try:
        output = gather_multiaxis(input, indices, axes, key[2])
        if output.dtype == object:
            check_output_strings(output)
    except Exception as exc:  # noqa: BLE001
        RUN_ERRORS.record(int(token), exc)
        output = _placeholder_array(exc, input.dtype, input.shape, indices.shape, axes)
    return _answer(k_id, output)


def _narrowed_gather(input, indices, axes, mode: str, token) -> np.ndarray:
    """Gather float32 data holding float16 values (ORT's exact Cast) back to float16 exactly, NaN payloads
    included (ORT's Cast would quiet them). ``axes``: the attribute's text or the axes input."""
    try:
        listed = parse_axes(axes) if isinstance(axes, str) else _axes_list(axes)
        return _gather_call(input, indices, listed, mode).astype(np.float16)
    except Exception as exc:  # noqa: BLE001
        RUN_ERRORS.record(int(token), exc)
        shown = parse_axes(axes) if isinstance(axes, str) else axes.reshape(-1).tolist()
        return _placeholder_array(exc, np.dtype(np.float16), input.shape, indices.shape, shown)


def _hook_narrowing(k_id, feed, attributes):
    input, indices, token = feed
    return _answer(k_id, _narrowed_gather(input, indices, attributes["axes"], attributes["mode"], token))


def _compute_narrowing(input, indices, run_token, mode, axes):
    return _handed_back(_narrowed_gather(input, indices, axes, mode, run_token))


def _hook_narrowing_axes(k_id, feed, attributes):
    input, indices, axes, token = feed
    return _answer(k_id, _narrowed_gather(input, indices, axes, attributes["mode"], token))


def _compute_narrowing_axes(input, indices, axes, run_token, mode):
    return _handed_back(_narrowed_gather(input, indices, axes, mode, run_token))


def _hook_recorded(k_id, feed, attributes):
    data, indices, token = feed
    return _answer(k_id, recorded_output(data, indices, attributes["gather"], attributes["mode"], token,
                                         _state["call_path"].fast_plan))


def _compute_recorded(data, indices, run_token, gather, mode):
    """GatherMultiaxisRecorded: the recorded gather, aligned by the op (``recorded_op``)."""
    return _handed_back(recorded_output(data, indices, gather, mode, run_token, _state["call_path"].fast_plan))


def _hook_bound(k_id, feed, attributes):
    indices, token = feed
    return _answer(k_id, _bound_output(indices, token, attributes["table"]))


def _group_outputs(indices, token, tables: str, slots: str) -> list[np.ndarray]:
    """GatherMultiaxisBoundGroup<Types>: each bound table gathered with the same indices, in graph order."""
    order = parse_group(tables, slots)
    outputs: list[np.ndarray | None] = [None] * len(order)
    for key, slot in order:
        outputs[slot] = _bound_output(indices, token, key)
    return cast(list[np.ndarray], outputs)  # cast: every slot filled (parse_group names each once)


def _compute_bound_group(indices, run_token, tables, slots):
    return tuple(_handed_back(output) for output in _group_outputs(indices, run_token, tables, slots))


def _hook_bound_group(k_id, feed, attributes):
    indices, token = feed
    answer = [k_id]
    for output in _group_outputs(indices, token, attributes["tables"], attributes["slots"]):
        answer += (output.shape, _payload(output))
    return tuple(answer)


_HOOKS: dict[int, object] = {}  # opdef id -> the hook function answering it
_generic_invoker = pyop_internals().generic_invoker


def _invoke(k_id, feed, attributes):
    """The bridge's invocation hook: ours for our op types, onnxruntime-extensions' for every other PyOp."""
    hook = _HOOKS.get(k_id)
    if hook is None:
        return _generic_invoker(k_id, feed, attributes)
    try:
        return hook(k_id, feed, attributes)
    except Exception:  # noqa: BLE001 - a surprise in the hook itself: the generic body records it
        return _generic_invoker(k_id, feed, attributes)


def _string_attributes(attributes):
    """Replaces ``Opdef.cast_attributes``: the bridge already hands these op types' attributes over as ``str``."""
    return attributes


def _define(op_type, inputs, output, attrs, body, hook):
    outputs = output if isinstance(output, list) else [output]  # a list: a group's several outputs
    opdef = onnx_op(op_type=op_type, inputs=inputs, outputs=outputs, attrs=attrs)(body)
    if all(kind == PyCustomOpDef.dt_string for kind in attrs.values()):
        opdef.cast_attributes = _string_attributes
    _state["opdefs"].append(opdef)
    _HOOKS[pyop_id(opdef)] = hook
    if inputs[0] == PyCustomOpDef.dt_string:
        _STRING_DATA.add(pyop_id(opdef))
    return opdef


def _handback_works(opdef) -> bool:
    """Run the installed bridge's generic invoker on one call and check it hands the array on."""
    probe_input = np.arange(6, dtype=np.float32).reshape(2, 3)
    feed = [probe_input, np.array([[2, 0]], dtype=np.int64), np.array([1], dtype=np.int64)]
    _state["handback"] = True
    try:
        result = _generic_invoker(pyop_id(opdef), feed, {"mode": Mode.ERROR.value})
        payload = result[2]
        return (isinstance(payload, np.ndarray) and tuple(result[1]) == (2, 2)
                and np.array_equal(payload, np.array([[2, 0], [5, 3]], dtype=np.float32)))
    except Exception:  # noqa: BLE001 - any surprise means: use the default path
        return False
    finally:
        _state["handback"] = False


EARLY_REGISTRATION = (
    "onnxruntime-extensions' library was registered on SessionOptions in this process before gathermultiaxis "
    "defined its op types: ORT crashes (segfault) creating a session with those options, since the library keeps "
    "pointers into its list of Python ops, which defining more ops reallocates (onnxruntime-extensions "
    "pyop/pyfunc.cc, PyCustomOpDef_FetchPyCustomOps). Register the library after gathermultiaxis.ops.register(), "
    "on new options")


def library_registered_in_process() -> bool | None:
    """Whether the extensions' RegisterCustomOps has run in this process (None: cannot tell), read from
    GetActiveOrtAPIVersion, which answers an old default until the first registration."""
    import ctypes

    try:
        probe = ctypes.CDLL(get_library_path()).GetActiveOrtAPIVersion
    except (OSError, AttributeError):  # another build of the library: no probe
        return None
    probe.restype = ctypes.c_int
    return probe() == int(ort.__version__.split(".")[1])


def register(handback: bool | None = None, hook: bool | None = None, call_path: CallPath | None = None) -> None:
    """Define every GatherMultiaxis op type (plain and ``run_ops``') for every (data, index) type pair with
    the PyOp bridge, and install the package's invocation hook. Idempotent.

    Args:
        handback: False: the bridge's list output path; True or None: the array handback when the bridge
            passes the self-test.
        hook: False: onnxruntime-extensions' generic invoker; True or None: the package's own hook.
        call_path: the call-path steps to use from now on (None: every step, ``CallPath()``)."""
    with _lock:
        if not _state["registered"]:
            _state["registered_early"] = library_registered_in_process()  # options that would crash after this
            if _state["registered_early"]:
                warnings.warn(EARLY_REGISTRATION, RuntimeWarning, stacklevel=2)
            string, int64 = PyCustomOpDef.dt_string, PyCustomOpDef.dt_int64
            for elem_type in DATA_TYPES:
                data_type = _BRIDGE_TYPES[elem_type]
                for index_type in (_BRIDGE_TYPES[t] for t in INDEX_TYPES):
                    _define(OP_TYPE, [data_type, index_type, int64], data_type, {"mode": string}, _compute,
                            _hook_plain)
                    _define(RUN_OP_TYPE, [data_type, index_type, int64, int64], data_type, {"mode": string},
                            _compute_run, _hook_run)
                    _define(FIXED_RUN_OP_TYPE, [data_type, index_type, int64], data_type,
                            {"mode": string, "axes": string}, _compute_fixed, _hook_fixed)
                    _define(RECORDED_OP_TYPE, [data_type, index_type, int64], data_type,
                            {"gather": string, "mode": string}, _compute_recorded, _hook_recorded)
            for index_type in (_BRIDGE_TYPES[t] for t in INDEX_TYPES):
                _define(NARROWING_RUN_OP_TYPE, [PyCustomOpDef.dt_float, index_type, int64], PyCustomOpDef.dt_float16,
                        {"mode": string, "axes": string}, _compute_narrowing, _hook_narrowing)
                _define(NARROWING_AXES_RUN_OP_TYPE, [PyCustomOpDef.dt_float, index_type, int64, int64],
                        PyCustomOpDef.dt_float16, {"mode": string}, _compute_narrowing_axes, _hook_narrowing_axes)
            for elem_type in BOUND_OUTPUT_TYPES:
                for index_type in (_BRIDGE_TYPES[t] for t in INDEX_TYPES):
                    _define(bound_op_type(elem_type), [index_type, int64], _BRIDGE_OUTPUT_TYPES[elem_type],
                            {"table": string}, _compute_bound, _hook_bound)
            for elem_types in group_signatures():
                for index_type in (_BRIDGE_TYPES[t] for t in INDEX_TYPES):
                    _define(group_op_type(elem_types), [index_type, int64], [_BRIDGE_TYPES[t] for t in elem_types],
                            {"tables": string, "slots": string}, _compute_bound_group, _hook_bound_group)
            _state["registered"] = True
            _state["handback_supported"] = _handback_works(_state["opdefs"][0])
        _state["handback"] = _state["handback_supported"] if handback is None else (
            handback and _state["handback_supported"])
        _state["call_path"] = CallPath() if call_path is None else call_path
        _fixed_calls.clear()
        use_hook = hook is None or hook
        if use_hook != _state["hook"]:
            pyop_internals().install_hook(_invoke if use_hook else _generic_invoker)
            _state["hook"] = use_hook


def active_call_path() -> CallPath:
    """The call-path steps the last ``register`` call chose."""
    return _state["call_path"]


def bridge_info() -> dict:
    """What the registration found out about the installed bridge (registers first if needed).

    Returns:
        A dict: ``registered``, ``handback_supported`` (the self-test passed), ``handback_active``,
        ``own_hook`` and ``registrations`` (how many op definitions)."""
    register_if_needed = not _state["registered"]
    if register_if_needed:
        register()
    return {"registered": _state["registered"], "handback_supported": _state["handback_supported"],
            "handback_active": _state["handback"], "own_hook": _state["hook"],
            "registrations": len(_state["opdefs"])}


def definitions() -> int:
    """How many op definitions this process has made so far (0 before the first ``register``; registers nothing)."""
    return len(_state["opdefs"])


def count_crossings(call):
    """``call()``'s result and how many PyOp calls the bridge made meanwhile (any op type), for benchmarks;
    other PyOps run meanwhile would be counted too."""
    with _lock:
        register()
        installed = _invoke if _state["hook"] else _generic_invoker
        calls = [0]

        def counting(k_id, feed, attributes):
            calls[0] += 1
            return installed(k_id, feed, attributes)

        pyop_internals().install_hook(counting)
        try:
            result = call()
        finally:
            pyop_internals().install_hook(installed)
        return result, calls[0]


_registered_options: "weakref.WeakSet[ort.SessionOptions]" = weakref.WeakSet()


def registered_by_us(options: ort.SessionOptions) -> bool:
    """Whether ``register_library`` registered the extensions library on these options."""
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


def config_entry(options: ort.SessionOptions, key: str) -> str | None:
    """A session config entry of ``options``, or None when it is not set (ORT raises for those)."""
    try:
        return options.get_session_config_entry(key)
    except RuntimeError:
        return None


def session_options(options: ort.SessionOptions | None = None) -> ort.SessionOptions:
    """``onnxruntime.SessionOptions`` with the library registered, for users who build ORT sessions themselves
    (``gathermultiaxis.InferenceSession`` is better: see the README). Registering the same options again is a
    no-op; the first call runs ``guard_onnxruntime_sessions()``. Thread-safe.

    Args:
        options: options to register the library on, or None for new ones.

    Returns:
        The ``onnxruntime.SessionOptions`` (``options`` itself when given).

    Raises:
        RuntimeError: ``options`` not registered by this package, while the extensions library was
            registered in this process before the op types were defined (ORT would crash)."""
    with _lock:
        if options is not None and not registered_by_us(options):
            if not _state["registered"]:
                register()
            if _state["registered_early"]:  # these options may be the ones: refuse them rather than crash
                raise RuntimeError(f"session_options(options): {EARLY_REGISTRATION}. Call session_options() "
                                   "without options, or use gathermultiaxis.InferenceSession (it copies the options)")
        options = register_library(ort.SessionOptions() if options is None else options)
        guard_sessions_made_with(options)
        return options
