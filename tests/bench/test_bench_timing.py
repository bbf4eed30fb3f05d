"""bench.timing: interleaved takes samples in turn, after the warmups, scaled per call."""

import contextlib

from gathermultiaxis.bench.timing import interleaved


def test_calls_interleave_after_warmups_and_samples_are_scaled():
    calls_made = []
    ticks = iter(range(0, 1000, 2))  # each clock reading 2 s after the previous one
    entered = []

    @contextlib.contextmanager
    def around(name):
        entered.append(name)
        yield

    samples = interleaved({"a": lambda: calls_made.append("a"), "b": lambda: calls_made.append("b")},
                          repeats=3, warmups=2, clock=lambda: next(ticks), scale=10.0, per_sample=4, around=around)
    assert calls_made[:4] == ["a", "a", "b", "b"]  # warmups, each call's own
    assert calls_made[4:] == (["a"] * 4 + ["b"] * 4) * 3
    assert entered == ["a", "b"] * 3
    # a sample: 2 s between its two clock readings, over 4 calls, times 10
    assert samples == {"a": [5.0] * 3, "b": [5.0] * 3}


def test_real_clock_gives_one_sample_per_repeat():
    samples = interleaved({"x": lambda: sum(range(100))}, repeats=5, warmups=0)
    assert len(samples["x"]) == 5 and all(s >= 0 for s in samples["x"])
