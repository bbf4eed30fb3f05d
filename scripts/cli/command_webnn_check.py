"""``webnn-check MODEL``: the nodes outside what ORT's WebNN execution provider takes."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from .command_base import Command, printable
from .model_io import read_model_file
from .option_groups import (InputShapeOptions, JsonReportOptions, VerbosityOptions, exists, model_files, not_over,
                            write_json, writable)


class WebNNCheckCommand(Command):
    """``webnn-check``: ``graphs.webnn.webnn_check``; exit 0 when every node is within WebNN's subset, else 1."""

    name = "webnn-check"
    help = "list every node ORT's WebNN execution provider would not take, and why"
    groups = (VerbosityOptions(),)
    shapes = InputShapeOptions("fix input shapes (WebNN's are static)")
    report = JsonReportOptions("also write the findings as JSON")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("model", help="the ONNX model (typically after rewrite and lower --target webnn)")
        self.shapes.add_to(parser)
        self.report.add_to(parser)

    def run(self, args: argparse.Namespace) -> int:
        from ..graphs.webnn import webnn_check

        shapes = self.shapes.parse(args)
        not_over("--json", args.json, model_files(Path(args.model), "the model", with_data=exists(args.json)))
        writable(args.json, args.force)
        model, data_folder = read_model_file(args.model)
        findings = webnn_check(model, shapes, data_folder)
        for finding in findings:
            print(printable(f"{finding.op_type} {finding.node!r}: {finding.reason}"))
        print(f"{len(findings)} finding(s) outside WebNN's subset" if findings
              else "every node is within WebNN's subset")
        if args.json:
            write_json(args.json, [asdict(f) for f in findings], force=args.force)
        return 1 if findings else 0
