"""The option groups commands share (verbosity, a model file in and out, input shapes, inputs to load, a
JSON report, a seed) and the checks of the files they name. The library is imported in the checks only."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from .command_base import ArgGroup, CommandError, seed_number


def writable(path: str | None, force: bool) -> None:
    """Refuse a file to write that exists (without ``force``) or whose folder is not there."""
    if path:
        from ..graphs.modelfile import ModelFileError, check_target

        try:
            check_target(path, overwrite=force)
        except ModelFileError as error:
            raise CommandError(str(error)) from None


def not_over(option: str, path: str | None, files: dict[Path, str]) -> None:
    """Refuse ``option path`` (a report, or a model to write) naming a file the command reads or writes
    (``files``: path -> what it is, e.g. "the input model"), with or without --force."""
    if path:
        from ..graphs.modelfile import same_file

        for other, what in files.items():
            if same_file(path, other):
                raise CommandError(f"{option} {path}: is {what}; choose another name")


def model_files(model: Path, what: str, with_data: bool) -> dict[Path, str]:
    """``model`` as ``what``; with ``with_data``, also the files holding its external data (read from it:
    asked only when a file they might be is there, see ``exists``)."""
    files = {model: what}
    if with_data:
        from ..graphs.modelfile import external_data_files

        files.update((data, f"external data of {what} ({model})") for data in sorted(external_data_files(model)))
    return files


def exists(path: str | os.PathLike | None) -> bool:
    """Whether ``path`` is given and names something (a dangling link too)."""
    return path is not None and bool(path) and os.path.lexists(path)


def write_json(path: str, payload: Any, force: bool) -> None:
    """Checked before the work (``writable``) and again at write time: a report another run wrote
    meanwhile is not overwritten without --force (exit 2, after the results are printed)."""
    from ..graphs.modelfile import ModelFileError, write_bytes_atomic

    try:
        write_bytes_atomic(Path(path), (json.dumps(payload, indent=2) + "\n").encode(), overwrite=force)
    except ModelFileError as error:
        raise CommandError(str(error)) from None


class VerbosityOptions(ArgGroup):
    """-q / -v: ``args.verbose`` is -1, 0 or the count of -v."""

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        loudness = parser.add_mutually_exclusive_group()
        loudness.add_argument("-q", "--quiet", dest="verbose", action="store_const", const=-1, default=0,
                              help="print less (check: only failures and the summary; no progress)")
        loudness.add_argument("-v", "--verbose", dest="verbose", action="count", help="print more")


class ModelFileOptions(ArgGroup):
    """rewrite and lower: one model file in, one out (-o, or --in-place), --force, --json."""

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("model", help="the ONNX model")
        parser.add_argument("-o", "--output", help="where to write the result")
        parser.add_argument("--in-place", action="store_true", help="replace the input file")
        parser.add_argument("--force", action="store_true", help="overwrite existing output files")
        parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")

    @staticmethod
    def source_and_target(args: argparse.Namespace) -> tuple[Path, Path]:
        """The input model and where the result goes (-o, or the input itself with --in-place)."""
        source = Path(args.model)
        if args.in_place:
            if args.output is not None:
                raise CommandError("give either -o/--output or --in-place, not both")
            return source, source
        if args.output is None:
            raise CommandError("no output: give -o OUT.onnx (or --in-place to replace the input)")
        target = Path(args.output)
        if target.resolve() == source.resolve():
            raise CommandError(f"{target}: the output is the input file; pass --in-place to replace it")
        return source, target


class InputShapeOptions(ArgGroup):
    """--input-shapes NAME:[DIMS]..., with the command's own help."""

    def __init__(self, help: str):
        self.help = help

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--input-shapes", nargs="+", metavar="NAME:[DIMS]", help=self.help)

    @staticmethod
    def parse(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
        """The shapes, through ``conformance.cases.parse_input_shapes``: a malformed spec is exit 2."""
        from ..conformance.cases import BadInput, parse_input_shapes

        try:
            return parse_input_shapes(args.input_shapes or [])
        except BadInput as error:
            raise CommandError(str(error)) from None


class LoadInputsOptions(ArgGroup):
    """--load-inputs FILE.npz|FOLDER, with the command's own help."""

    def __init__(self, help: str):
        self.help = help

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--load-inputs", metavar="FILE.npz|FOLDER", help=self.help)

    @staticmethod
    def files_read(load_inputs_path: str | None) -> dict[Path, str]:
        """The files --load-inputs reads (a file, or a folder's .npz files and test_data_set_*/*.pb)."""
        if not load_inputs_path:
            return {}
        where = Path(load_inputs_path)
        if not where.is_dir():
            return {where: "the --load-inputs file"}
        return dict.fromkeys([*where.glob("*.npz"), *where.glob("test_data_set_*/*.pb")],
                             "an input --load-inputs reads")


class JsonReportOptions(ArgGroup):
    """--json FILE and --force (overwrite an existing report), with the command's own help."""

    def __init__(self, json_help: str, force_help: str = "overwrite an existing JSON report"):
        self.json_help, self.force_help = json_help, force_help

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", metavar="FILE", help=self.json_help)
        parser.add_argument("--force", action="store_true", help=self.force_help)


class SeedOptions(ArgGroup):
    """--seed N (0 or more), with the command's own help."""

    def __init__(self, help: str):
        self.help = help

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--seed", type=seed_number, default=0, help=self.help)
