"""conformance.cluster: `check --cluster` on a Dask cluster started here (the `cluster` extra; skipped with the
reason without it): the local report, hangs and SIGTERM, cases by name."""

import json
import os
import signal
import time
from pathlib import Path

import pytest
from test_check_scale import FUZZ, checked, start_check, verdicts, wait_for_lines

from gathermultiaxis.cli import main
from gathermultiaxis.conformance import check
from gathermultiaxis.conformance.isolation import Worker
from gathermultiaxis.examples import EXAMPLE_PATH


@pytest.fixture(scope="module")
def dask_cluster():
    try:
        from distributed import LocalCluster
    except ImportError:
        pytest.skip("Dask's distributed is not installed (pip install \".[cluster]\"): check --cluster is not tested")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def test_a_cluster_gives_the_local_report(dask_cluster, tmp_path, capsys):
    local = checked([*FUZZ, "-q"], tmp_path, capsys, "local.json")[1]
    status, remote, _, _ = checked([*FUZZ, "-q", "--cluster", dask_cluster], tmp_path, capsys)
    assert status == 0 and remote["counts"] == local["counts"] and verdicts(remote) == verdicts(local)


def test_a_hang_on_the_cluster_is_that_case_s_verdict(dask_cluster, tmp_path, capsys):
    from test_check_signals import hanging_model

    hanging_model(tmp_path / "hangs.onnx")
    status, report, _, _ = checked([str(tmp_path / "hangs.onnx"), str(EXAMPLE_PATH), "--timeout", "20", "-q",
                                    "--cluster", dask_cluster], tmp_path, capsys)
    hung, example = report["results"]
    assert hung["verdict"] == "not runnable" and "hung while running the original model" in hung["detail"], hung
    assert example["verdict"] == "passed" and status == 3


def case_processes() -> dict[int, int]:
    """{pid: CPU ticks} of the isolated case processes descending from this test process (the Dask
    workers' children; other runs on the machine are not ours)."""
    parents, ticks, ours = {}, {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)
            parents[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])  # ppid, utime + stime
            if Worker.WORKER_MODULE in (stat.parent / "cmdline").read_bytes().decode(errors="replace"):
                ours[pid] = ticks[pid]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass

    def descends(pid: int) -> bool:
        while pid > 1:
            if pid == os.getpid():
                return True
            pid = parents.get(pid, 0)
        return False

    return {pid: value for pid, value in ours.items() if descends(pid)}


def spinning(seconds: float = 3.0) -> list[int]:
    """Case processes that used CPU during ``seconds`` (an idle one waits for its next task and uses none;
    the threshold allows for a machine so loaded that a busy one gets a tenth of a CPU)."""
    before = case_processes()
    time.sleep(seconds)
    after = case_processes()
    return [pid for pid, value in after.items() if value - before.get(pid, value) > seconds * 3]


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc to watch the case processes")
def test_sigterm_stops_a_hung_case_on_the_cluster(dask_cluster, tmp_path):
    """Dask cannot stop a running task: the node watches the run's Event and kills the case's child."""
    from test_check_signals import hanging_model

    hanging_model(tmp_path / "hangs.onnx")
    report = tmp_path / "r.json"
    child = start_check([str(EXAMPLE_PATH), str(tmp_path / "hangs.onnx"), "--timeout", "3000", "--cluster", dask_cluster],
                        report)
    wait_for_lines(child, 1)  # the example's verdict; the hanging model runs on the other Dask worker
    assert spinning(), "the hanging model is not running"
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 143, err
    time.sleep(3)  # the node looks at the Event every second
    assert spinning() == [], "the hung case still runs on the cluster after the run ended"
    assert json.loads(report.read_text())["counts"]["passed"] == 1


@pytest.mark.slow
def test_the_default_suite_on_a_cluster_goes_by_name(dask_cluster, tmp_path, capsys):
    local = checked(["-q"], tmp_path, capsys, "local.json")[1]
    status, remote, _, _ = checked(["-q", "--cluster", dask_cluster], tmp_path, capsys)
    assert status == 0 and remote["counts"] == local["counts"] and verdicts(remote) == verdicts(local)


def test_a_case_made_in_python_is_not_sent_to_a_cluster(dask_cluster):
    import onnx

    from gathermultiaxis.conformance.cases import CheckCase

    with pytest.raises(ValueError, match="a model made in Python"):
        check.run([CheckCase("mine", onnx.load_model(str(EXAMPLE_PATH)))], cluster=dask_cluster)


def test_a_dask_worker_s_address_is_not_taken_for_the_scheduler(dask_cluster, capsys):
    from distributed import Client

    with Client(dask_cluster) as client:
        worker = next(iter(client.scheduler_info()["workers"]))
    status = main(["check", str(EXAMPLE_PATH), "--cluster", worker])
    err = capsys.readouterr().err
    assert status == 2 and f"--cluster {worker}: a Dask worker, not the scheduler" in err and err.count("\n") == 1, err
