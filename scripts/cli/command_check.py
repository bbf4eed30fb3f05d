"""``check [PATH...]``: run the conformance cases (the built-in suite, models, ``--fuzz``, ``--mutate``) and
compare with ORT's builtin kernels."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .check_output import CheckProgress, print_table
from .command_base import (EXIT_STATUS, ArgGroup, Command, CommandError, positive_float, positive_int)
from .model_io import read_model_file
from .option_groups import (InputShapeOptions, LoadInputsOptions, SeedOptions, VerbosityOptions, exists, model_files,
                            not_over, writable)

# conformance.isolation's and conformance.runtimes' values, written out: the parser imports no runner
# (tests/cli/test_command_check.py holds them equal).
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
RUNTIME_NAMES = ("ort", "openvino", "tract", "reference", "web")


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class CheckModeOptions(ArgGroup):
    """What the rewrite runs as (--ort-optimize, --lowered, --webnn, --session; ``args.mode`` is the
    name of a ``CheckMode``) and --runtime, which the lowered forms take."""

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        modes = parser.add_mutually_exclusive_group()
        modes.add_argument("--ort-optimize", dest="mode", action="store_const", const="ort-optimized",
                           default="default",
                           help="compare the --ort-optimize rewrite with the original under ORT's default session "
                                "options (default: both with graph optimizations off)")
        modes.add_argument("--lowered", dest="mode", action="store_const", const="lowered",
                           help="run the rewrite lowered to standard ONNX (`lower`) on plain ORT, no custom op library")
        modes.add_argument("--webnn", dest="mode", action="store_const", const="webnn",
                           help="run the rewrite lowered for WebNN (`lower --target webnn`, each data set's input "
                                "shapes) on plain ORT; data sets the original refuses are not compared (WebNN "
                                "cannot raise)")
        modes.add_argument("--session", dest="mode", action="store_const", const="session",
                           help="run the rewrite as users do: gathermultiaxis.InferenceSession with ORT's default "
                                "options, nodes one standard gather computes run as that gather (the kernel "
                                "elsewhere); the original also with ORT's defaults")
        parser.add_argument("--runtime", choices=RUNTIME_NAMES, default=None,
                            help="with --lowered or --webnn: run the original and the form both on this runtime as "
                                 "its users do (ort: default optimizations; openvino, tract and web are extras, "
                                 "see docs/conformance.md); without it, both run on ORT with optimizations off")

    @staticmethod
    def parse(args: argparse.Namespace) -> None:
        """``args.mode`` as a ``CheckMode``; --runtime only with --lowered or --webnn, not with --cluster, and
        installed."""
        from ..conformance import check

        args.mode = check.CheckMode(args.mode)  # parsed as its name: the parser imports no runner
        if args.runtime is None:
            return
        if args.mode not in (check.CheckMode.LOWERED, check.CheckMode.WEBNN):
            raise CommandError(f"--runtime {args.runtime} goes with --lowered or --webnn")
        if args.cluster:
            raise CommandError(f"--runtime {args.runtime} runs on this machine only, not with --cluster")
        from ..conformance.runtimes import RuntimeUnavailable, check_available

        try:
            check_available(args.runtime)
        except RuntimeUnavailable as error:
            raise CommandError(str(error)) from None


class ClusterOptions(ArgGroup):
    """--cluster ADDRESS and --cluster-timeout SECONDS."""

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--cluster", metavar="ADDRESS",
                            help="send the cases to a running Dask cluster (tcp://HOST:8786; 'local': start one of "
                                 "--jobs worker processes for this run); needs pip install \"gathermultiaxis[cluster]\"")
        parser.add_argument("--cluster-timeout", type=positive_float, metavar="SECONDS",
                            help=f"how long the --cluster scheduler may take to answer (default "
                                 f"{DEFAULT_CONNECT_TIMEOUT_S:g} s); an address where none answers in time "
                                 f"is bad input (exit 2), before the run")

    @staticmethod
    def reachable(args: argparse.Namespace) -> float:
        """--cluster-timeout (or its default), once a scheduler answered at --cluster within it: an address
        where none does is bad input (exit 2), found before the run instead of a traceback or a hang."""
        if args.cluster is None:
            if args.cluster_timeout is not None:
                raise CommandError("--cluster-timeout goes with --cluster")
            return DEFAULT_CONNECT_TIMEOUT_S
        from ..conformance import cluster

        timeout = DEFAULT_CONNECT_TIMEOUT_S if args.cluster_timeout is None else args.cluster_timeout
        try:
            cluster.reach_scheduler(args.cluster, timeout)
        except (cluster.NoScheduler, ImportError) as error:
            raise CommandError(f"--cluster {args.cluster}: {error}") from None
        return timeout


def check_sources(args: argparse.Namespace) -> tuple[list, set[str]]:
    """The cases to check, and the verdicts that do not fail the run."""
    from ..conformance import check, mutate
    from ..conformance.cases import default_suite, find_sources

    allowed = set(args.allow or ())
    if args.mutate:
        if args.fuzz:
            raise CommandError("--mutate and --fuzz are two runs; run them separately")
        if args.mode is not check.CheckMode.DEFAULT:
            raise CommandError(f"--mutate compares the default session, the kernel path and the lowered model "
                               f"itself; it takes no --{args.mode.value}")
        sources = find_sources(args.paths) if args.paths else []
        vet_named_models(sources, {str(Path(path)) for path in args.paths})
        bases = (mutate.EXAMPLE, *(str(Path(source.path) / "model.onnx") if source.backend_folder else source.path
                                   for source in sources))
        args.mode = check.CheckMode.MUTATIONS
        return check.mutation_sources(args.mutate, args.seed, bases, args.save_dir), allowed
    if args.fuzz:
        if args.paths:
            raise CommandError("--fuzz checks generated models and takes no PATH; run the paths separately")
        return check.fuzz_sources(args.fuzz, args.seed, args.save_dir), allowed
    if args.paths:
        sources = find_sources(args.paths)
        vet_named_models(sources, {str(Path(path)) for path in args.paths})
        return sources, allowed
    # The default suite holds ONNX node tests that ORT itself cannot run (bfloat16 attention, ...):
    # they are listed, but do not fail the run.
    return default_suite(), allowed | {"not runnable"}


def check_reads(sources: list, report: str) -> dict[Path, str]:
    """The files a check of ``sources`` reads that the ``report`` path might name: each model file; its
    external data and a backend-test folder's test data when the report lies in its folder (data files
    lie there, and only those models are read for their names)."""
    from ..conformance import check, mutate
    from ..conformance.cases import FileSource
    from ..examples import EXAMPLE_PATH

    report_folders = Path(os.path.realpath(report)).parents
    files: dict[Path, str] = {}
    for source in sources:
        if isinstance(source, FileSource):
            folder = Path(source.path)
            model = folder / "model.onnx" if source.backend_folder else folder
            inside = Path(os.path.realpath(model.parent)) in report_folders
            files |= model_files(model, "a model this check reads", with_data=inside)
            if source.inputs:
                files[Path(source.inputs)] = f"the inputs of {model}"
            if source.backend_folder and inside:
                files |= dict.fromkeys(folder.glob("test_data_set_*/*.pb"), f"test data of {folder}")
        elif getattr(source, "source", None) == str(EXAMPLE_PATH):
            files[EXAMPLE_PATH] = "the bundled example model"
        elif isinstance(source, check.MutationSeed):
            for base in source.bases:
                if base == mutate.EXAMPLE:
                    files[EXAMPLE_PATH] = "the bundled example model"
                else:
                    files |= model_files(Path(base), "a model this check reads", with_data=False)
    return files


def vet_named_models(sources: list, named: set[str]) -> None:
    """A model named on the command line that cannot be read (truncated, not ONNX) or whose external
    data is missing, short or outside its folder is bad input (exit 2), found before any work; models
    found in folders get a verdict instead ("not runnable")."""
    for source in sources:
        if source.path in named:
            model_path = Path(source.path) / "model.onnx" if source.backend_folder else Path(source.path)
            read_model_file(model_path, inline_small=False)


class CheckCommand(Command):
    """``check``: ``conformance.check.run``; the exit status is ``check.Report.exit_status``, or 143 when
    SIGTERM arrived as the run ended."""

    name = "check"
    help = "compare rewritten models with ORT's builtin gathers"
    groups = (VerbosityOptions(),)
    seed = SeedOptions("seed of generated inputs and of --fuzz and --mutate cases")
    shapes = InputShapeOptions("shapes of generated inputs, e.g. input_ids:[1,128] (symbolic dims otherwise take "
                               "3, then 1, 8, 64, 512, 4096 while the original model refuses them)")
    inputs = LoadInputsOptions("inputs to use for models without test data (or, found in a folder, without an "
                               "inputs file of their own: NAME.inputs.npz or inputs.npz beside them): an .npz of "
                               "arrays named after the inputs, or a folder of .npz files or test_data_set_* folders")
    modes = CheckModeOptions()
    cluster = ClusterOptions()

    def parser_options(self) -> dict[str, Any]:
        return {
            "formatter_class": argparse.RawDescriptionHelpFormatter,
            "description": "Rewrite each model, run the original (plain ORT) and the rewrite (GatherMultiaxis) on "
                           "the same inputs and compare them bit for bit, each model in a child process with a "
                           "timeout. With no PATH: ONNX's own node tests that hold a gather, plus the bundled "
                           "example.",
            "epilog": "verdicts: passed, failed, not compared (every data set raised on both sides, or none could "
                      "be made), not runnable (ORT cannot run the original), builtin wrong (ONNX's reference "
                      "evaluator sides with the rewrite), no gather (nothing was rewritten, so nothing to "
                      "compare).\n" + EXIT_STATUS}

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", nargs="*", metavar="PATH",
                            help="an .onnx file, a backend-test folder (model.onnx + test_data_set_*), or a folder "
                                 "of them")
        parser.add_argument("--fuzz", type=positive_int, default=0, metavar="N",
                            help="check N random single-node models instead (no PATH)")
        parser.add_argument("--mutate", type=positive_int, default=0, metavar="N",
                            help="check N rewritten models edited after the rewrite instead (fuzz models, the "
                                 "bundled example and each PATH model; ops inserted, records copied, attributes "
                                 "changed, Range indices, unknown types): the default session, the kernel path and "
                                 "the lowered model must agree bit for bit")
        self.seed.add_to(parser)
        parser.add_argument("--save-dir", metavar="DIR",
                            help="where --fuzz and --mutate save reproducers of failures (default: a temp dir)")
        self.shapes.add_to(parser)
        self.inputs.add_to(parser)
        parser.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                            help=f"per model (default {DEFAULT_TIMEOUT_S:g} s); a model that takes longer is "
                                 "'failed' (or 'not runnable' when the original hung)")
        self.modes.add_to(parser)
        self.add_run_options(parser)
        parser.set_defaults(argv=None)

    def add_run_options(self, parser: argparse.ArgumentParser) -> None:
        """How the run goes and what it writes: --fail-fast to --resume."""
        parser.add_argument("--fail-fast", action="store_true", help="stop at the first failed case")
        parser.add_argument("--allow", action="append",
                            choices=["not compared", "not runnable", "no gather", "nondeterministic"],
                            metavar="VERDICT",
                            help="do not fail the run (exit 3, or 4) for this verdict: 'not compared', 'not "
                                 "runnable', 'nondeterministic' or 'no gather' (repeatable; with no PATH, 'not "
                                 "runnable' is allowed)")
        parser.add_argument("--json", metavar="FILE",
                            help="also write the report as JSON: one line per case as it finishes (JSON Lines), "
                                 "replaced by one JSON document when the run ends (also on Ctrl-C or SIGTERM)")
        parser.add_argument("--force", action="store_true", help="overwrite an existing JSON report")
        parser.add_argument("--jobs", "-j", type=positive_int, default=default_jobs(), metavar="N",
                            help="cases checked at once, each in its own child process (default: the number of "
                                 "CPUs; 1: one after another)")
        self.cluster.add_to(parser)
        parser.add_argument("--resume", metavar="REPORT",
                            help="skip the cases a --json report of the same run already holds (a finished, "
                                 "interrupted or killed run) and write the whole report to it (or to --json)")

    def run(self, args: argparse.Namespace) -> int:
        from ..conformance import check
        from ..conformance.cases import BadInput, InputOptions, load_inputs, parse_input_shapes
        from ..conformance.reportfile import resumed_results

        self.modes.parse(args)
        resume_into = bool(args.resume) and (args.json is None or Path(args.json) == Path(args.resume))
        report_path = args.resume if resume_into else args.json
        if not resume_into:
            writable(args.json, args.force)
        if args.save_dir and not Path(args.save_dir).is_dir():
            raise CommandError(f"--save-dir {args.save_dir}: no such folder")
        try:
            options = InputOptions(parse_input_shapes(args.input_shapes or []),
                                   load_inputs(args.load_inputs) if args.load_inputs else (), args.seed)
            sources, allowed = check_sources(args)
            finished = (resumed_results(args.resume, args.mode.value, check.case_keys(sources), args.runtime or "")
                        if args.resume else [])
        except BadInput as error:
            raise CommandError(str(error)) from None
        cluster_timeout = self.cluster.reachable(args)
        if exists(report_path):  # only an existing file can be one the check reads
            option = "--json" if report_path == args.json else "--resume"
            not_over(option, report_path, check_reads(sources, report_path) | self.inputs.files_read(args.load_inputs))
        report = self.run_cases(args, sources, options, finished, cluster_timeout, report_path, resume_into)
        if report is None:
            return 143
        if not args.paths and not args.fuzz and all(r.folded_by_ort for r in report.results
                                                    if r.verdict == "no gather"):
            # The built-in suite under --ort-optimize: node tests whose gathers ORT's optimizer folds away (static
            # shapes, constant indices) leave nothing of ours to compare, which is not a failure; any other
            # "no gather" still is.
            allowed = allowed | {"no gather"}
        return report.exit_status(allowed)

    def run_cases(self, args: argparse.Namespace, sources: list, options: Any, finished: list,
                  cluster_timeout: float, report_path: str | None, resume_into: bool) -> Any:
        """Run the cases, print their progress, table and summary, write the report file; the report, or None
        when SIGTERM arrived as the run ended."""
        from ..conformance import check
        from ..conformance.reportfile import ReportFile
        from ..graphs.modelfile import ModelFileError

        progress = CheckProgress(args.verbose, len(sources), len(finished))
        command = sys.argv if args.argv is None else args.argv
        report_file = ReportFile(report_path, overwrite=args.force or resume_into) if report_path else None
        if report_file is not None:
            try:
                report_file.start(check.Report(command=list(command), mode=args.mode.value, runtime=args.runtime or ""),
                                  len(sources), finished)
            except ModelFileError as error:
                raise CommandError(str(error)) from None

        def on_result(result: check.CheckResult) -> None:
            if report_file is not None:
                report_file.add(result)
            if args.verbose > 0:
                progress.result_line(f"{result.verdict:<13} {result.name}"
                                     + (f"  ({result.detail})" if result.detail else "")
                                     + (f"\n{'':<14}inputs: {result.inputs}" if result.inputs else ""))
            progress.advance(result.name)

        with check.stop_on_sigterm() as sigterm:  # SIGTERM gets what Ctrl-C gets (exit status 143)
            try:
                report = check.run(sources, options=options, timeout=args.timeout, fail_fast=args.fail_fast,
                                   on_result=on_result, command=command, mode=args.mode, jobs=args.jobs,
                                   finished=finished, cluster=args.cluster, cluster_timeout=cluster_timeout,
                                   runtime=args.runtime)
            finally:
                sigterm.defer()
                progress.close()
            print_table(report.results, args.verbose)
            if report.interrupted:
                print(f"interrupted after {len(report.results)} of {len(sources)} cases ({report.stopped_by})",
                      file=sys.stderr, flush=True)
            print(report.summary_line(), flush=True)
            if report_file is not None:
                try:
                    report_file.finish(report)
                except ModelFileError as error:
                    raise CommandError(str(error)) from None
        return None if sigterm.received and not report.interrupted else report
