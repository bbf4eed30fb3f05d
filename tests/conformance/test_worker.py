"""conformance.worker: the child process module runs tasks sent down its pipe and answers on the other."""

import math
import os
import subprocess
import sys
from multiprocessing.connection import Connection

import gathermultiaxis.conformance.worker as worker
from gathermultiaxis.conformance.isolation import Worker


def test_importing_the_module_serves_nothing():
    assert callable(worker.serve)  # imported without running: the loop starts only under ``-m``
    assert Worker.WORKER_MODULE == worker.__name__


def test_child_runs_tasks_until_told_to_stop():
    task_read, task_write = os.pipe()
    answer_read, answer_write = os.pipe()
    child = subprocess.Popen([sys.executable, "-m", worker.__name__, str(task_read), str(answer_write),
                              str(os.getpid())], pass_fds=(task_read, answer_write), stdin=subprocess.DEVNULL)
    os.close(task_read)
    os.close(answer_write)
    tasks, answers = Connection(task_write, readable=False), Connection(answer_read, writable=False)
    try:
        tasks.send(list(sys.path))
        tasks.send((math.sqrt, 16.0))
        assert answers.recv() == ("done", 4.0)
        tasks.send((int, "not a number"))
        status, detail = answers.recv()
        assert status == "raised" and detail.startswith("ValueError")
        tasks.send(None)
        assert child.wait(timeout=30) == 0
    finally:
        tasks.close()
        answers.close()
        if child.poll() is None:
            child.kill()
            child.wait()
