"""Every private onnxruntime and onnxruntime-extensions API the package uses, looked up and checked here.

Why private APIs at all:

* ``gathermultiaxis.InferenceSession`` (``ops/session.py``) subclasses ORT's Python session so that it can
  hide its run-token input (``_bind_session``, ``_validate_input``, ``_inputs_meta``, ...), and calls ORT's
  run methods on ``onnxruntime_inference_collection.Session`` with the token added.
* ``ops.run_errors`` wraps ``InferenceSession.__init__`` of that module (``session_options()`` sessions).
* ``ops/ortop.py`` answers its own PyOp ids before onnxruntime-extensions' generic invoker
  (``PyCustomOpDef.install_hooker``, ``_ocos._on_pyop_invocation``, ``PyCustomOpDef._id``).
* ``graphs/inference.py`` runs ORT's symbolic shape inference step by step to keep its partial result
  (``SymbolicShapeInference._preprocess``, ``_infer_impl``, ``_update_output_from_vi``).

Each group is looked up once, on first use: every name at once, so that a release that renamed or removed
one gets one ``PrivateAPIError`` naming what is missing, the installed versions and the tested ones, never an
``AttributeError`` in the middle of a run, a crash, or a silently different result.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NamedTuple

# The versions these names were checked on (pyproject's lower bounds and what CI installs).
TESTED_VERSIONS = "onnxruntime 1.26 to 1.32 and onnxruntime-extensions 0.12, 0.13 and 0.15"


class PrivateAPIError(ImportError):
    """The installed onnxruntime or onnxruntime-extensions lacks a private API gathermultiaxis relies on."""


def _installed_versions() -> str:
    found = []
    for distribution in ("onnxruntime", "onnxruntime-extensions"):
        try:
            found.append(f"{distribution} {version(distribution)}")
        except PackageNotFoundError:
            found.append(f"{distribution} (not installed)")
    return ", ".join(found)


class _Lookup:
    """Looks up dotted names, collecting every missing one before raising once."""

    def __init__(self, purpose: str):
        self.purpose = purpose
        self.missing: list[str] = []

    def module(self, name: str) -> Any:
        try:
            return importlib.import_module(name)
        except ImportError:
            self.missing.append(name)
            return None

    def attribute(self, owner: Any, dotted: str, owner_name: str) -> Any:
        value = owner
        for part in dotted.split("."):
            if value is None or not hasattr(value, part):
                self.missing.append(f"{owner_name}.{dotted}")
                return None
            value = getattr(value, part)
        return value

    def done(self) -> None:
        if self.missing:
            raise PrivateAPIError(
                f"gathermultiaxis cannot {self.purpose}: the installed versions ({_installed_versions()}) lack "
                f"{', '.join(self.missing)}. gathermultiaxis was tested with {TESTED_VERSIONS}; install one of "
                "those, or a gathermultiaxis release that supports yours")


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
        PrivateAPIError: a name is missing from the installed onnxruntime.
    """
    lookup = _Lookup("subclass onnxruntime's InferenceSession")
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
        PrivateAPIError: ORT no longer sets one of these attributes.
    """
    lookup = _Lookup("read the state of onnxruntime's InferenceSession")
    values = [lookup.attribute(session, name, "InferenceSession") for name in _SESSION_STATE]
    lookup.done()
    return values[0], values[1], values[2], values[3]


def set_inputs_meta(session: Any, inputs_meta: list) -> None:
    """Replace the input metadata ORT's session reports (``get_inputs``, its missing-input message)."""
    session._inputs_meta = inputs_meta


def c_ort_value(value: Any) -> Any:
    """The C-level value of an ``onnxruntime.OrtValue`` (what an ``OrtValueVector`` holds).

    Raises:
        PrivateAPIError: ``OrtValue`` no longer keeps it as ``_ortvalue``.
    """
    lookup = _Lookup("pass OrtValues to run_with_ortvaluevector")
    inner = lookup.attribute(value, "_ortvalue", "OrtValue")
    lookup.done()
    return inner


def iobinding_state(iobinding: Any) -> tuple[Any, dict]:
    """ORT's C binding behind an ``onnxruntime.IOBinding`` and its record of bound outputs (name -> the
    ``OrtValue`` bound, or None for one bound by device or by pointer), in binding order
    (``ops/preallocated.py`` rebinds through the C binding, leaving that record as the caller made it).

    Raises:
        PrivateAPIError: ``IOBinding`` no longer keeps them as ``_iobinding`` and ``_bound_outputs``.
    """
    lookup = _Lookup("check pre-allocated IOBinding outputs")
    values = [lookup.attribute(iobinding, name, "IOBinding") for name in ("_iobinding", "_bound_outputs")]
    lookup.done()
    return values[0], values[1]


def c_cpu_device() -> Any:
    """The C-level CPU device that ``IOBinding``'s C binding takes (``OrtDevice._get_c_device``)."""
    import onnxruntime

    lookup = _Lookup("bind IOBinding outputs on the CPU")
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
        PrivateAPIError: a name is missing from the installed onnxruntime-extensions.
    """
    lookup = _Lookup("define its op types with onnxruntime-extensions")
    ocos = lookup.module("onnxruntime_extensions._ocos")
    extensions = lookup.module("onnxruntime_extensions")
    invoker = lookup.attribute(ocos, "_on_pyop_invocation", "onnxruntime_extensions._ocos")
    install = lookup.attribute(extensions, "PyCustomOpDef.install_hooker", "onnxruntime_extensions")
    lookup.done()
    return PyOpInternals(invoker, install)


def pyop_id(opdef: Any) -> int:
    """The id the bridge calls a PyOp definition by.

    Raises:
        PrivateAPIError: the definition no longer keeps it as ``_id``.
    """
    lookup = _Lookup("define its op types with onnxruntime-extensions")
    identifier = lookup.attribute(opdef, "_id", "PyCustomOpDef")
    lookup.done()
    return identifier


_SYMBOLIC_STEPS = ("_preprocess", "_infer_impl", "_update_output_from_vi")
_SYMBOLIC_MODULE = "onnxruntime.tools.symbolic_shape_infer"


@functools.cache
def symbolic_shape_infer_module() -> Any:
    """ORT's ``onnxruntime/tools/symbolic_shape_infer.py``, loaded from its file alone, or None when absent.

    Importing it by name first runs ``onnxruntime/tools/__init__.py``, which imports torch whenever torch is
    installed (2-12 s here), though the module needs none of it; loaded from its file, it costs what its
    own imports (sympy) cost. It is given a name of this package's, so that ``onnxruntime.tools`` stays as
    its importer would find it.
    """
    if _SYMBOLIC_MODULE in sys.modules:
        return sys.modules[_SYMBOLIC_MODULE]
    root = importlib.util.find_spec("onnxruntime")
    if root is None or root.origin is None:
        return None
    path = Path(root.origin).parent / "tools" / "symbolic_shape_infer.py"
    spec = importlib.util.spec_from_file_location("gathermultiaxis.ort_symbolic_shape_infer", path)
    if not path.is_file() or spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def symbolic_shape_inference() -> type:
    """ORT's ``SymbolicShapeInference`` class, with the steps ``partial_symbolic_inference`` calls.

    Raises:
        PrivateAPIError: a step is missing from the installed onnxruntime.
    """
    lookup = _Lookup("run onnxruntime's symbolic shape inference")
    module = symbolic_shape_infer_module()
    if module is None:
        lookup.missing.append(_SYMBOLIC_MODULE)
    inference_class = lookup.attribute(module, "SymbolicShapeInference", _SYMBOLIC_MODULE)
    for step in _SYMBOLIC_STEPS:
        lookup.attribute(inference_class, step, "SymbolicShapeInference")
    lookup.done()
    return inference_class


def partial_symbolic_inference(model: Any) -> Any:
    """Run ORT's symbolic shape inference on ``model`` and return what it inferred, also when incomplete.

    ``SymbolicShapeInference.infer_shapes`` raises on incomplete inference (after saving
    "sym_shape_infer_temp.onnx" into the working folder); its own steps, run here, keep the partial result.

    Args:
        model: the model (a ``ModelProto``), left unchanged.

    Returns:
        The inferred copy (``ModelProto``).

    Raises:
        PrivateAPIError: the steps are missing from the installed onnxruntime.
        Exception: whatever ORT's inference raises on this model.
    """
    inference = symbolic_shape_inference()(2**31 - 1, True, False, 0)
    inference._preprocess(model)
    while inference.run_:
        inference._infer_impl()
    inference._update_output_from_vi()
    return inference.out_mp_


def probe_all() -> None:
    """Look up every group now (``gathermultiaxis check`` and the tests call it).

    Raises:
        PrivateAPIError: naming everything missing in the first group that lacks something.
    """
    session_internals()
    pyop_internals()
    symbolic_shape_inference()


__all__ = ["TESTED_VERSIONS", "PrivateAPIError", "PyOpInternals", "SessionInternals", "c_cpu_device", "c_ort_value",
           "iobinding_state",
           "partial_symbolic_inference", "probe_all", "pyop_id", "pyop_internals", "session_internals",
           "session_state", "set_inputs_meta", "symbolic_shape_infer_module",
           "symbolic_shape_inference"]
