"""Run errors of GatherMultiaxis nodes, routed to the run that caused them (the op records, the run's caller raises).

* ``RUN_ERRORS``: for ``gathermultiaxis.InferenceSession``'s op types, kept under the run's token.
* ``ERRORS``: for plain nodes in ``session_options()`` sessions: per calling thread, best effort (see the
  README), through the run wrappers of ``guard_onnxruntime_sessions()``."""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from typing import Any

import numpy as np
import onnxruntime as ort

from .bridge_strings import refuse_unsafe_string_constants, refuse_unsafe_string_feeds
from ..contract import OP_TYPE
from .internals import session_internals
from .preallocated import run_with_preallocated_fetches_checked, run_with_preallocated_outputs_checked

_lock = threading.Lock()


def _rebuilt(error: BaseException) -> BaseException:
    """A fresh exception of the same type and message, naming the op."""
    message = f"{OP_TYPE}: {error}"
    try:
        return type(error)(message)
    except Exception:  # an exception type whose constructor takes other arguments
        return RuntimeError(message)


class RunErrors:
    """Errors of the token-taking op types, kept under the run token until the run pops them; the first error of a
    run wins (``dict.setdefault``/``pop`` are atomic under the GIL: no lock)."""

    def __init__(self) -> None:
        self._errors: dict[int, BaseException] = {}
        self._tokens = itertools.count(1)
        self._lendable: list[tuple[int, np.ndarray]] = []

    def new_token(self) -> int:
        """A fresh run token (a counter: never one handed out before)."""
        return next(self._tokens)

    def lend_token(self) -> tuple[int, np.ndarray]:
        """A free token and its int64 array, for a synchronous run that gives both back (``give_back``). Reused
        because ORT takes a seen array ~1.3 us faster; ``list.pop``/``append`` are atomic, so runs never share one."""
        try:
            return self._lendable.pop()
        except IndexError:
            token = next(self._tokens)
            value = np.array(token, dtype=np.int64)
            value.flags.writeable = False
            return token, value

    def give_back(self, lent: tuple[int, np.ndarray]) -> None:
        """Return a token from ``lend_token`` after its run ended and its error (if any) was popped."""
        if len(self._lendable) < 64:  # as many as runs were ever in progress at once, bounded
            self._lendable.append(lent)

    def record(self, token: int, error: BaseException) -> None:
        """Keep ``error`` for run ``token``, unless that run already has one (the first error wins)."""
        self._errors.setdefault(token, error)

    def pop(self, token: int) -> BaseException | None:
        """The error of run ``token`` rebuilt to name the op, or None; forgets it."""
        error = self._errors.pop(token, None)
        return None if error is None else _rebuilt(error)


RUN_ERRORS = RunErrors()


class _ErrorChannel:
    """Plain nodes' errors to the caller's run: per calling thread, then FIFO for ORT pool threads (best effort)."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._unattributed: list[BaseException] = []  # raised on an ORT pool thread (parallel mode)

    # Errors no run takes are dropped, oldest first, beyond this many: a session that never runs
    # through a guarded method would otherwise keep every one (each traceback holds its call's arrays).
    MAX_UNATTRIBUTED = 64

    def record(self, error: BaseException) -> None:
        """Keep ``error`` for this thread's guarded run (first wins), or, on an ORT pool thread, in the queue."""
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
_guarded_options: "weakref.WeakSet[ort.SessionOptions]" = weakref.WeakSet()  # options of session_options()


def _guard_if_ours(init):
    """Wrapped ``InferenceSession.__init__``: ``session_options()`` sessions become ``_guarded_class`` instances."""

    @functools.wraps(init)
    def created(self, path_or_bytes, sess_options=None, *args, **kwargs):
        ours = (sess_options is not None and sess_options in _guarded_options
                and not getattr(self, "_gathermultiaxis_run_tokens", False))  # not gathermultiaxis' own session
        if ours:  # every operand crosses the bridge here: strings it would end the process on are refused
            refuse_unsafe_string_constants(path_or_bytes)
        init(self, path_or_bytes, sess_options, *args, **kwargs)
        if ours:
            self._gathermultiaxis_string_feeds = tuple(value.name for value in self._inputs_meta
                                                       if value.type == "tensor(string)")
            self.__class__ = _guarded_class(type(self))

    created._gathermultiaxis_guard = True
    return created


_guarded_classes: dict[type, type] = {}


def _guarded_class(cls: Any) -> type:  # Any: an onnxruntime session class (no type information)
    """A same-named subclass of ``cls`` with wrapped run methods (wrappers on the instance would make a reference
    cycle keeping each session's memory until the cyclic collector ran)."""
    with _lock:
        guarded = _guarded_classes.get(cls)
        if guarded is None:
            namespace = {name: ERRORS.guard(getattr(cls, name)) for name in _GUARDED_METHODS if hasattr(cls, name)}
            if "run_with_iobinding" in namespace:
                namespace["run_with_iobinding"] = ERRORS.guard(_checking_preallocated_outputs(cls.run_with_iobinding))
            if "run_with_ortvaluevector" in namespace:
                namespace["run_with_ortvaluevector"] = ERRORS.guard(_checking_preallocated_fetches(
                    cls.run_with_ortvaluevector))
            for name in ("run", "run_async"):
                if hasattr(cls, name):
                    namespace[name] = _checking_string_feeds(namespace.get(name, getattr(cls, name)))
            namespace.update(__module__=cls.__module__, __qualname__=cls.__qualname__,
                             __doc__=cls.__doc__)
            guarded = _guarded_classes[cls] = type(cls.__name__, (cls,), namespace)
        return guarded


def _checking_preallocated_outputs(run_with_iobinding):
    """ORT's run_with_iobinding, every pre-allocated CPU output checked (ORT cannot tell which a PyOp writes)."""

    @functools.wraps(run_with_iobinding)
    def run(self, iobinding, run_options=None):
        return run_with_preallocated_outputs_checked(iobinding, lambda: run_with_iobinding(self, iobinding, run_options),
                                                     None)

    return run


def _checking_preallocated_fetches(run_with_ortvaluevector):
    """ORT's run_with_ortvaluevector through ``run_with_preallocated_fetches_checked`` (every output at risk)."""

    @functools.wraps(run_with_ortvaluevector)
    def run(self, run_options, feed_names, feeds, fetch_names, fetches, fetch_devices):
        return run_with_preallocated_fetches_checked(
            fetch_names, fetches, lambda into: run_with_ortvaluevector(self, run_options, feed_names, feeds, fetch_names,
                                                                       into, fetch_devices), None)

    return run


def _checking_string_feeds(run):
    """``run`` or ``run_async`` refusing string feeds the bridge would end the process on."""

    @functools.wraps(run)
    def checked(self, output_names, input_feed, *args, **kwargs):
        if self._gathermultiaxis_string_feeds:
            refuse_unsafe_string_feeds(input_feed, self._gathermultiaxis_string_feeds, nul=True)
        return run(self, output_names, input_feed, *args, **kwargs)

    return checked


def guard_onnxruntime_sessions() -> None:
    """Make op errors of plain GatherMultiaxis nodes reach the caller of ``session_options()`` sessions' run methods.

    The package's one process-wide change to onnxruntime: ``InferenceSession.__init__`` is wrapped so such a
    session becomes a subclass with wrapped run methods; other sessions pay one set lookup at creation.
    Idempotent; never called by import."""
    with _lock:
        inference_session_class = session_internals().inference_session_class
        init = inference_session_class.__init__
        if not getattr(init, "_gathermultiaxis_guard", False):
            inference_session_class.__init__ = _guard_if_ours(init)


def guard_sessions_made_with(options: ort.SessionOptions) -> None:
    """Sessions created with ``options`` get the run wrappers that raise their op errors.

    Args:
        options: the ``onnxruntime.SessionOptions`` (held weakly)."""
    guard_onnxruntime_sessions()
    _guarded_options.add(options)


__all__ = ["ERRORS", "RUN_ERRORS", "RunErrors", "guard_onnxruntime_sessions", "guard_sessions_made_with"]
