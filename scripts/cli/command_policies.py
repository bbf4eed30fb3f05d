"""``policies MODEL``: the out-of-range indices each gather gets, and what each runtime's policy makes of them."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .command_base import Command, CommandError
from .model_io import read_model_file
from .option_groups import (InputShapeOptions, JsonReportOptions, LoadInputsOptions, SeedOptions, VerbosityOptions,
                            exists, model_files, not_over, write_json, writable)


class PoliciesCommand(Command):
    """``policies``: ``conformance.policies.policy_report``; exit 1 when no index was out of range or negative."""

    name = "policies"
    help = ("out-of-range indices of a model's gathers, and what each runtime's policy (error, zero, clamp) makes of "
            "the outputs")
    groups = (VerbosityOptions(),)
    inputs = LoadInputsOptions("inputs (the first data set); default: generated")
    shapes = InputShapeOptions("shapes of generated inputs")
    seed = SeedOptions("seed of the generated inputs")
    report = JsonReportOptions("also write the report as JSON")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("model", help="the ONNX model (original, not rewritten)")
        self.inputs.add_to(parser)
        self.shapes.add_to(parser)
        parser.add_argument("--out-of-range", action="store_true",
                            help="push each generated index input past its bounds (first value above, last below)")
        self.seed.add_to(parser)
        self.report.add_to(parser)

    def run(self, args: argparse.Namespace) -> int:
        from ..conformance import policies
        from ..conformance.cases import BadInput

        shapes = self.shapes.parse(args)
        not_over("--json", args.json, model_files(Path(args.model), "the model", with_data=exists(args.json))
                 | self.inputs.files_read(args.load_inputs))
        writable(args.json, args.force)
        model, data_folder = read_model_file(args.model)
        try:
            feeds = self.feeds(args, model, shapes, data_folder)
        except (BadInput, policies.CannotGenerate) as error:
            raise CommandError(str(error)) from None
        try:
            report = policies.policy_report(model, feeds, data_folder)
        except policies.RefusedInputs as error:
            raise CommandError(f"{args.model}: {error}") from None
        print(report.table())
        if args.json:
            write_json(args.json, asdict(report), force=args.force)
        return 0 if any(g.above or g.below or g.negative_in_range for g in report.gathers) else 1

    @staticmethod
    def feeds(args: argparse.Namespace, model: Any, shapes: dict, data_folder: Path | None) -> dict:
        """The inputs: the first data set of --load-inputs, or generated (and pushed with --out-of-range)."""
        from ..conformance import policies
        from ..conformance.cases import load_inputs

        if args.load_inputs:
            loaded = load_inputs(args.load_inputs)
            if not loaded:
                raise CommandError(f"--load-inputs {args.load_inputs}: no data set")
            return loaded[0].feeds
        feeds = policies.policy_inputs(model, args.seed, args.out_of_range, shapes, data_folder)
        if args.out_of_range:  # which inputs were pushed, and to what
            pushed = policies.out_of_range_bounds(model, feeds)
            print("--out-of-range pushed: " + ("; ".join(
                f"{name} (axis of {bound}: {bound + 2} and {-bound - 3})" for name, bound in pushed.items())
                or "no input (none reaches a gather's indices)"))
        return feeds
