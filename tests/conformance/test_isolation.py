"""The runner's child process: a crash or a hang costs one task, is named, and the next task runs."""

import os
import signal
import subprocess
import sys
import time

from gathermultiaxis.conformance.isolation import Worker, report_phase


def crash(_):
    report_phase("about to crash")
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(seconds):
    report_phase("sleeping")
    time.sleep(seconds)


def square(x):
    return x * x


def fail(_):
    raise ValueError("no good")


def test_crash_hang_and_error_are_outcomes_and_the_worker_goes_on():
    with Worker() as worker:
        assert worker.run(square, 7, timeout=60).value == 49
        crashed = worker.run(crash, None, timeout=60)
        assert (crashed.status, crashed.phase) == ("crashed", "about to crash")
        assert "SIGSEGV" in crashed.detail
        assert worker.run(square, 3, timeout=60).value == 9  # a new child took over
        hung = worker.run(hang, 60, timeout=2)
        assert (hung.status, hung.phase) == ("timed out", "sleeping") and "2 s" in hung.detail
        raised = worker.run(fail, None, timeout=60)
        assert (raised.status, raised.detail) == ("raised", "ValueError: no good")
        assert worker.run(square, 4, timeout=60).value == 16


def test_the_child_ignores_ctrl_c():
    """SIGINT goes to the whole process group at a terminal; the parent decides what it means."""
    with Worker() as worker:
        assert worker.run(square, 2, timeout=60).value == 4
        os.kill(worker._process.pid, signal.SIGINT)
        assert worker.run(square, 5, timeout=60).value == 25


PLAIN_SCRIPT = """
from gathermultiaxis.conformance import check
from gathermultiaxis.conformance.cases import find_sources
from gathermultiaxis.examples import EXAMPLE_PATH

report = check.run(find_sources([str(EXAMPLE_PATH)]))
print(report.summary_line())
"""


def test_a_script_without_a_main_guard_is_not_rerun_by_the_worker(tmp_path):
    """Issue 30 item 13: the README's "From Python" lines in a plain script. With multiprocessing's spawn
    the child re-ran the script, the model was "failed" (the check crashed while starting) and stop()
    raised AttributeError."""
    script = tmp_path / "plain_script.py"
    script.write_text(PLAIN_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == ["1 passed, 0 failed, 0 not compared, 0 not runnable, 0 builtin wrong"]
    assert "Traceback" not in done.stderr, done.stderr
