"""One child process that runs tasks one after another, so that a task that crashes the process
(a segfault in a native library, std::terminate) or hangs costs that task and not the caller.

The child is started once (spawn: no ORT thread pools inherited through fork) and reused; after a
crash or a timeout it is replaced. A task reports the phase it is in, so that a crash or a hang can be
attributed ("running the original model on ORT"). The child ignores SIGINT and SIGTERM (Ctrl-C or a
``kill`` of the process group is the parent's to handle: it stops the child), and it never outlives the
parent: on Linux the kernel kills it when the parent dies (PR_SET_PDEATHSIG), elsewhere a watcher thread
ends it within a second of the parent being gone.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

_phase_sender = None


def report_phase(text: str) -> None:
    """Called by a task in the child: what it is doing now (no-op in the parent)."""
    if _phase_sender is not None:
        _phase_sender.send(("phase", text))


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent: int) -> None:
    """End this process when ``parent`` ends, even when it is killed (SIGKILL) and cannot clean up."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)

    def watch() -> None:  # where prctl is missing; a native call holding the GIL delays it, nothing more
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _serve(connection, parent: int | None = None) -> None:
    global _phase_sender
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if parent is not None:
        _die_with_parent(parent)
    _phase_sender = connection
    while True:
        try:
            message = connection.recv()
        except EOFError:
            return
        if message is None:
            return
        function, argument = message
        try:
            connection.send(("done", function(argument)))
        except Exception as error:  # noqa: BLE001 - the task's own failure goes back as data
            connection.send(("raised", f"{type(error).__name__}: {error}"))


@dataclass
class Outcome:
    """What became of one task: its value, or why there is none."""

    value: Any = None
    status: str = "done"  # "done", "raised", "crashed", "timed out"
    detail: str = ""
    phase: str = ""       # the last phase the task reported


class Worker:
    """``Worker().run(function, argument, timeout)``; use as a context manager to stop the child."""

    def __init__(self):
        self._context = multiprocessing.get_context("spawn")
        self._process = None
        self._connection = None

    def _start(self) -> None:
        parent_end, child_end = self._context.Pipe()
        self._process = self._context.Process(target=_serve, args=(child_end, os.getpid()), daemon=True)
        self._process.start()
        child_end.close()
        self._connection = parent_end

    def stop(self) -> None:
        if self._process is None:
            return
        try:
            self._connection.send(None)
        except (OSError, ValueError):
            pass
        self._process.join(timeout=2)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._connection.close()
        self._process = self._connection = None

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._connection.close()
            self._process = self._connection = None

    def run(self, function: Callable[[Any], Any], argument: Any, timeout: float) -> Outcome:
        """Run ``function(argument)`` in the child (both must be picklable) within ``timeout`` seconds."""
        if self._process is None or not self._process.is_alive():
            self._start()
        self._connection.send((function, argument))
        phase = ""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                ready = remaining > 0 and self._connection.poll(remaining)
                message = self._connection.recv() if ready else None
            except (EOFError, OSError):
                message = None
                ready = True
            if message is not None and message[0] == "phase":
                phase = message[1]
                continue
            if message is not None:
                kind, value = message
                return Outcome(value if kind == "done" else None, kind, "" if kind == "done" else value, phase)
            if not ready:  # the deadline passed
                self.kill()
                return Outcome(None, "timed out", f"no answer within {timeout:g} s", phase)
            self._process.join(timeout=5)
            code = self._process.exitcode
            self.kill()
            return Outcome(None, "crashed", _exit_text(code), phase)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _exit_text(code: int | None) -> str:
    if code is None:
        return "the process ended without a word"
    if code < 0:
        try:
            return f"the process was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the process was killed by signal {-code}"
    return f"the process exited with status {code}"
