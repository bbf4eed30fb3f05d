"""What ``check`` prints: its progress on stderr and the table of results."""

from __future__ import annotations

import sys
import time
from typing import Any

from .command_base import Output, printable

LISTED_PASSES = 50  # more passed cases than this are counted, not listed, unless -v


class CheckProgress:
    """The progress of ``check`` on stderr: cases done, rate and ETA (tqdm, when installed: the
    ``progress`` extra; a live bar on a terminal, a line every ``period`` seconds otherwise); without
    tqdm, ``Output``'s count of cases. Nothing under ``-q``."""

    def __init__(self, verbosity: int, total: int, initial: int, period: float = 30.0):
        self.output, self.total = Output(verbosity), total
        self.done, self.initial, self.period = initial, initial, period
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        self.tqdm = tqdm
        self.started = self.last = time.monotonic()
        self.bar = None
        if tqdm is not None and verbosity >= 0 and self.output.live:
            self.bar = tqdm(total=total, initial=initial, unit="case", file=sys.stderr, dynamic_ncols=True,
                            leave=False)

    def result_line(self, text: str) -> None:
        """A line on stdout (``-v``) that does not tear the bar."""
        if self.bar is not None:
            self.bar.clear()
        self.output.end_progress()
        print(printable(text), flush=True)
        if self.bar is not None:
            self.bar.refresh()

    def advance(self, name: str) -> None:
        """Count one case done (``name``: shown without tqdm) and show the progress."""
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.tqdm is not None and self.output.verbosity >= 0:
            now = time.monotonic()
            if now - self.last >= self.period or (self.done == self.total and self.done > 1):  # as Output
                self.last = now
                meter = self.tqdm.format_meter(self.done - self.initial, self.total - self.initial,
                                               now - self.started, unit="case")
                print(f"[{self.done}/{self.total}] {meter}", file=sys.stderr, flush=True)
        else:
            self.output.progress(self.done, self.total, name)

    def close(self) -> None:
        """Remove the bar or the live line."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.output.end_progress()


def print_table(results: list[Any], verbosity: int) -> None:
    """-q: the failed cases; default: every case, or only those that did not pass when there are many
    (a fuzz run); -v: every case.
    """
    from ..conformance.check_results import format_table

    if verbosity < 0:
        shown = [r for r in results if r.verdict == "failed"]
    elif verbosity == 0 and len(results) > LISTED_PASSES:
        shown = [r for r in results if r.verdict != "passed"]
    else:
        shown = results
    if shown:
        print(printable(format_table(shown)))
    if len(shown) < len(results) and verbosity == 0:
        print(f"({len(results) - len(shown)} passed cases not listed; -v lists them)")
