"""One child process that runs tasks one after another, so that a task that crashes or hangs costs that
task and not the caller; after a crash or a timeout it is replaced.

The child is a fresh interpreter, not a fork (no ORT thread pools inherited; never the caller's main
module, so a script calling ``check.run`` needs no ``__main__`` guard). The child ignores SIGINT and
SIGTERM (the parent stops it) and never outlives the parent."""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable

DEFAULT_CONNECT_TIMEOUT_S = 10.0  # how long a Dask scheduler may take to answer (check --cluster-timeout)

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
    """The child's loop: take the caller's sys.path, then run tasks until told to stop or the caller is gone."""
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
    status: str = "done"  # "done", "raised", "crashed", "timed out", "cancelled"
    detail: str = ""
    phase: str = ""       # the last phase the task reported


class Worker:
    """``Worker().run(function, argument, timeout)``; use as a context manager to stop the child.

    One thread at a time may call ``run``, ``stop`` and ``kill``; another thread stops a task by setting
    the ``cancel`` event ``run`` was given (its outcome is then "cancelled", within a fifth of a second)."""

    WORKER_MODULE = "gathermultiaxis.conformance.worker"

    def __init__(self) -> None:
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
        """Ask the child to stop, waiting up to 2 s before killing it (nothing when there is no child)."""
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
        """Kill the child now and wait for it (nothing when there is none)."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._close()

    def run(self, function: Callable[[Any], Any], argument: Any, timeout: float,
            cancel: threading.Event | None = None) -> Outcome:
        """Run picklable ``function(argument)`` in the child within ``timeout`` seconds, unless ``cancel``
        is set meanwhile (the child is killed): the ``Outcome``, with the last phase reported."""
        if self._process is None or self._process.poll() is not None:
            if self._process is not None:
                self._close()
            self._start()
        assert self._tasks is not None and self._answers is not None and self._process is not None  # _start made them
        try:
            self._tasks.send((function, argument))
        except (OSError, ValueError):  # the child died before it took the task: its exit says why
            pass
        phase = ""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if cancel is not None and cancel.is_set():
                self.kill()
                return Outcome(None, "cancelled", "cancelled by the caller", phase)
            try:
                ready = remaining > 0 and self._answers.poll(remaining if cancel is None else min(remaining, 0.2))
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
            if not ready and remaining > 0.2:  # only a slice of the wait passed
                continue
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


class WorkerPool:
    """``jobs`` Workers, each driven by a thread of this process, taking tasks in order from one list:
    every task keeps a Worker's isolation. Outcomes come in the order tasks finish; leaving the ``with``
    block early kills the running children."""

    def __init__(self, jobs: int):
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        self.jobs = jobs
        self._lock = threading.Lock()
        self._stopping = False
        self._keep: Callable[[Any], bool] = lambda key: True
        self._workers: list[Worker] = []
        self._running: dict[int, Any] = {}  # worker number -> key of the task it runs
        self._cancels: list[threading.Event] = []  # per worker; set and cleared under the lock only
        self._threads: list[threading.Thread] = []

    def cancel(self, keep: Callable[[Any], bool]) -> None:
        """Drop every task whose key ``keep`` refuses: not started, or its child killed and its outcome never comes."""
        with self._lock:
            self._keep = keep
            for number, key in self._running.items():
                if not keep(key):
                    self._cancels[number].set()

    def outcomes(self, function: Callable[[Any], Any], tasks: list[tuple[Any, Any]], timeout: float):
        """Run every task on the workers (at most ``jobs`` at once, each in its own child)."""
        pending = iter(tasks)
        answers: queue.Queue = queue.Queue()

        def drive(number: int, worker: Worker) -> None:
            try:
                while True:
                    with self._lock:
                        task = None if self._stopping else next((t for t in pending if self._keep(t[0])), None)
                        if task is None:
                            return
                        self._running[number] = task[0]
                        self._cancels[number].clear()
                    outcome = worker.run(function, task[1], timeout, cancel=self._cancels[number])
                    with self._lock:
                        del self._running[number]
                        dropped = self._stopping or not self._keep(task[0])
                    if not dropped:
                        answers.put((task[0], outcome))
            finally:
                answers.put(None)  # this thread is done

        self._workers = [Worker() for _ in range(max(1, min(self.jobs, len(tasks))))]
        self._cancels = [threading.Event() for _ in self._workers]
        self._threads = [threading.Thread(target=drive, args=(number, worker), name=f"check-worker-{number}",
                                          daemon=True) for number, worker in enumerate(self._workers)]
        for thread in self._threads:
            thread.start()
        busy = len(self._threads)
        while busy:
            try:
                answer = answers.get(timeout=0.5)  # a timeout, so that a signal's exception is raised promptly
            except queue.Empty:
                continue
            if answer is None:
                busy -= 1
            else:
                yield answer

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._stopping = True
            for event in self._cancels:
                event.set()
        for thread in self._threads:
            thread.join()
        for worker in self._workers:
            worker.stop()
