"""``check --cluster``: cases sent to a Dask cluster (the ``cluster`` extra: ``distributed``).

Each case travels by reference (a file's path, which every node must see), never as a model, and runs
in an ``isolation.Worker`` child as it does locally. A case whose Dask worker dies is not run again. Dask
cannot stop a running task, so each task watches the run's and its own ``distributed.Event``: once set,
the node kills the case's child within about a second.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Callable, Iterator

from ..graphs.modelfile import one_line
from .isolation import DEFAULT_CONNECT_TIMEOUT_S, Outcome, Worker


_node = threading.local()  # the isolated child of each Dask worker thread, reused from case to case


def check_on_node(function: Callable[[Any], Any], argument: Any, timeout: float,
                  stop_events: tuple[str, ...] = ()) -> Outcome:
    """Runs in a Dask worker: ``function(argument)`` in this thread's isolated child, killed when one
    of the ``distributed.Event``s named ``stop_events`` is set."""
    worker = getattr(_node, "worker", None)
    if worker is None:
        worker = _node.worker = Worker()
    cancel, finished = threading.Event(), threading.Event()
    if stop_events:
        from distributed import Event, get_client

        client = get_client()  # in the task's thread: the watcher has no worker context of its own

        def watch() -> None:
            try:
                events = [Event(name, client=client) for name in stop_events]
                while not finished.wait(1.0):
                    if any(event.is_set() for event in events):
                        cancel.set()
                        return
            except Exception:  # noqa: BLE001 - the scheduler gone (cluster closing): the case runs to its end
                return

        threading.Thread(target=watch, name="check-stop-watch", daemon=True).start()
    try:
        return worker.run(function, argument, timeout, cancel=cancel)
    finally:
        finished.set()


def _needs_distributed():
    try:
        import distributed
    except ImportError:
        raise ImportError("check --cluster needs Dask's distributed: pip install \"gathermultiaxis[cluster]\"") from None
    return distributed


class NoScheduler(Exception):
    """No Dask scheduler answers at the address; the message says why."""


def reach_scheduler(address: str, timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
    """Ask ``address`` who it is, within ``timeout`` seconds in all (distributed's own connect bounds neither
    the handshake nor the reply, so a silent service would hold ``Client`` for good).

    Raises:
        NoScheduler: the address is malformed, nothing answers in time, or what answers is not a scheduler.
        ImportError: Dask's distributed is not installed."""
    _needs_distributed()
    if address == "local":
        return
    import asyncio

    from distributed.comm import connect

    async def identity() -> Any:
        comm = await connect(address, timeout=timeout)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    answer: list[Any] = []

    def ask() -> None:  # in a thread of its own: the caller may be running an event loop
        try:
            answer.append(asyncio.run(asyncio.wait_for(identity(), timeout)))
        except BaseException as error:  # noqa: BLE001 - handed to the caller below
            answer.append(error)

    asker = threading.Thread(target=ask, name="check-reach-scheduler", daemon=True)
    asker.start()
    asker.join(timeout + 5.0)  # asyncio.wait_for ends it after ``timeout``; the margin is for a stuck loop
    reply = answer[0] if answer else TimeoutError()
    if isinstance(reply, (TimeoutError, asyncio.TimeoutError)) or (
            isinstance(reply, OSError) and "Timed out" in str(reply)):
        raise NoScheduler(f"no Dask scheduler answered within {timeout:g} s")
    if isinstance(reply, ValueError):
        raise NoScheduler(f"not a scheduler address ({one_line(reply)}); give tcp://HOST:PORT or 'local'")
    if isinstance(reply, BaseException):
        raise NoScheduler(f"cannot reach a Dask scheduler there ({type(reply).__name__}: {one_line(reply)})")
    kind = reply.get("type") if isinstance(reply, dict) else None
    if kind != "Scheduler":
        raise NoScheduler(f"a Dask {kind.lower()}, not the scheduler" if isinstance(kind, str) and kind
                          else "what answers there is not a Dask scheduler")


class DaskPool:
    """What ``isolation.WorkerPool`` is, on a Dask cluster (``"local"``: a ``LocalCluster`` of ``jobs`` workers);
    ``shared`` goes to every node once."""

    def __init__(self, address: str, jobs: int, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S):
        distributed = _needs_distributed()
        self._cluster = None
        if address == "local":
            self._cluster = distributed.LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                                     dashboard_address=None)
            address = self._cluster.scheduler_address
        else:
            reach_scheduler(address, connect_timeout)
        self.client = distributed.Client(address, timeout=connect_timeout)
        self._futures: dict[Any, Any] = {}
        self._stop = f"gathermultiaxis-check-{uuid.uuid4().hex}"  # the run's Event; "{it}-{key}": a case's

    def cancel(self, keep: Callable[[Any], bool]) -> None:
        """Drop the submitted tasks whose key ``keep`` refuses (running ones stopped by their Event).

        Raises:
            ImportError: Dask's distributed is not installed."""
        distributed = _needs_distributed()
        dropped = {future.key: future for future, key in self._futures.items() if not keep(key)}
        if not dropped:
            return
        running = {key for keys in self.client.processing().values() for key in keys}
        for task_key, future in dropped.items():
            if task_key in running:
                distributed.Event(f"{self._stop}-{self._futures[future]}", client=self.client).set()
        self.client.cancel(list(dropped.values()))
        for future in dropped.values():
            del self._futures[future]

    def outcomes(self, function: Callable[[Any], Any], tasks: list[tuple[Any, tuple]], timeout: float,
                 shared: Any = None) -> Iterator[tuple[Any, Outcome]]:
        """Submit every task and hand back each outcome as it finishes.

        Raises:
            ImportError: Dask's distributed is not installed."""
        distributed = _needs_distributed()
        shared_on_nodes = self.client.scatter(shared, broadcast=True) if shared is not None else None
        self._futures = {self.client.submit(_with_shared, function, argument, shared_on_nodes, timeout,
                                            (self._stop, f"{self._stop}-{key}"), pure=False, retries=0): key
                          for key, argument in tasks}
        for future in distributed.as_completed(list(self._futures)):
            key = self._futures.pop(future, None)
            if key is None or future.cancelled():
                continue
            try:
                yield key, future.result()
            except Exception as error:  # noqa: BLE001 - KilledWorker and the like: the case's verdict
                yield key, Outcome(None, "crashed", f"the Dask worker running it was lost ({type(error).__name__}: "
                                                    f"{error})", "running on the cluster")

    def __enter__(self) -> "DaskPool":
        return self

    def __exit__(self, *exc) -> None:
        if self._futures:  # ended early: the cases still running are stopped, the others never start
            _needs_distributed().Event(self._stop, client=self.client).set()
            self.client.cancel(list(self._futures))
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def _with_shared(function, argument: tuple, shared, timeout: float, stop_events: tuple[str, ...]) -> Outcome:
    return check_on_node(function, (*argument, shared) if shared is not None else argument, timeout, stop_events)
