"""The one timing loop of the benchmarks: calls timed round-robin (interleaved), so that the machine's
drift, caches and other jobs fall on every call alike. Results are samples; the callers take medians,
spreads and ratios of medians."""

from __future__ import annotations

import contextlib
import time
from typing import Callable, ContextManager, Mapping


def interleaved(calls: Mapping[str, Callable[[], object]], repeats: int, warmups: int = 1,
                clock: Callable[[], float] = time.perf_counter, scale: float = 1e3,
                per_sample: int = 1, around: Callable[[str], ContextManager] | None = None) -> dict[str, list[float]]:
    """``repeats`` samples of each call, taken in turn (A, B, C, A, B, C, ...) after ``warmups`` runs of each:
    the samples of each call, by name, in the order taken.

    A sample is ``per_sample`` back-to-back calls timed by ``clock`` (``time.perf_counter``: wall time;
    ``time.thread_time``: the calling thread's CPU time), divided by ``per_sample`` and multiplied by ``scale``
    (1e3: milliseconds; 1e6: microseconds). ``around(name)``, when given, is a context entered around each
    sample of that call, outside the timed region (to switch something on or off)."""
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
