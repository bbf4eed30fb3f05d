"""The ``check --json`` report file: streamed while the run goes, one JSON document once it ends, and
what ``--resume`` reads back.

While the run goes, the file is JSON Lines: a first line ``{"run": {"mode", "command", "versions",
"cases"}}``, then ``{"result": {...}}`` per finished case, in the order cases finish, flushed at once.
When the run ends (all done, Ctrl-C or SIGTERM), the file is replaced, atomically, by the report as one
JSON document (``check.Report.as_dict``: the format of ``--json`` before streaming, each result with its
``case`` key), results in the order of the cases. Only a run killed outright (SIGKILL, a power cut)
leaves the lines; ``read_report`` and ``--resume`` take either form (a last line cut short is skipped).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import TextIO

from ..graphs.modelfile import write_bytes_atomic
from .cases import BadInput
from .check import CheckResult, Report


def read_report(path: str | os.PathLike) -> dict:
    """A ``check --json`` report as ``Report.as_dict`` gives it, from either form (see the module
    docstring); for the lines of a run killed outright, ``interrupted`` is true and ``stopped_by`` empty.
    Raises BadInput when the file is neither.

    Args:
        path: the report file.

    Returns:
        The report as a dict (``Report.as_dict``'s form).

    Raises:
        BadInput: the file is not a check --json report.
    """
    text = Path(path).read_text()
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        document = None
    if isinstance(document, dict) and "results" in document:
        return document
    lines = text.splitlines()
    run, results = None, []
    for number, line in enumerate(lines):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) - 1:  # cut short by the kill
                break
            raise BadInput(f"{path}: line {number + 1} is not JSON: not a check --json report") from None
        if isinstance(entry, dict) and "run" in entry and number == 0:
            run = entry["run"]
        elif isinstance(entry, dict) and "result" in entry and run is not None:
            results.append(entry["result"])
        else:
            raise BadInput(f"{path}: line {number + 1} is neither the run nor a result: not a check --json report")
    if run is None:
        raise BadInput(f"{path}: not a check --json report")
    report = Report([CheckResult(**_known_fields(r)) for r in results], interrupted=True, mode=run["mode"],
                    command=run["command"], versions=run["versions"])
    return report.as_dict()


def _known_fields(result: dict) -> dict:
    names = {f.name for f in fields(CheckResult)}
    return {key: value for key, value in result.items() if key in names}


# Reports written before the default mode was named as the docs name it ("default") say "gathers".
OLD_MODE_NAMES = {"gathers": "default"}


def resumed_results(path: str | os.PathLike, mode: str, keys: list[str]) -> list[CheckResult]:
    """The finished cases of the report at ``path`` (``--resume``), checked to belong to this run: the
    same mode, and every case among ``keys`` (``check.case_keys`` of this run's sources).

    Args:
        path: the report file (``--resume``).
        mode: this run's mode (a ``CheckMode`` value).
        keys: this run's case keys.

    Returns:
        The report's results, a list of ``CheckResult``.

    Raises:
        BadInput: the file cannot be read or is no report, its mode differs, its results carry no case key,
            or a case is not in this run.
    """
    try:
        report = read_report(path)
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"--resume {path}: cannot read ({error})") from None
    if report.get("mode") != mode and OLD_MODE_NAMES.get(str(report.get("mode"))) != mode:
        raise BadInput(f"--resume {path}: that run compared in mode {report.get('mode')!r}, this one in {mode!r}")
    results = [CheckResult(**_known_fields(r)) for r in report["results"]]
    unnamed = [r.name for r in results if not r.case]
    if unnamed:
        raise BadInput(f"--resume {path}: its results carry no case key (a report from before --resume); run again")
    strangers = [r.case for r in results if r.case not in set(keys)]
    if strangers:
        raise BadInput(f"--resume {path}: {len(strangers)} of its cases are not in this run (first: {strangers[0]!r}); "
                       f"resume with the same paths, or the same --fuzz and --seed")
    return results


class ReportFile:
    """Writes the report at ``path`` as the module docstring says. ``start`` claims the file (an existing
    one only with ``overwrite``), ``add`` streams a result, ``finish`` writes the final document, unless
    another run replaced the file meanwhile (then ModelFileError: "already exists")."""

    def __init__(self, path: str | os.PathLike, overwrite: bool):
        self.path, self.overwrite = Path(path), overwrite
        self._stream: TextIO | None = None  # open from start() to finish()
        self._left_as: tuple[int, int] | None = None  # (inode, size) after our last write

    def start(self, report: Report, cases: int, finished: list[CheckResult]) -> None:
        """Write the run's head line and the ``finished`` results, and open the file for ``add``.

        Args:
            report: the run's (empty) report: its mode, command and versions are written.
            cases: the number of cases in the run.
            finished: results kept from an earlier run (``--resume``).

        Returns:
            None.

        Raises:
            ModelFileError: the file exists (without ``overwrite``) or its folder is missing.
        """
        head = {"run": {"mode": report.mode, "command": report.command, "versions": report.versions, "cases": cases}}
        lines = [json.dumps(head)] + [json.dumps({"result": asdict(r)}) for r in finished]
        write_bytes_atomic(self.path, ("\n".join(lines) + "\n").encode(), overwrite=self.overwrite)
        self._stream = open(self.path, "a", encoding="utf-8")
        self._note()

    def _note(self) -> None:
        assert self._stream is not None  # opened by start()
        status = os.fstat(self._stream.fileno())
        self._left_as = (status.st_ino, status.st_size)

    def add(self, result: CheckResult) -> None:
        """Append one result line (flushed).

        Args:
            result: the case's result.

        Returns:
            None.
        """
        assert self._stream is not None  # opened by start()
        self._stream.write(json.dumps({"result": asdict(result)}) + "\n")
        self._stream.flush()
        self._note()

    def finish(self, report: Report) -> None:
        """Replace the lines with the final report document.

        Args:
            report: the finished report.

        Returns:
            None.

        Raises:
            ModelFileError: another run replaced the file meanwhile.
        """
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        try:
            status = self.path.stat()
            ours = (status.st_ino, status.st_size) == self._left_as
        except FileNotFoundError:
            ours = True
        write_bytes_atomic(self.path, (json.dumps(report.as_dict(), indent=2) + "\n").encode(), overwrite=ours)
