"""Conformance at scale: `check --jobs N` gives the serial run's report, a streamed --json report survives
Ctrl-C and SIGKILL and `--resume` completes it to the same counts, and the progress line (`check --cluster`:
test_cluster.py)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gathermultiaxis.cli import main
from gathermultiaxis.conformance.isolation import WorkerPool
from gathermultiaxis.conformance.reportfile import read_report

FUZZ = ["--fuzz", "40", "--seed", "11"]
SAME_IN_EVERY_RUN = ("case", "name", "verdict", "rewritten", "left", "detail", "expected", "compared", "both_raised",
                     "left_reasons", "source")


def checked(args, tmp_path, capsys, name="r.json"):
    """(exit status, report, stdout, stderr) of `check ARGS --json FILE`."""
    report = tmp_path / name
    status = main(["check", *args, "--json", str(report)])
    captured = capsys.readouterr()
    return status, read_report(report), captured.out, captured.err


def verdicts(report) -> list[tuple]:
    """What a run must give whatever its --jobs (timings differ from run to run)."""
    return [tuple(json.dumps(r[key]) for key in SAME_IN_EVERY_RUN) for r in report["results"]]


def test_jobs_give_the_serial_report(tmp_path, capsys):
    serial = checked([*FUZZ, "--jobs", "1", "-q"], tmp_path, capsys, "serial.json")
    parallel = checked([*FUZZ, "--jobs", "2", "-q"], tmp_path, capsys, "parallel.json")
    assert serial[0] == parallel[0] == 0
    assert serial[1]["summary"] == parallel[1]["summary"] == "40 passed, 0 failed, 0 not compared, 0 not runnable, 0 builtin wrong"
    assert serial[2] == parallel[2]  # the table and the summary line
    assert verdicts(serial[1]) == verdicts(parallel[1])
    assert [r["case"] for r in parallel[1]["results"]] == [f"fuzz seed {seed}" for seed in range(11, 51)]


def test_the_report_is_one_document_in_case_order_once_the_run_ends(tmp_path, capsys):
    status, _, _, _ = checked([*FUZZ, "-q"], tmp_path, capsys)
    document = json.loads((tmp_path / "r.json").read_text())  # today's --json format, as before streaming
    assert status == 0 and document["counts"]["passed"] == 40 and document["interrupted"] is False
    assert [r["case"] for r in document["results"]] == [f"fuzz seed {seed}" for seed in range(11, 51)]


def crash(_):
    os.kill(os.getpid(), signal.SIGSEGV)


def square(x):
    return x * x


def hang(seconds):
    time.sleep(seconds)


def test_a_cancelled_task_is_stopped_and_never_reported():
    """What --fail-fast uses with several jobs: once case 1 failed, case 2 (running, hung) is killed and
    cases 3 and 4 never start; case 0 still comes in."""
    tasks = [(0, (hang, 3)), (1, (crash, None)), (2, (hang, 600)), (3, (square, 3)), (4, (square, 4))]
    started, seen = time.monotonic(), {}
    with WorkerPool(2) as pool:
        for key, outcome in pool.outcomes(run_pair, tasks, 600):
            seen[key] = outcome.status
            if outcome.status == "crashed":
                pool.cancel(lambda k, failed=key: k < failed)
    assert seen == {0: "done", 1: "crashed"}
    assert time.monotonic() - started < 120  # not the 600 s of the hung task


def run_pair(task):
    function, argument = task
    return function(argument)


def start_check(args, report: Path) -> subprocess.Popen:
    # SIGINT at its default in the child (a test run started in the background inherits it ignored)
    return subprocess.Popen([sys.executable, "-m", "gathermultiaxis", "check", *args, "-v", "--jobs", "2",
                             "--json", str(report)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_lines(child: subprocess.Popen, count: int) -> None:
    """Wait for ``count`` result lines of ``check -v`` (not the indented inputs line under each)."""
    results = (line for line in child.stdout if not line.startswith(" "))
    for number, _ in enumerate(results, 1):
        if number == count:
            return
    pytest.fail("the run ended early: " + child.stderr.read())


def resumed(args, report: Path, tmp_path, capsys):
    status = main(["check", *args, "-v", "--resume", str(report)])
    return status, read_report(report), capsys.readouterr().out


def test_ctrl_c_then_resume_gives_the_uninterrupted_counts(tmp_path, capsys):
    whole = checked([*FUZZ, "-q"], tmp_path, capsys, "whole.json")[1]
    report = tmp_path / "partial.json"
    child = start_check(FUZZ, report)
    wait_for_lines(child, 5)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    partial = json.loads(report.read_text())  # Ctrl-C still writes the whole document
    assert partial["interrupted"] is True and 5 <= len(partial["results"]) < 40
    status, final, out = resumed(FUZZ, report, tmp_path, capsys)
    assert status == 0 and final["interrupted"] is False
    assert final["counts"] == whole["counts"] and verdicts(final) == verdicts(whole)
    assert len([line for line in out.splitlines() if line.startswith("passed ")]) == 40 - len(partial["results"])


def test_a_killed_run_leaves_lines_that_resume_completes(tmp_path, capsys):
    whole = checked([*FUZZ, "-q"], tmp_path, capsys, "whole.json")[1]
    report = tmp_path / "killed.json"
    child = start_check(FUZZ, report)
    wait_for_lines(child, 5)
    child.kill()  # SIGKILL: nothing is cleaned up or rewritten
    child.communicate(timeout=60)
    lines = report.read_text().splitlines()
    assert "run" in json.loads(lines[0]) and all("result" in json.loads(line) for line in lines[1:])
    partial = read_report(report)
    assert partial["interrupted"] is True and partial["stopped_by"] == "" and len(partial["results"]) >= 5
    status, final, _ = resumed(FUZZ, report, tmp_path, capsys)
    assert status == 0 and final["counts"] == whole["counts"] and verdicts(final) == verdicts(whole)


@pytest.mark.parametrize("other, message", [
    (["--fuzz", "40", "--seed", "12"], "of its cases are not in this run (first: 'fuzz seed 11')"),
    ([*FUZZ, "--lowered"], "that run compared in mode 'default', this one in 'lowered'"),
])
def test_resume_refuses_the_report_of_another_run(tmp_path, capsys, other, message):
    checked(["--fuzz", "3", "--seed", "11", "-q"], tmp_path, capsys)
    status = main(["check", *other, "--resume", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert status == 2 and message in err and err.count("\n") == 1, err


def test_the_report_names_the_default_mode_default_and_resumes_one_saying_gathers(tmp_path, capsys):
    """The JSON report names the default comparison as the docs do ("default"); a report written when it was
    named "gathers" still resumes, and is rewritten saying "default"."""
    _, report, _, _ = checked(["--fuzz", "3", "--seed", "11", "-q"], tmp_path, capsys)
    assert report["mode"] == "default"
    report["mode"], report["results"] = "gathers", report["results"][:2]
    (tmp_path / "old.json").write_text(json.dumps(report))
    status, final, out = resumed(["--fuzz", "3", "--seed", "11"], tmp_path / "old.json", tmp_path, capsys)
    assert status == 0 and final["mode"] == "default" and len(final["results"]) == 3
    assert len([line for line in out.splitlines() if line.startswith("passed ")]) == 1  # only the missing case ran


def test_progress_shows_rate_and_eta_and_is_quiet_under_q(tmp_path, capsys):
    _, _, _, err = checked(["--fuzz", "4", "-q"], tmp_path, capsys)
    assert err == ""
    _, _, _, err = checked(["--fuzz", "4"], tmp_path, capsys, "r2.json")
    try:
        import tqdm  # noqa: F401
    except ImportError:
        print("tqdm is not installed (the progress extra): the plain count of cases is checked")
        assert "[4/4]" in err
        return
    # the last line: count, rate ("2.5case/s", or "1.06s/case" when slower) and elapsed time
    assert "[4/4] 100%" in err and ("case/s" in err or "s/case" in err), err
