"""The ``check --json`` report file, and what ``--resume`` reads back.

While the run goes, the file is JSON Lines: a ``{"run": {...}}`` head line, then a ``{"result": {...}}``
line per finished case, flushed at once. When the run ends (even by Ctrl-C or SIGTERM), it is replaced
atomically by one JSON document (``check.Report.as_dict``). Only a run killed outright leaves the lines;
readers take either form (a last line cut short is skipped).
"""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import Any, Callable, TextIO, get_type_hints

from ..graphs.modelfile import path_kind, write_bytes_atomic
from .cases import BadInput
from .check import VERDICTS, CheckResult, Report


def read_report(path: str | os.PathLike) -> dict:
    """A ``check --json`` report as ``Report.as_dict`` gives it, from either form (lines: ``interrupted``).

    Raises:
        BadInput: the file is not a check --json report, or a line has the wrong shape.
    """
    return _read(path)[0]


_NOT_JSON = object()


def _json_value(text: str):
    """``text`` parsed, or ``_NOT_JSON`` (also for nesting too deep to parse, or an integer too long)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return _NOT_JSON


def _read(path: str | os.PathLike) -> tuple[dict, list[CheckResult]]:
    """The report (``read_report``) and its results, each checked to be one ``check`` writes."""
    text = Path(path).read_text()
    document = _json_value(text)
    if isinstance(document, dict) and "results" in document:
        return document, _checked_results(path, document["results"])
    lines = text.splitlines()
    run, entries = None, []
    for number, line in enumerate(lines):
        entry = _json_value(line)
        if entry is _NOT_JSON:
            if number == len(lines) - 1:  # cut short by the kill
                break
            raise BadInput(f"{path}: line {number + 1} is not JSON: not a check --json report")
        if isinstance(entry, dict) and "run" in entry and number == 0:
            run = _checked_run(path, entry["run"])
        elif isinstance(entry, dict) and "result" in entry and run is not None:
            entries.append(entry["result"])
        else:
            raise BadInput(f"{path}: line {number + 1} is neither the run nor a result: not a check --json report")
    if run is None:
        raise BadInput(f"{path}: not a check --json report")
    results = _checked_results(path, entries)
    report = Report(results, interrupted=True, mode=run["mode"], command=run["command"], versions=run["versions"],
                    runtime=run.get("runtime", ""))
    return report.as_dict(), results


# What each field of a result must hold, by its type in CheckResult (a report written by hand or by another
# tool is read as bad input, not as results that break the run, its table or its counts, later)
_KINDS: dict[Any, tuple[Callable[[Any], bool], str]] = {
    str: (lambda value: isinstance(value, str), "a string"),
    int: (lambda value: isinstance(value, int) and not isinstance(value, bool), "a whole number"),
    float: (lambda value: isinstance(value, (int, float)) and not isinstance(value, bool), "a number"),
    bool: (lambda value: isinstance(value, bool), "true or false"),
    list[str]: (lambda value: isinstance(value, list) and all(isinstance(item, str) for item in value),
                "a list of strings"),
}
_FIELD_KINDS = {name: _KINDS[kind] for name, kind in get_type_hints(CheckResult).items()}
_REQUIRED = [f.name for f in fields(CheckResult) if f.default is MISSING and f.default_factory is MISSING]


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _checked_run(path: str | os.PathLike, run: Any) -> dict:
    """The head line's run, checked to hold what ``ReportFile.start`` writes."""
    if not isinstance(run, dict):
        raise BadInput(f"{path}: line 1: the run is {_shown(run)}, not an object: not a check --json report")
    kinds = {"mode": _KINDS[str], "command": _KINDS[list[str]],
             "versions": (lambda value: isinstance(value, dict), "an object")}
    for key, (fits, what) in kinds.items():
        if key not in run:
            raise BadInput(f"{path}: line 1: the run has no {key!r}: not a check --json report")
        if not fits(run[key]):
            raise BadInput(f"{path}: line 1: the run's {key!r} is {_shown(run[key])}, not {what}")
    if not isinstance(run.get("runtime", ""), str):
        raise BadInput(f"{path}: line 1: the run's 'runtime' is {_shown(run['runtime'])}, not a string")
    return run


def _checked_results(path: str | os.PathLike, results: Any) -> list[CheckResult]:
    """``results`` as type-checked ``CheckResult``s (fields it does not have, a newer report's, are ignored)."""
    if not isinstance(results, list):
        raise BadInput(f"{path}: its results are {_shown(results)}, not a list: not a check --json report")
    checked = []
    for number, result in enumerate(results, 1):
        if not isinstance(result, dict):
            raise BadInput(f"{path}: result {number} is {_shown(result)}, not an object")
        missing = [name for name in _REQUIRED if name not in result]
        if missing:
            raise BadInput(f"{path}: result {number} has no {missing[0]!r}")
        for name, value in result.items():
            fits, what = _FIELD_KINDS.get(name, (None, ""))
            if fits is not None and not fits(value):
                raise BadInput(f"{path}: result {number}: its {name!r} is {_shown(value)}, not {what}")
        if result["verdict"] not in VERDICTS:
            raise BadInput(f"{path}: result {number}: verdict {_shown(result['verdict'])} is none of "
                           f"{', '.join(VERDICTS)}")
        checked.append(CheckResult(**{name: value for name, value in result.items() if name in _FIELD_KINDS}))
    return checked


# Reports written before the default mode was named as the docs name it ("default") say "gathers".
OLD_MODE_NAMES = {"gathers": "default"}


def resumed_results(path: str | os.PathLike, mode: str, keys: list[str], runtime: str = "") -> list[CheckResult]:
    """The finished cases of the report at ``path`` (``--resume``), checked to belong to this run: same
    ``mode`` and ``runtime``, every case among ``keys`` (``check.case_keys``), once.

    Raises:
        BadInput: no regular file (a FIFO is never opened), no report, another run's, or a case twice.
    """
    kind = path_kind(Path(path))
    if kind != "file":
        what = {"missing": "no such file", "folder": "a folder, not a report file"}.get(kind,
                                                                                       f"{kind}, not a report file")
        raise BadInput(f"--resume {path}: {what}")
    try:
        report, results = _read(path)
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"--resume {path}: cannot read ({error})") from None
    except BadInput as error:
        raise BadInput(f"--resume {error}") from None
    if report.get("mode") != mode and OLD_MODE_NAMES.get(str(report.get("mode"))) != mode:
        raise BadInput(f"--resume {path}: that run compared in mode {report.get('mode')!r}, this one in {mode!r}")
    if (report.get("runtime") or "") != runtime:
        def where(name: str) -> str:
            return f"--runtime {name}" if name else "no --runtime"
        raise BadInput(f"--resume {path}: that run had {where(str(report.get('runtime') or ''))}, this one "
                       f"{where(runtime)}")
    unnamed = [r.name for r in results if not r.case]
    if unnamed:
        raise BadInput(f"--resume {path}: its results carry no case key (a report from before --resume); run again")
    strangers = [r.case for r in results if r.case not in set(keys)]
    if strangers:
        raise BadInput(f"--resume {path}: {len(strangers)} of its cases are not in this run (first: {strangers[0]!r}); "
                       f"resume with the same paths, or the same --fuzz and --seed")
    seen: set[str] = set()
    for result in results:
        if result.case in seen:
            raise BadInput(f"--resume {path}: case {result.case!r} is in it twice (check writes each case once)")
        seen.add(result.case)
    return results


class ReportFile:
    """Writes the report at ``path`` as the module docstring says: ``start``, ``add`` per result, ``finish``."""

    def __init__(self, path: str | os.PathLike, overwrite: bool):
        self.path, self.overwrite = Path(path), overwrite
        self._stream: TextIO | None = None  # open from start() to finish()
        self._left_as: tuple[int, int] | None = None  # (inode, size) after our last write

    def start(self, report: Report, cases: int, finished: list[CheckResult]) -> None:
        """Write the head line and the ``finished`` results, and open the file for ``add``.

        Raises:
            ModelFileError: the file exists (without ``overwrite``) or its folder is missing.
        """
        head = {"run": {"mode": report.mode, "command": report.command, "versions": report.versions, "cases": cases}
                | ({"runtime": report.runtime} if report.runtime else {})}
        lines = [json.dumps(head)] + [json.dumps({"result": asdict(r)}) for r in finished]
        write_bytes_atomic(self.path, ("\n".join(lines) + "\n").encode(), overwrite=self.overwrite)
        self._stream = open(self.path, "a", encoding="utf-8")
        self._note()

    def _note(self) -> None:
        assert self._stream is not None  # opened by start()
        status = os.fstat(self._stream.fileno())
        self._left_as = (status.st_ino, status.st_size)

    def add(self, result: CheckResult) -> None:
        """Append one result line (flushed)."""
        assert self._stream is not None  # opened by start()
        self._stream.write(json.dumps({"result": asdict(result)}) + "\n")
        self._stream.flush()
        self._note()

    def finish(self, report: Report) -> None:
        """Replace the lines with the final report document.

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
