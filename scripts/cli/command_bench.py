"""``bench [JOB]``: the benchmarks, one job each (bench_jobs); the kernel bench when no job is named."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .bench_jobs import DISPATCH, JOBS, BenchOptions
from .command_base import Command
from .option_groups import VerbosityOptions, exists, model_files, not_over, writable

LEGACY_BENCH = {"big_model": "big-model [GB]", "big_graph": "big-graph [GATHERS]", "runtime": "runtime",
                "end_to_end": "end-to-end MODEL|FOLDER...", "build_exports": "build-exports DIR"}


def bench_reads(args: argparse.Namespace) -> dict[Path, str]:
    """The files bench end-to-end and lowering read (models, their data and ``MODEL.inputs.npz``) that an
    existing --json path might name."""
    items = [*(getattr(args, "models", None) or ()), *(getattr(args, "end_to_end", None) or ())]
    if not items or not exists(args.json):
        return {}
    from ..bench import end_to_end

    files: dict[Path, str] = {}
    for model in end_to_end.model_paths(items):
        files |= model_files(model, "a model this bench reads", with_data=True)
        for inputs in (model.with_name(model.stem + ".inputs.npz"), model.with_name("inputs.npz")):
            files[inputs] = f"the inputs of {model}"
    return files


class BenchCommand(Command):
    """``bench``: the chosen job's exit status; an output that would overwrite an input or an existing file
    is bad input."""

    name = "bench"
    help = "benchmarks: kernel, runtime, end-to-end, lowering, big-graph, big-model, build-exports"
    groups = (VerbosityOptions(), BenchOptions(None, legacy=True))

    def parser_options(self) -> dict[str, Any]:
        return {"description": "Benchmarks, one job each (default: kernel). Medians, spreads and ratios of "
                               "interleaved runs; no absolute targets (the machine is shared)."}

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        jobs = parser.add_subparsers(dest="job", metavar="JOB")
        for job in JOBS:
            job.add_to(jobs)

    def run(self, args: argparse.Namespace) -> int:
        if args.job is None:
            used = [flag for flag in LEGACY_BENCH if getattr(args, flag)]
            if used:
                print(f"note: `bench --{used[0].replace('_', '-')}` is now `bench {LEGACY_BENCH[used[0]]}`",
                      file=sys.stderr)
        not_over("--json", args.json, bench_reads(args))
        if getattr(args, "plot", None) and args.json:
            not_over("--plot", args.plot, {Path(args.json): "the --json report"})
        writable(args.json, args.force)
        return next(job for job in DISPATCH if job.chosen(args)).run(args)
