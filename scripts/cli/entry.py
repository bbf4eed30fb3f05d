"""The ``gathermultiaxis`` command: the parser that assembles the commands, the library's log on stderr, and
``main``."""

from __future__ import annotations

import argparse
import logging
import sys

from .. import __version__
from .command_base import EXIT_STATUS, Command, CommandError, OneLineParser, printable
from .command_bench import BenchCommand
from .command_check import CheckCommand
from .command_example import ExampleCommand
from .command_lower import LowerCommand
from .command_policies import PoliciesCommand
from .command_rewrite import RewriteCommand
from .command_webnn_check import WebNNCheckCommand

COMMANDS: tuple[Command, ...] = (RewriteCommand(), LowerCommand(), WebNNCheckCommand(), CheckCommand(),
                                 BenchCommand(), PoliciesCommand(), ExampleCommand())  # as --help lists them


def build_parser() -> argparse.ArgumentParser:
    """The ``gathermultiaxis`` command line: its options and one subcommand per job, each with its ``run``
    handler.
    """
    parser = OneLineParser(
        prog="gathermultiaxis", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="One gather operator for ONNX Runtime: rewrite models to GatherMultiaxis and check them.",
        epilog=EXIT_STATUS)
    parser.add_argument("--version", action="version", version=f"gathermultiaxis {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_to(commands)
    return parser


LOG_LEVELS = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}  # -q, default, -v; -vv and more: DEBUG


class StderrHandler(logging.StreamHandler):
    """A handler writing to ``sys.stderr`` as it is at each record (tests and callers may replace it)."""

    @property  # StreamHandler keeps a fixed stream; this one follows sys.stderr
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


LOG_HANDLER = StderrHandler()  # added to the package's logger by the command line only
LOG_HANDLER.setFormatter(logging.Formatter("gathermultiaxis: %(name)s: %(message)s"))


def show_library_log(verbose: int) -> None:
    """Show the library's log records on stderr at the level ``-q``/``-v`` choose (``verbose``: -1, 0, or the
    count of ``-v``)."""
    package_log = logging.getLogger("gathermultiaxis")
    package_log.setLevel(LOG_LEVELS.get(verbose, logging.DEBUG))
    if LOG_HANDLER not in package_log.handlers:
        package_log.addHandler(LOG_HANDLER)


def main(argv: list[str] | None = None) -> int:
    """The ``gathermultiaxis`` command: parse ``argv``, run the chosen subcommand.

    Raises:
        SystemExit: bad arguments (status 2), or ``--help`` (status 0), from argparse.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if argv is not None and "argv" in args:
        args.argv = ["gathermultiaxis", *argv]
    show_library_log(getattr(args, "verbose", 0))
    try:
        return args.run(args)
    except CommandError as error:
        print(printable(f"gathermultiaxis {args.command}: {error}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gathermultiaxis {args.command}: interrupted", file=sys.stderr)
        return 130
