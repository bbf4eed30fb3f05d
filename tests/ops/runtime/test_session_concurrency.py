"""Many threads on own and shared sessions of a rewritten model; sessions created and dropped in a loop, and
freed as soon as they are dropped."""

import gc
import os
import threading
import weakref

import numpy as np
import onnxruntime as ort
from sessions import builtin_session, custom_session
from support import assert_bit_identical

from gathermultiaxis import GatherIndexError, session_options
from gathermultiaxis.examples import build_example_model, example_inputs
from gathermultiaxis.graphs import rewrite_model

THREADS, RUNS = 8, 200


def test_threads_on_own_and_shared_sessions(report_line):
    original = build_example_model()
    rewritten, _ = rewrite_model(original)
    builtin = builtin_session(original)
    feeds = [example_inputs(batch=1 + i % 3, sequence=2 + i, seed=i) for i in range(4)]
    expected = [builtin.run(None, f) for f in feeds]
    bad = dict(feeds[0], positions=np.full_like(feeds[0]["positions"], 99))  # out of range on every thread
    shared = custom_session(rewritten)
    counts = {"bit-exact": 0, "raised as expected": 0, "wrong": 0}
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def worker(number):
        own = custom_session(rewritten)
        start.wait()
        for run in range(RUNS):
            for sess in (own, shared):
                outcome = "wrong"
                if (run + number) % 10 == 0:  # errors from one thread must not leak into another's run
                    try:
                        sess.run(None, bad)
                    except GatherIndexError as error:
                        outcome = "raised as expected" if "index 99" in str(error) else "wrong"
                else:
                    which = (run + number) % len(feeds)
                    outputs = sess.run(None, feeds[which])
                    try:
                        for a, e in zip(outputs, expected[which]):
                            assert_bit_identical(a, e)
                        outcome = "bit-exact"
                    except AssertionError:
                        pass
                with lock:
                    counts[outcome] += 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = sum(counts.values())
    report_line(f"concurrency: {THREADS} threads x {RUNS} runs x (own + shared session) = {total} runs: "
                f"{counts['bit-exact']} bit-exact, {counts['raised as expected']} raised as expected, "
                f"{counts['wrong']} wrong")
    assert total == THREADS * RUNS * 2 and counts["wrong"] == 0
    assert counts["raised as expected"] == THREADS * RUNS * 2 // 10


def resident_mib() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_sessions_created_and_dropped_do_not_leak(report_line):
    rewritten, _ = rewrite_model(build_example_model())
    feeds = example_inputs()

    def cycle(count):
        for _ in range(count):
            sess = custom_session(rewritten)
            sess.run(None, feeds)
            del sess
        gc.collect()

    cycle(50)  # warm-up: allocator pools, lazily loaded code
    before = resident_mib()
    cycle(400)
    growth = resident_mib() - before
    report_line(f"sessions created and dropped: 400 after warm-up, resident memory grew {growth:.1f} MiB "
                f"({growth * 1024 / 400:.1f} KiB per session)")
    assert growth < 16, f"{growth:.1f} MiB for 400 sessions"


def test_a_session_made_with_session_options_is_freed_when_dropped():
    """No reference cycle keeps it (and ORT's memory for its model) alive until the cyclic collector
    runs: its guarded run methods are its class's. (After a run that raised, the exception's traceback
    holds its frames, the session's among them, as any Python exception does.) A session used only for
    one call, never named, runs."""
    rewritten, _ = rewrite_model(build_example_model())
    model = rewritten.SerializeToString()
    gc.disable()
    try:
        ort.InferenceSession(model, session_options(), providers=["CPUExecutionProvider"]).run(None, example_inputs())
        sess = ort.InferenceSession(model, session_options(), providers=["CPUExecutionProvider"])
        assert getattr(sess.run, "__wrapped__", None) is not None  # guarded: op errors reach its runs
        assert isinstance(sess, ort.InferenceSession) and type(sess).__name__ == "InferenceSession"
        sess.run(None, example_inputs())
        alive = weakref.ref(sess)
        del sess
        assert alive() is None
    finally:
        gc.enable()
