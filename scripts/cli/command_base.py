"""What every command shares: the ``Command`` and ``ArgGroup`` bases, the one-line errors, printing, and
the argparse types of numbers."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

# The epilog of `gathermultiaxis --help` and `check --help`.
EXIT_STATUS = """Exit status:
  0    success (check: every case passed, or found ORT's builtin kernel wrong)
  1    check: a case failed (outputs differ, only one side raised, the rewrite crashed or hung);
       lower: a GatherMultiaxis node could not be lowered (the model is written, the report says why)
  2    bad input: a path, file or option the command cannot use; one line on stderr, before any work
  3    check: a case was not compared or not runnable (see --allow)
  4    check: a case holds no gather to compare ("no gather"; a model with none, or only gathers left), and
       nothing failed, was not compared or not runnable (see --allow)
  130  interrupted (Ctrl-C): check prints the summary of what ran and writes the partial JSON report
  143  check: stopped by SIGTERM (`kill`): the same as Ctrl-C (summary, partial JSON report, the
       child process stopped)
"""


def printable(text: str) -> str:
    """``text`` with the bytes of file names that are not UTF-8 (surrogate escapes) written as ``\\xff``."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class CommandError(Exception):
    """One line for the user; exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr (which command, what is wrong, where to look), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


class ArgGroup:
    """Options several commands share: ``add_to`` adds them to a command's parser (argparse prints them in
    the order they are added); the group's other methods read them back from the parsed arguments and turn
    what cannot be used into a ``CommandError``."""

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        raise NotImplementedError


class Command:
    """One sub-command: its name and one-line help, the shared groups it takes first, its own options, and
    ``run``, which imports the library it needs, does the work and returns the exit status. It raises
    ``CommandError`` for bad input (``main`` prints the line, exit status 2)."""

    name: str = ""
    help: str = ""
    groups: tuple[ArgGroup, ...] = ()

    def parser_options(self) -> dict[str, Any]:
        """The keywords of ``add_parser`` besides the name and help (description, epilog, formatter)."""
        return {}

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's own options, after its groups'."""

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError

    def add_to(self, commands: Any) -> argparse.ArgumentParser:
        """Add this command's parser to ``commands`` (``add_subparsers``' result), ``run`` as its handler."""
        parser = commands.add_parser(self.name, help=self.help, **self.parser_options())
        for group in self.groups:
            group.add_to(parser)
        self.add_arguments(parser)
        parser.set_defaults(run=self.run)
        return parser


class Output:
    """Where a command prints: results on stdout; progress on stderr (a live line on a terminal, a
    line every ``period`` seconds otherwise); ``-q`` keeps only failures and the summary."""

    def __init__(self, verbosity: int, period: float = 30.0):
        self.verbosity, self.period = verbosity, period
        self.live = sys.stderr.isatty()
        self._last = time.monotonic()
        self._shown = False

    def progress(self, done: int, total: int | None, text: str) -> None:
        """Show ``[done/total] text`` (nothing under ``-q``; on a terminal, ``text`` cut to 70 characters)."""
        if self.verbosity < 0:
            return
        of = f"/{total}" if total else ""
        if self.live:
            sys.stderr.write(f"\r[{done}{of}] {text[:70]:<70}")
            sys.stderr.flush()
            self._shown = True
        elif time.monotonic() - self._last >= self.period or (total and done == total and done > 1):
            self._last = time.monotonic()
            print(f"[{done}{of}] {text}", file=sys.stderr, flush=True)

    def end_progress(self) -> None:
        """Erase the live progress line, if one is shown."""
        if self._shown:
            sys.stderr.write("\r" + " " * 80 + "\r")
            sys.stderr.flush()
            self._shown = False


def whole_number_at_least(minimum: int, rule: str) -> Callable[[str], int]:
    """An argparse ``type``: a whole number of at least ``minimum``, else ``rule`` in the error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{rule}, got {value}")
        return value
    return parse


positive_int = whole_number_at_least(1, "must be at least 1")
non_negative_int = whole_number_at_least(0, "must be 0 or more")
seed_number = whole_number_at_least(0, "a seed is 0 or more (NumPy's generators take no negative seed)")


def positive_float(text: str) -> float:
    """An argparse ``type``: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value
