"""`check --resume` with a report that is JSON but not one check writes, or no regular file; `check
--cluster` with an address that is no Dask scheduler; a negative `--seed`: one line, exit status 2,
before the run."""

import json
import os
import socket
import threading
import time

import pytest
from test_check_bad_input import one_line_exit_2

from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH


@pytest.fixture(scope="module")
def example_report(tmp_path_factory):
    """The --json report of `check` on the bundled example, as the document a finished run writes."""
    path = tmp_path_factory.mktemp("report") / "r.json"
    assert main(["check", str(EXAMPLE_PATH), "-q", "--json", str(path)]) == 0
    return json.loads(path.read_text())


def as_lines(report: dict, run: dict | None = None) -> str:
    """The report as the lines a killed run leaves: the run's head line, then a line per result."""
    head = run if run is not None else {"mode": report["mode"], "command": report["command"],
                                        "versions": report["versions"], "cases": len(report["results"])}
    return "\n".join([json.dumps({"run": head}), *(json.dumps({"result": r}) for r in report["results"])]) + "\n"


def with_result(report: dict, **changes) -> dict:
    return dict(report, results=[dict(report["results"][0], **changes)])


def resume_with(tmp_path, text: str) -> list[str]:
    path = tmp_path / "resumed.json"
    path.write_text(text)
    return ["check", str(EXAMPLE_PATH), "-q", "--resume", str(path)]


@pytest.mark.parametrize("form", ["document", "lines"])
def test_a_report_check_wrote_resumes(example_report, tmp_path, capsys, form):
    text = json.dumps(example_report) if form == "document" else as_lines(example_report)
    assert main(resume_with(tmp_path, text)) == 0
    assert json.loads((tmp_path / "resumed.json").read_text())["results"] == example_report["results"]


MALFORMED = [
    ("results not a list", lambda r: json.dumps(dict(r, results={"case": 1})), "its results are {\"case\": 1}, not a list"),
    ("a result not an object", lambda r: json.dumps(dict(r, results=[3])), "result 1 is 3, not an object"),
    ("a verdict not a string", lambda r: json.dumps(with_result(r, verdict=7)), "result 1: its 'verdict' is 7, not a string"),
    ("an unknown verdict", lambda r: json.dumps(with_result(r, verdict="fine")), 'verdict "fine" is none of passed, failed'),
    ("no verdict", lambda r: json.dumps(dict(r, results=[{"name": "x", "case": "x"}])), "result 1 has no 'verdict'"),
    ("a case key not a string", lambda r: json.dumps(with_result(r, case=["x"])), "its 'case' is [\"x\"], not a string"),
    ("a count not a number", lambda r: json.dumps(with_result(r, rewritten="8")), "its 'rewritten' is \"8\", not a whole number"),
    ("left reasons not strings", lambda r: json.dumps(with_result(r, left_reasons=5)), "its 'left_reasons' is 5, not a list of strings"),
    ("a case twice", lambda r: json.dumps(dict(r, results=r["results"] * 2)), "is in it twice"),
    ("a head line without command", lambda r: as_lines(r, {"mode": "gathers", "versions": {}}), "line 1: the run has no 'command'"),
    ("a head line not an object", lambda r: as_lines(r, [1]), "line 1: the run is [1], not an object"),
    ("a result line not an object", lambda r: as_lines(dict(r, results=[[1]])), "result 1 is [1], not an object"),
    ("nesting too deep to parse", lambda r: "[" * 100_000 + "]" * 100_000, "not a check --json report"),
]


@pytest.mark.parametrize("what, text, message", MALFORMED, ids=[case[0] for case in MALFORMED])
def test_a_malformed_report_is_refused_before_the_run(example_report, tmp_path, capsys, what, text, message):
    args = resume_with(tmp_path, text(example_report))
    before = (tmp_path / "resumed.json").read_bytes()
    err = one_line_exit_2(args, capsys, message)
    assert err.startswith(f"gathermultiaxis check: --resume {tmp_path / 'resumed.json'}: "), err
    assert (tmp_path / "resumed.json").read_bytes() == before  # the run, which rewrites it, never started


def test_resume_from_a_fifo_is_refused_without_opening_it(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.json")
    for extra in ([], ["--json", str(tmp_path / "out.json")]):
        # opening the FIFO to read would block until a writer comes: no writer ever does
        one_line_exit_2(["check", str(EXAMPLE_PATH), "--resume", str(tmp_path / "pipe.json"), *extra], capsys,
                        "pipe.json: a FIFO, not a report file")
    one_line_exit_2(["check", str(EXAMPLE_PATH), "--resume", str(tmp_path)], capsys, ": a folder, not a report file")


@pytest.mark.parametrize("args", [
    ["check", str(EXAMPLE_PATH), "--seed", "-3"],
    ["check", "--fuzz", "2", "--seed", "-1"],
    ["check", "--mutate", "1", "--seed", "-1"],
    ["policies", str(EXAMPLE_PATH), "--seed", "-1"],
])
def test_a_negative_seed_is_refused_when_parsed(args, capsys):
    one_line_exit_2(args, capsys, f"argument --seed: a seed is 0 or more (NumPy's generators take no negative "
                                  f"seed), got {args[-1]}")


@pytest.fixture
def silent_server():
    """A TCP service that accepts connections and never says a word: the address of its port."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted, stop = [], threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}", accepted
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


def test_an_address_with_no_dask_scheduler_is_refused_in_bounded_time(silent_server, tmp_path, capsys):
    pytest.importorskip("distributed", reason="Dask's distributed is not installed (pip install \".[cluster]\"): "
                                              "check --cluster is not tested")
    address, accepted = silent_server
    report = tmp_path / "r.json"
    for where, message in [("nonsense", "--cluster nonsense: not a scheduler address (missing port number"),
                           ("tcp://127.0.0.1:1", "--cluster tcp://127.0.0.1:1: no Dask scheduler answered within 1 s"),
                           (address, f"--cluster {address}: no Dask scheduler answered within 1 s")]:
        started = time.monotonic()
        one_line_exit_2(["check", str(EXAMPLE_PATH), "--cluster", where, "--cluster-timeout", "1",
                         "--json", str(report)], capsys, message)
        assert time.monotonic() - started < 10, where  # the timeout, and a margin for a busy machine (not 30 s, not for good)
        assert not report.exists()  # before the run: no report started
    assert accepted  # the silent service was reached: its silence, not a refused connection, was timed
    one_line_exit_2(["check", str(EXAMPLE_PATH), "--cluster-timeout", "1"], capsys,
                    "--cluster-timeout goes with --cluster")
