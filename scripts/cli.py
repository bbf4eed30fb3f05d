"""The ``gathermultiaxis`` command line: ``rewrite``, ``lower``, ``check``, ``bench``, ``example``.

Exit status: 0 on success, 1 when ``check`` finds a mismatch (or ``lower`` leaves a node), 2 on bad input (unreadable or invalid
model, unwritable output), with one line on stderr naming the file and nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__


class CommandError(Exception):
    """One line for the user; exit status 2."""


def write_text_atomic(path: Path, text: str, overwrite: bool) -> None:
    write_file_atomic(path, text.encode(), overwrite)


def write_file_atomic(path: Path, content: bytes, overwrite: bool) -> None:
    """Write ``content`` to ``path`` through a temporary folder beside it (see graphs.io)."""
    from .graphs.io import ModelFileError, write_bytes_atomic

    try:
        write_bytes_atomic(path, content, overwrite)
    except ModelFileError as error:
        raise CommandError(str(error)) from None


def _op_list(text: str) -> list[str]:
    from .graphs import GATHER_OPS

    ops = [op.strip() for op in text.split(",") if op.strip()]
    unknown = [op for op in ops if op not in GATHER_OPS]
    if unknown or not ops:
        raise argparse.ArgumentTypeError(f"choose from {','.join(GATHER_OPS)} (got {text!r})")
    return ops


def run_rewrite(args) -> int:
    import onnx

    from .graphs import GATHER_OPS, rewrite_model
    from .graphs.io import ModelFileError, load_model, save_model

    source = Path(args.model)
    if args.in_place:
        if args.output is not None:
            raise CommandError("give either -o/--output or --in-place, not both")
        target = source
    elif args.output is None:
        raise CommandError("no output: give -o OUT.onnx (or --in-place to replace the input)")
    else:
        target = Path(args.output)
        if target.resolve() == source.resolve():
            raise CommandError(f"{target}: the output is the input file; pass --in-place to replace it")
    if args.json and Path(args.json).exists() and not args.force:
        raise CommandError(f"{args.json}: already exists (pass --force to overwrite it)")
    try:
        model, external = load_model(source)
        rewritten, report = rewrite_model(model, args.ops or GATHER_OPS)
        try:
            onnx.checker.check_model(rewritten)
        except ValueError:  # over 2 GB: the checker needs a file, which save_model writes below
            pass
        save_model(rewritten, target, external_data=external, overwrite=args.force or args.in_place)
    except ModelFileError as error:
        raise CommandError(str(error)) from None
    print(report.table())
    print(f"wrote {target}")
    if args.json:
        write_text_atomic(Path(args.json), json.dumps(report.as_dict(), indent=2) + "\n", overwrite=True)
    return 0


def run_lower(args) -> int:
    """``lower IN -o OUT``: GatherMultiaxis -> standard ONNX ops. Exit 1 (model still written) when a node
    could not be lowered, the report saying why; 2 on bad input."""
    import onnx

    from .graphs import lower_model
    from .graphs.io import ModelFileError, load_model, save_model

    source, target = Path(args.model), Path(args.output)
    if target.resolve() == source.resolve():
        raise CommandError(f"{target}: the output is the input file; choose another -o")
    try:
        model, external = load_model(source)
        lowered, report = lower_model(model)
        try:
            onnx.checker.check_model(lowered)
        except ValueError:  # over 2 GB: the checker needs a file
            pass
        save_model(lowered, target, external_data=external, overwrite=args.force)
    except ModelFileError as error:
        raise CommandError(str(error)) from None
    print(report.table())
    print(f"wrote {target}")
    return 1 if report.left else 0


def run_example(args) -> int:
    from .examples import EXAMPLE_PATH

    target = Path(args.output)
    write_file_atomic(target, EXAMPLE_PATH.read_bytes(), overwrite=args.force)
    print(f"wrote the bundled example model to {target}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gathermultiaxis",
        description="One gather operator for ONNX Runtime: rewrite models to GatherMultiaxis and check them.")
    parser.add_argument("--version", action="version", version=f"gathermultiaxis {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    rewrite = commands.add_parser(
        "rewrite", help="replace Gather, GatherElements and GatherND nodes by GatherMultiaxis",
        description="Rewrite every Gather, GatherElements and GatherND node of a model (subgraphs and "
                    "model-local functions included) as GatherMultiaxis plus rank-alignment nodes.")
    rewrite.add_argument("model", help="the ONNX model to rewrite")
    rewrite.add_argument("-o", "--output", help="where to write the rewritten model")
    rewrite.add_argument("--in-place", action="store_true", help="replace the input file")
    rewrite.add_argument("--force", action="store_true", help="overwrite an existing output file")
    rewrite.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    rewrite.add_argument("--ops", type=_op_list, default=None, metavar="OPS",
                         help="comma-separated op types to rewrite (default: Gather,GatherElements,GatherND)")
    rewrite.set_defaults(run=run_rewrite)

    lower = commands.add_parser(
        "lower", help="replace GatherMultiaxis nodes by standard ONNX ops (runs on any ONNX runtime)",
        description="Lower every GatherMultiaxis node (subgraphs and model-local functions included) to standard "
                    "ONNX ops in the model's own opset (11 or later). Exit status 1 when a node is left.")
    lower.add_argument("model", help="the ONNX model to lower (typically the output of rewrite)")
    lower.add_argument("-o", "--output", required=True, help="where to write the lowered model")
    lower.add_argument("--force", action="store_true", help="overwrite an existing output file")
    lower.set_defaults(run=run_lower)

    example = commands.add_parser("example", help="write the bundled example model to a file")
    example.add_argument("output", help="where to write it")
    example.add_argument("--force", action="store_true", help="overwrite an existing file")
    example.set_defaults(run=run_example)

    from .bench import add_bench_command
    from .check import add_check_command

    add_check_command(commands)
    add_bench_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.run(args)
    except CommandError as error:
        print(f"gathermultiaxis {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
