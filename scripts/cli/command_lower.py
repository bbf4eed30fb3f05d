"""``lower IN -o OUT [--target webnn]``: GatherMultiaxis becomes standard ONNX ops (or WebNN's subset)."""

from __future__ import annotations

import argparse
from typing import Any

from .command_base import Command, CommandError
from .model_io import transform_file
from .option_groups import InputShapeOptions, ModelFileOptions, VerbosityOptions


class LowerCommand(Command):
    """``lower``: ``graphs.lower_model`` or ``graphs.webnn.lower_for_webnn``; exit 1 when a node is left."""

    name = "lower"
    help = "replace GatherMultiaxis nodes by standard ONNX ops (any ONNX runtime)"
    groups = (VerbosityOptions(), ModelFileOptions())
    shapes = InputShapeOptions("--target webnn: fix input shapes")

    def parser_options(self) -> dict[str, Any]:
        return {"description": "Lower every GatherMultiaxis node (subgraphs and model-local functions included) to "
                               "standard ONNX ops in the model's own opset (11 or later; mode 'error' from 7). Exit "
                               "status 1 when a node is left (the model is written, the report says why)."}

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--target", choices=("onnx", "webnn"), default="onnx",
                            help="onnx: standard ONNX ops (default); webnn: ops that map one-to-one onto WebNN, for "
                                 "static input shapes (the model's own, or --input-shapes)")
        self.shapes.add_to(parser)

    def run(self, args: argparse.Namespace) -> int:
        if args.target == "webnn":
            from ..graphs.webnn import NotStatic, lower_for_webnn

            shapes = self.shapes.parse(args)

            def transform(model, external_data_folder):
                try:
                    return lower_for_webnn(model, shapes, external_data_folder)
                except NotStatic as error:
                    raise CommandError(f"{args.model}: {error}") from None

            return 1 if transform_file(args, transform).left else 0
        if args.input_shapes:
            raise CommandError("--input-shapes goes with --target webnn")
        from ..graphs import lower_model

        return 1 if transform_file(args, lower_model).left else 0
