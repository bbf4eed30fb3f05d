"""``rewrite IN -o OUT``: every ONNX gather (``--ops``) becomes GatherMultiaxis."""

from __future__ import annotations

import argparse
from typing import Any

from .command_base import Command
from .model_io import transform_file
from .option_groups import ModelFileOptions, VerbosityOptions


def op_list(text: str) -> list[str]:
    """An argparse ``type``: comma-separated op types the rewriter knows."""
    from ..graphs import GATHER_OPS, OPT_IN_OPS  # parsing imports the library only for the option that needs it

    ops = [op.strip() for op in text.split(",") if op.strip()]
    unknown = [op for op in ops if op not in GATHER_OPS + OPT_IN_OPS]
    if unknown or not ops:
        raise argparse.ArgumentTypeError(f"choose from {','.join(GATHER_OPS + OPT_IN_OPS)} (got {text!r})")
    return ops


class RewriteCommand(Command):
    """``rewrite``: ``graphs.rewrite_model`` on a model file."""

    name = "rewrite"
    help = "replace Gather, GatherElements and GatherND nodes by GatherMultiaxis"
    groups = (VerbosityOptions(), ModelFileOptions())

    def parser_options(self) -> dict[str, Any]:
        return {"description": "Rewrite every Gather, GatherElements and GatherND node of a model (subgraphs and "
                               "model-local functions included) as GatherMultiaxis plus rank-alignment nodes."}

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--ops", type=op_list, default=None, metavar="OPS",
                            help="comma-separated op types to rewrite (default: Gather,GatherElements,GatherND; "
                                 "GatherBlockQuantized (com.microsoft) only when listed)")
        parser.add_argument("--static-ranks-only", action="store_true",
                            help="leave a gather whose rank only the run time knows as it is, instead of aligning it "
                                 "at run time (for models to be lowered: `lower` needs static axes)")
        parser.add_argument("--ort-optimize", action="store_true",
                            help="run ONNX Runtime's offline optimizer (CPU, extended level) first, so the rewrite is "
                                 "bit-identical to the original under ORT's default session options too")

    def run(self, args: argparse.Namespace) -> int:
        from ..graphs import GATHER_OPS, rewrite_model
        from ..harness import session_options

        ops = args.ops or GATHER_OPS
        # without --ort-optimize the rewrite reads ORT's types of the input itself: that session checks the input
        input_types = None if args.ort_optimize else InputTypes(ops)
        transform_file(args, lambda model, folder: rewrite_model(
            model, ops, runtime_alignment=not args.static_ranks_only, session_options=session_options,
            external_data_folder=folder, ort_types_read=input_types.read if input_types else None), loaded_by=input_types)
        return 0


class InputTypes:
    """ORT's types of the values the rewrite declares (``graphs.ort_types``), read as the input's load check:
    called with the input model, True when that session loaded (then ``read`` holds them)."""

    def __init__(self, ops: list[str] | tuple[str, ...]):
        self.ops = ops
        self.read: dict[str, Any] | None = None

    def __call__(self, model: Any) -> bool:
        from ..graphs.ort_types import OrtTypesError, ort_value_types
        from ..graphs.rewrite.rewrite_pass import ort_type_names
        from ..harness import session_options

        names = ort_type_names(model, self.ops)
        if not names:
            return False
        try:
            self.read = ort_value_types(model, names, session_options=session_options)
        except OrtTypesError:  # ORT's load of the file says why, or the rewrite asks again and reports it
            return False
        return True
