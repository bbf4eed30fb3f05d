"""One child process that runs tasks one after another, so that a task that crashes the process
(a segfault in a native library, std::terminate) or hangs costs that task and not the caller.

The child is started once and reused; after a crash or a timeout it is replaced. It is a fresh
interpreter running ``python -m gathermultiaxis.conformance.worker`` (no ORT thread pools inherited
through fork), and never the caller's main module: multiprocessing's spawn re-ran a script that calls
``check.run`` without an ``if __name__ == "__main__"`` guard in the child, which then failed to start.
Tasks and results travel as pickles over two pipes (``multiprocessing.connection.Connection``); the
child takes the caller's ``sys.path`` first, so that a task defined in any module the caller imports
can be unpickled. A task reports the phase it is in, so that a crash or a hang can be
attributed ("running the original model on ORT"). The child ignores SIGINT and SIGTERM (Ctrl-C or a
``kill`` of the process group is the parent's to handle: it stops the child), and it never outlives the
parent: on Linux the kernel kills it when the parent dies (PR_SET_PDEATHSIG), elsewhere a watcher thread
ends it within a second of the parent being gone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
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


def serve(task_fd: int, answer_fd: int, parent: int) -> None:
    """The child's loop (``python -m gathermultiaxis.conformance.worker``): take the caller's sys.path,
    then run tasks until told to stop or the caller is gone."""
    global _phase_sender
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent(parent)
    tasks, answers = Connection(task_fd, writable=False), Connection(answer_fd, readable=False)
    _phase_sender = answers
    try:
        sys.path[:] = tasks.recv()
    except EOFError:
        return
    while True:
        try:
            message = tasks.recv()
        except EOFError:
            return
        except Exception as error:  # noqa: BLE001 - a task this interpreter cannot unpickle
            answers.send(("raised", f"cannot take the task: {type(error).__name__}: {error}"))
            continue
        if message is None:
            return
        function, argument = message
        try:
            answers.send(("done", function(argument)))
        except Exception as error:  # noqa: BLE001 - the task's own failure goes back as data
            answers.send(("raised", f"{type(error).__name__}: {error}"))


@dataclass
class Outcome:
    """What became of one task: its value, or why there is none."""

    value: Any = None
    status: str = "done"  # "done", "raised", "crashed", "timed out"
    detail: str = ""
    phase: str = ""       # the last phase the task reported


class Worker:
    """``Worker().run(function, argument, timeout)``; use as a context manager to stop the child.

    One thread at a time may call ``run``, ``stop`` and ``kill``; ``interrupt`` may be called from any
    thread (the thread in ``run`` then gets the task's outcome "crashed")."""

    WORKER_MODULE = "gathermultiaxis.conformance.worker"

    def __init__(self):
        self._process: subprocess.Popen | None = None
        self._tasks: Connection | None = None
        self._answers: Connection | None = None

    def _start(self) -> None:
        task_read, task_write = os.pipe()
        answer_read, answer_write = os.pipe()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", self.WORKER_MODULE, str(task_read), str(answer_write), str(os.getpid())],
                pass_fds=(task_read, answer_write), stdin=subprocess.DEVNULL)
        except BaseException:
            for fd in (task_read, task_write, answer_read, answer_write):
                os.close(fd)
            raise
        os.close(task_read)
        os.close(answer_write)
        self._tasks = Connection(task_write, readable=False)
        self._answers = Connection(answer_read, writable=False)
        self._tasks.send([entry for entry in sys.path])

    def _close(self) -> None:
        for connection in (self._tasks, self._answers):
            if connection is not None:
                connection.close()
        self._process = self._tasks = self._answers = None

    def stop(self) -> None:
        if self._process is None:
            return
        try:
            if self._tasks is not None:
                self._tasks.send(None)
        except (OSError, ValueError):
            pass
        try:
            self._process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._close()

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._close()

    def interrupt(self) -> None:
        """Kill the child from another thread; ``run`` in the owning thread returns "crashed"."""
        process = self._process
        if process is not None:
            try:
                process.kill()
            except OSError:
                pass

    def run(self, function: Callable[[Any], Any], argument: Any, timeout: float) -> Outcome:
        """Run ``function(argument)`` in the child (both must be picklable) within ``timeout`` seconds."""
        if self._process is None or self._process.poll() is not None:
            if self._process is not None:
                self._close()
            self._start()
        try:
            self._tasks.send((function, argument))
        except (OSError, ValueError):  # the child died before it took the task: its exit says why
            pass
        phase = ""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                ready = remaining > 0 and self._answers.poll(remaining)
                message = self._answers.recv() if ready else None
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
            try:
                code = self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
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
