"""``example OUT``: write the bundled example model to a file."""

from __future__ import annotations

import argparse
from pathlib import Path

from .command_base import Command, CommandError
from .option_groups import VerbosityOptions


class ExampleCommand(Command):
    """``example``: a copy of ``examples.EXAMPLE_PATH`` (exit 2 if the file exists, without --force)."""

    name = "example"
    help = "write the bundled example model to a file"
    groups = (VerbosityOptions(),)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("output", help="where to write it")
        parser.add_argument("--force", action="store_true", help="overwrite an existing file")

    def run(self, args: argparse.Namespace) -> int:
        from ..examples import EXAMPLE_PATH
        from ..graphs.modelfile import ModelFileError, write_bytes_atomic

        try:
            write_bytes_atomic(Path(args.output), EXAMPLE_PATH.read_bytes(), overwrite=args.force)
        except ModelFileError as error:
            raise CommandError(str(error)) from None
        if args.verbose >= 0:
            print(f"wrote the bundled example model to {args.output}")
        return 0
