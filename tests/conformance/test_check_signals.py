"""`check` stopped by a signal (issue 18 item 4): SIGTERM gets what Ctrl-C gets (the summary, the
partial --json report, exit status 143), and the worker process never outlives the runner, even when
the runner is killed with SIGKILL and cannot clean up."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.conformance.isolation import Worker
from gathermultiaxis.conformance.reportfile import read_report
from gathermultiaxis.examples import EXAMPLE_PATH

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to find the worker")


def hanging_model(path: Path) -> None:
    """A model whose original run takes hours: a Gather, then a Loop of 2**40 iterations."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), helper.make_node("Identity", ["v"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2])])
    nodes = [helper.make_node("Gather", ["x", "idx"], ["y"], axis=0),
             helper.make_node("Loop", ["n", "c", "y"], ["out"], body=body)]
    graph = helper.make_graph(nodes, "hang", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                                              helper.make_tensor_value_info("idx", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
                              [numpy_helper.from_array(np.array(2**40, np.int64), "n"),
                               numpy_helper.from_array(np.array(True), "c")])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has ended (its parent, the test, has not reaped it: it is not ours)


def start_check_on_a_hanging_model(tmp_path: Path, report: Path):
    """Start `check -v example hang.onnx --json report`; return it once the example's verdict is out and
    the worker is running the hanging model, with the worker's pid."""
    hanging_model(tmp_path / "hang.onnx")
    runner = subprocess.Popen([sys.executable, "-m", "gathermultiaxis", "check", "-v", str(EXAMPLE_PATH),
                               str(tmp_path / "hang.onnx"), "--json", str(report), "--timeout", "3000"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = runner.stdout.readline()
    assert first.startswith("passed"), first + runner.stderr.read()
    workers = []
    deadline = time.monotonic() + 60
    while not workers and time.monotonic() < deadline:
        workers = [c for c in children(runner.pid)
                   if Worker.WORKER_MODULE in Path(f"/proc/{c}/cmdline").read_bytes().decode(errors="replace")]
        time.sleep(0.2)
    assert workers, "no worker process found"
    time.sleep(2)  # well into the hanging run
    return runner, workers


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def test_sigterm_gets_the_summary_the_partial_report_and_stops_the_worker(tmp_path):
    report = tmp_path / "partial.json"
    runner, workers = start_check_on_a_hanging_model(tmp_path, report)
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 143, err
    assert "Traceback" not in err and "interrupted after 1 of 2 cases (SIGTERM)" in err, err
    assert out.strip().splitlines()[-1].endswith("(interrupted)")
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and data["stopped_by"] == "SIGTERM" and data["counts"]["passed"] == 1
    assert wait_gone(workers, 5) == []


def test_the_worker_dies_with_a_killed_runner(tmp_path):
    runner, workers = start_check_on_a_hanging_model(tmp_path, tmp_path / "never.json")
    os.kill(runner.pid, signal.SIGKILL)  # no chance to clean up
    runner.communicate(timeout=60)
    assert wait_gone(workers, 10) == [], "the worker outlived the killed runner"
    # --json streams: the killed run leaves its lines (the example's verdict), which --resume continues
    partial = read_report(tmp_path / "never.json")
    assert partial["interrupted"] is True and partial["stopped_by"] == "" and partial["counts"]["passed"] == 1
