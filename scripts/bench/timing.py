"""The one timing loop of the benchmarks: calls timed round-robin, so that the machine's drift, caches and
other jobs fall on every call alike."""

from __future__ import annotations

import contextlib
import time
from typing import Callable, ContextManager, Mapping


def interleaved(calls: Mapping[str, Callable[[], object]], repeats: int, warmups: int = 1,
                clock: Callable[[], float] = time.perf_counter, scale: float = 1e3,
                per_sample: int = 1, around: Callable[[str], ContextManager] | None = None) -> dict[str, list[float]]:
    """``repeats`` samples of each call by name, taken in turn (A, B, C, A, ...) after ``warmups`` runs.

    A sample is the mean of ``per_sample`` calls times ``scale``; ``around(name)`` is entered around each
    sample of that call, outside the timed region."""
    for call in calls.values():
        for _ in range(warmups):
            call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            with around(name) if around else contextlib.nullcontext():
                start = clock()
                for _ in range(per_sample):
                    call()
                samples[name].append((clock() - start) / per_sample * scale)
    return samples


__all__ = ["interleaved"]
