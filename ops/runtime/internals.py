"""The private onnxruntime and onnxruntime-extensions APIs the runtime uses, each group looked up and checked
once, on first use (``ops.private_api``): the session classes (``session``, ``run_errors``), the PyOp
invoker and hook (``registration``), the C IOBinding (``preallocated``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from ...graphs.ranks.symbolic_inference import symbolic_shape_inference
from ..private_api import Lookup


class SessionInternals(NamedTuple):
    """onnxruntime's Python session classes as ``ops/session.py`` and ``ops/run_errors.py`` use them."""

    # Any, not type: onnxruntime ships no type information, so a type checker would know none of their methods
    session_class: Any  # onnxruntime_inference_collection.Session: the run methods, called with a token added
    inference_session_class: Any  # its InferenceSession: subclassed, and its __init__ wrapped (run_errors)
    ort_value_vector: type  # _pybind_state.OrtValueVector: the C-level feed of run_with_ortvaluevector


_SESSION_RUN_METHODS = ("run", "run_with_ort_values", "run_with_iobinding", "run_with_ortvaluevector", "run_async",
                        "_validate_input")
_SESSION_STATE = ("_sess", "_inputs_meta", "_outputs_meta", "_providers")  # set by ORT when a session is made


@functools.cache
def session_internals() -> SessionInternals:
    """The session classes, every name the package uses on them checked.

    Returns:
        The classes and the C-level value vector.

    Raises:
        PrivateAPIError: a name is missing from the installed onnxruntime."""
    lookup = Lookup("subclass onnxruntime's InferenceSession")
    collection = lookup.module("onnxruntime.capi.onnxruntime_inference_collection")
    pybind_state = lookup.module("onnxruntime.capi._pybind_state")
    session_class = lookup.attribute(collection, "Session", "onnxruntime_inference_collection")
    inference_session_class = lookup.attribute(collection, "InferenceSession", "onnxruntime_inference_collection")
    for method in _SESSION_RUN_METHODS:
        lookup.attribute(session_class, method, "Session")
    lookup.attribute(inference_session_class, "_create_inference_session", "InferenceSession")
    vector = lookup.attribute(pybind_state, "OrtValueVector", "_pybind_state")
    lookup.attribute(vector, "push_back", "OrtValueVector")
    lookup.done()
    return SessionInternals(session_class, inference_session_class, vector)


def session_state(session: Any) -> tuple[Any, list, list, list]:
    """What ORT set on a new Python session: the C session, input and output metadata, the providers.

    Args:
        session: an ``onnxruntime.InferenceSession`` whose C session is bound.

    Returns:
        ``(c_session, inputs_meta, outputs_meta, providers)``.

    Raises:
        PrivateAPIError: ORT no longer sets one of these attributes."""
    lookup = Lookup("read the state of onnxruntime's InferenceSession")
    values = [lookup.attribute(session, name, "InferenceSession") for name in _SESSION_STATE]
    lookup.done()
    return values[0], values[1], values[2], values[3]


def set_inputs_meta(session: Any, inputs_meta: list) -> None:
    """Replace the input metadata ORT's session reports (``get_inputs``, its missing-input message)."""
    session._inputs_meta = inputs_meta


def c_ort_value(value: Any) -> Any:
    """The C-level value of an ``onnxruntime.OrtValue`` (what an ``OrtValueVector`` holds).

    Raises:
        PrivateAPIError: ``OrtValue`` no longer keeps it as ``_ortvalue``."""
    lookup = Lookup("pass OrtValues to run_with_ortvaluevector")
    inner = lookup.attribute(value, "_ortvalue", "OrtValue")
    lookup.done()
    return inner


def iobinding_state(iobinding: Any) -> tuple[Any, dict]:
    """ORT's C binding behind an ``onnxruntime.IOBinding`` and its record of bound outputs (name -> ``OrtValue``,
    or None when bound by device or pointer), in binding order.

    Raises:
        PrivateAPIError: ``IOBinding`` no longer keeps them as ``_iobinding`` and ``_bound_outputs``."""
    lookup = Lookup("check pre-allocated IOBinding outputs")
    values = [lookup.attribute(iobinding, name, "IOBinding") for name in ("_iobinding", "_bound_outputs")]
    lookup.done()
    return values[0], values[1]


def c_cpu_device() -> Any:
    """The C-level CPU device that ``IOBinding``'s C binding takes (``OrtDevice._get_c_device``)."""
    import onnxruntime

    lookup = Lookup("bind IOBinding outputs on the CPU")
    make = lookup.attribute(onnxruntime.OrtDevice.make("cpu", 0), "_get_c_device", "OrtDevice")
    lookup.done()
    return make()


class PyOpInternals(NamedTuple):
    """onnxruntime-extensions' PyOp invocation path as ``ops/ortop.py`` uses it."""

    generic_invoker: Callable[..., Any]  # _ocos._on_pyop_invocation: the invoker of every other PyOp
    install_hook: Callable[[Callable[..., Any]], None]  # PyCustomOpDef.install_hooker


@functools.cache
def pyop_internals() -> PyOpInternals:
    """The PyOp invoker and hook installer, checked.

    Returns:
        The generic invoker and the hook installer.

    Raises:
        PrivateAPIError: a name is missing from the installed onnxruntime-extensions."""
    lookup = Lookup("define its op types with onnxruntime-extensions")
    ocos = lookup.module("onnxruntime_extensions._ocos")
    extensions = lookup.module("onnxruntime_extensions")
    invoker = lookup.attribute(ocos, "_on_pyop_invocation", "onnxruntime_extensions._ocos")
    install = lookup.attribute(extensions, "PyCustomOpDef.install_hooker", "onnxruntime_extensions")
    lookup.done()
    return PyOpInternals(invoker, install)


def pyop_id(opdef: Any) -> int:
    """The id the bridge calls a PyOp definition by.

    Raises:
        PrivateAPIError: the definition no longer keeps it as ``_id``."""
    lookup = Lookup("define its op types with onnxruntime-extensions")
    identifier = lookup.attribute(opdef, "_id", "PyCustomOpDef")
    lookup.done()
    return identifier


def probe_all() -> None:
    """Look up every group now (the tests call it).

    Raises:
        PrivateAPIError: naming everything missing in the first group that lacks something."""
    session_internals()
    pyop_internals()
    symbolic_shape_inference()


__all__ = ["PyOpInternals", "SessionInternals", "c_cpu_device", "c_ort_value", "iobinding_state", "probe_all",
           "pyop_id", "pyop_internals", "session_internals", "session_state", "set_inputs_meta"]
