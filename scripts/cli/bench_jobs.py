"""The jobs of ``bench``, one ``BenchJob`` each; a job's module in ``gathermultiaxis.bench`` is imported when
it runs."""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .command_check import RUNTIME_NAMES
from .command_base import ArgGroup, CommandError, Output, non_negative_int, positive_float, positive_int
from .option_groups import write_json, writable

SUPPRESSED = argparse.SUPPRESS  # a job's own options never overwrite what was given before the job


class BenchOptions(ArgGroup):
    """The options bench jobs share. On a job's parser their default is argparse.SUPPRESS, so that the
    same option given before the job name (``bench --repeats 9 runtime``) is kept; ``legacy`` adds the
    hidden spellings from before the jobs (``bench --runtime``, ...)."""

    def __init__(self, default: str | None, quick: bool = False, reference: bool = False, legacy: bool = False):
        self.default, self.quick, self.reference, self.legacy = default, quick, reference, legacy

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        keep: dict[str, Any] = {} if self.default is None else {"default": self.default}
        parser.add_argument("--repeats", type=positive_int, help="timed runs per measurement",
                            **({"default": None} | keep))
        parser.add_argument("--json", metavar="FILE", help="also write the results as JSON", **({"default": None} | keep))
        parser.add_argument("--force", action="store_true", help="overwrite existing JSON or plot files", **keep)
        if self.quick or self.legacy:
            parser.add_argument("--quick", action="store_true", help="small workloads; runtime: no memory rows", **keep)
        if self.reference or self.legacy:
            parser.add_argument("--reference-cap", type=positive_float, metavar="SECONDS",
                                help="time cap for the onnx reference evaluator (default 30 s)",
                                **({"default": 30.0} | keep))
            parser.add_argument("--plot", metavar="FILE.png", help="draw the ratios as a bar chart (needs matplotlib)",
                                **({"default": None} | keep))
        if self.legacy:
            self.add_legacy(parser)

    @staticmethod
    def add_legacy(parser: argparse.ArgumentParser) -> None:
        """The spellings before the jobs: still accepted, with a note of the new one."""
        hidden = argparse.SUPPRESS
        parser.add_argument("--runtime", action="store_true", help=hidden)
        parser.add_argument("--end-to-end", nargs="+", metavar="MODEL|FOLDER", help=hidden)
        parser.add_argument("--processes", type=positive_int, default=2, help=hidden)
        parser.add_argument("--build-exports", metavar="DIR", help=hidden)
        parser.add_argument("--big-model", type=positive_float, nargs="?", const=2.2, default=None, help=hidden)
        parser.add_argument("--big-graph", type=positive_int, nargs="?", const=50_000, default=None, help=hidden)
        parser.add_argument("--big-model-folder", metavar="DIR", help=hidden)
        parser.add_argument("--ort-optimize", action="store_true", help=hidden)


class BenchJob:
    """One job of ``bench``: its name and help, its options (added to its own sub-parser), whether the parsed
    arguments choose it (the jobs' legacy flags set the same names) and ``run``, which returns the exit
    status (``CommandError`` for bad input)."""

    name: str = ""
    help: str = ""

    def add_to(self, jobs) -> argparse.ArgumentParser:
        parser = jobs.add_parser(self.name, help=self.help)
        self.add_arguments(parser)
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        BenchOptions(SUPPRESSED).add_to(parser)

    def chosen(self, args: argparse.Namespace) -> bool:
        return bool(getattr(args, self.name.replace("-", "_")))

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError


class KernelJob(BenchJob):
    """bench kernel (the default job): the kernel against NumPy, ORT and the reference (bench.kernel)."""

    name = "kernel"
    help = ("the kernel against NumPy, ORT builtin, the bridge floor and the ONNX reference, on full-size "
            "workloads (the default job)")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        BenchOptions(SUPPRESSED, quick=True, reference=True).add_to(parser)

    def chosen(self, args: argparse.Namespace) -> bool:
        return True

    def run(self, args: argparse.Namespace) -> int:
        from ..bench import kernel as kernel_bench
        if args.plot:
            writable(args.plot, args.force)
            try:
                import matplotlib  # noqa: F401 - only to fail before a long run
            except ImportError:
                raise CommandError("--plot needs matplotlib: pip install 'gathermultiaxis[bench]'") from None
        output = Output(args.verbose)
        results = kernel_bench.run_bench(args.quick, args.repeats, args.reference_cap,
                                         progress=lambda name: output.progress(0, None, name))
        output.end_progress()
        print(kernel_bench.format_report(results) if args.verbose >= 0 else kernel_bench.summary_table(results))
        print("\nLowered to standard ONNX ops, on plain ORT:\n" + kernel_bench.lowered_table(results))
        if args.json:
            write_json(args.json, [asdict(r) for r in results], force=args.force)
        if args.plot:
            kernel_bench.plot(results, args.plot)
            print(f"wrote {args.plot}")
        return 0


class RuntimeJob(BenchJob):
    """bench runtime: the models a user meets, through both entry points (bench.runtime)."""

    name = "runtime"
    help = ("the models a user meets (GPT-2 embeddings, int8 + DequantizeLinear, detection post-processing) "
            "through InferenceSession and session_options() against builtin; the call-path breakdown; the "
            "memory of a session over a bound 150 MB table (--quick skips it)")

    def add_to(self, jobs) -> argparse.ArgumentParser:
        parser = super().add_to(jobs)
        parser.set_defaults(runtime=True)
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        BenchOptions(SUPPRESSED, quick=True).add_to(parser)
        parser.add_argument("--startup", nargs="*", metavar="MODEL|FOLDER", default=None,
                            help="also session start-up against ORT's own, split by stage, 2 fresh processes per "
                                 "model (no models: the bench's small ones)")

    def run(self, args: argparse.Namespace) -> int:
        from ..bench import runtime as runtime_bench
        from ..bench import startup as startup_bench
        output = Output(args.verbose)
        results = runtime_bench.run_runtime_bench(args.repeats or 41,
                                                  progress=lambda name: output.progress(0, None, name))
        output.end_progress()
        print(runtime_bench.format_runtime_report(results))
        print("per call, Python side of a tiny gather (median us): " + ", ".join(
            f"{name} {value:.2f}" for name, value in runtime_bench.per_call_breakdown().items()))
        forms = runtime_bench.form_breakdown()
        print("one crossing per kernel form, calling-thread CPU (one intra-op thread):")
        print(runtime_bench.format_form_breakdown(forms))
        memory = [] if args.quick else [(external, runtime_bench.rss_over_bound_table(external=external))
                                        for external in (False, True)]
        for external, rss in memory:
            print(runtime_bench.format_rss(rss, external))
        startup = None if getattr(args, "startup", None) is None else startup_bench.startup_report(
            args.startup, progress=lambda name: output.progress(0, None, name))
        if startup is not None:
            output.end_progress()
            print(startup[0])
        if args.json:
            write_json(args.json, {"workloads": [asdict(r) for r in results], "forms": forms,
                                   "rss": [dict(rss, external=external) for external, rss in memory]}
                       | ({} if startup is None else {"startup": [asdict(r) for r in startup[1]]}),
                       force=args.force)
        return 0


class EndToEndJob(BenchJob):
    """bench end-to-end MODEL|FOLDER...: whole models in fresh processes (bench.end_to_end)."""

    name = "end-to-end"
    help = ("whole models (a folder: its *.onnx files): the original on ORT, the `rewrite --ort-optimize` model "
            "in InferenceSession and its lowering on ORT, one fresh process per column and round (exit 1 if the "
            "rewritten model's output differs)")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("end_to_end", nargs="+", metavar="MODEL|FOLDER")
        super().add_arguments(parser)
        parser.add_argument("--processes", type=positive_int, default=SUPPRESSED,
                            help="rounds of fresh processes (default 2; each model's worse round counts)")
        parser.add_argument("--load", type=non_negative_int, default=0, metavar="N",
                            help="run N busy-loop processes, pinned one per core, during the measurement "
                                 "(N = the number of cores: another process busy on every core)")

    def run(self, args: argparse.Namespace) -> int:
        from ..bench import end_to_end

        missing = [item for item in args.end_to_end if not Path(item).exists()]
        if missing:
            raise CommandError(f"end-to-end {missing[0]}: no such file or folder")
        if not end_to_end.model_paths(args.end_to_end):
            raise CommandError(f"end-to-end {' '.join(args.end_to_end)}: no .onnx file")
        output = Output(args.verbose)
        load = getattr(args, "load", 0)
        rows = end_to_end.run(args.end_to_end, repeats=args.repeats or 201, processes=args.processes,
                              progress=lambda text: output.progress(0, None, text), load=load)
        output.end_progress()
        print(end_to_end.versions_line(load))
        print(end_to_end.format_rows(rows))
        if args.json:
            write_json(args.json, [asdict(r) for r in rows], force=args.force)
        return 0 if all(r.bit_identical and r.processes for r in rows) else 1


class LoweringJob(BenchJob):
    """bench lowering [MODEL|FOLDER...]: rewrite then lower, against the original and the builtin kernels
    (bench.lowering); exit 1 when a lowered model's outputs differ from the original's or a row failed."""

    name = "lowering"
    help = ("`rewrite` then `lower` on whole models (a folder: its *.onnx files) and on gather kernels: lowered / "
            "original time on plain ORT (each model and column in fresh processes), node and op counts, "
            "bit-exactness, beside the lowering's goals (exit 1 if outputs differ)")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("models", nargs="*", metavar="MODEL|FOLDER")
        super().add_arguments(parser)
        parser.add_argument("--processes", type=positive_int, default=SUPPRESSED,
                            help="rounds of fresh processes (default 2)")
        parser.add_argument("--no-kernels", action="store_true", help="only the models given, not the kernels")
        parser.add_argument("--runtime", action="append", choices=RUNTIME_NAMES, metavar="RUNTIME", dest="on_runtimes",
                            help=f"time the lowered form against the original on this runtime instead (one of "
                                 f"{', '.join(RUNTIME_NAMES)}; repeatable), both forms in each fresh process, "
                                 "alternating")
        parser.add_argument("--webnn", action="store_true", help="with --runtime: the `lower --target webnn` form")

    def chosen(self, args: argparse.Namespace) -> bool:
        return args.job == "lowering"

    def run(self, args: argparse.Namespace) -> int:
        from ..bench import end_to_end
        from ..bench import lowering as lowering_bench

        missing = [item for item in args.models if not Path(item).exists()]
        if missing:
            raise CommandError(f"lowering {missing[0]}: no such file or folder")
        if args.models and not end_to_end.model_paths(args.models):
            raise CommandError(f"lowering {' '.join(args.models)}: no .onnx file")
        if not args.models and args.no_kernels:
            raise CommandError("lowering: nothing to measure (no model given, and --no-kernels)")
        output = Output(args.verbose)
        if args.on_runtimes:
            return self.on_runtimes(args, output)
        if args.webnn:
            raise CommandError("lowering: --webnn goes with --runtime")
        rows = lowering_bench.run(args.models, with_kernels=not args.no_kernels, repeats=args.repeats or 41,
                                  processes=args.processes, progress=lambda text: output.progress(0, None, text))
        output.end_progress()
        print(end_to_end.versions_line())
        print(lowering_bench.format_report(rows))
        if args.json:
            write_json(args.json, lowering_bench.as_json(rows), force=args.force)
        # failed: unreadable, or the passes crashed (nothing counted); or lowered but not bit-identical or not
        # timed. A GatherMultiaxis left by the lowering is a finding the report shows, not a failure of the bench.
        failed = [row for row in rows if not row.op_counts or (
            row.all_lowered and not (row.bit_identical and row.bit_identical_unoptimized and row.processes))]
        return 1 if failed else 0

    @staticmethod
    def on_runtimes(args: argparse.Namespace, output: Output) -> int:
        """bench lowering --runtime R...: the form against the original on each runtime (exit 1 if outputs differ)."""
        from ..bench import end_to_end
        from ..bench import lowering as lowering_bench
        from ..conformance.runtimes import RuntimeUnavailable, check_available

        names = list(dict.fromkeys(args.on_runtimes))
        for name in names:
            try:
                check_available(name)
            except RuntimeUnavailable as error:
                raise CommandError(f"--runtime {name}: {error}") from None
        rows = lowering_bench.run_on_runtimes(args.models, names, webnn=args.webnn, with_kernels=not args.no_kernels,
                                              repeats=args.repeats or 41, processes=args.processes,
                                              progress=lambda text: output.progress(0, None, text))
        output.end_progress()
        print(end_to_end.versions_line())
        print(lowering_bench.format_runtime_report(rows))
        if args.json:
            write_json(args.json, {"machine": end_to_end.versions_line(), "rows": [asdict(row) for row in rows],
                                   "summary": lowering_bench.runtime_summary(rows)}, force=args.force)
        return 1 if any(row.same_outputs is False for row in rows) else 0


class BuildExportsJob(BenchJob):
    """bench build-exports DIR: the real exports end-to-end times (exports.models.build_exports)."""

    name = "build-exports"
    help = ("write the real exports end-to-end is meant for into DIR (transformers models with random weights, a "
            "hummingbird-ml tree ensemble; needs torch and transformers)")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("build_exports", metavar="DIR")

    def run(self, args: argparse.Namespace) -> int:
        from ..exports.models import build_exports

        folder = Path(args.build_exports)
        if not folder.is_dir():
            raise CommandError(f"build-exports {folder}: no such folder")
        output = Output(args.verbose)
        written, skipped = build_exports(folder, progress=lambda name: output.progress(0, None, name))
        output.end_progress()
        for path in written:
            print(f"wrote {path}")
        for name, reason in skipped.items():
            print(f"skipped {name}: {reason}")
        return 0 if written else 1


class BigGraphJob(BenchJob):
    """bench big-graph: rewrite time and peak memory on models of many nodes (bigmodel.measure_big_graph)."""

    name = "big-graph"
    help = ("CPU seconds and peak memory of `rewrite` on chains of GATHERS x (Gather + Add) nodes (default 10000 "
            "and 50000: 20k and 100k nodes) against onnx.load + infer_shapes + save of them, in fresh processes")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("big_graph", type=positive_int, nargs="*", default=[10_000, 50_000], metavar="GATHERS")
        super().add_arguments(parser)
        parser.add_argument("--profile", action="store_true", default=SUPPRESSED,
                            help="also profile one rewrite per size (cProfile, grouped by part)")
        parser.add_argument("--against", metavar="PYTHON", default=SUPPRESSED,
                            help="also time the rewrite of another installation's Python in the same rounds, "
                                 "and compare its output bytes")

    def run(self, args: argparse.Namespace) -> int:
        from ..bench import bigmodel, rewrite_profile
        sizes = args.big_graph if isinstance(args.big_graph, list) else [args.big_graph]  # --big-graph N: one
        against, runs = getattr(args, "against", None), []
        if against is not None and shutil.which(against) is None:
            raise CommandError(f"big-graph --against {against}: no such program")
        for gathers in sizes:
            run = bigmodel.measure_big_graph(gathers, repeats=args.repeats or 2, against=against)
            print(bigmodel.format_big_graph(run))
            runs.append(run)
            if getattr(args, "profile", False):
                print(rewrite_profile.format_profile(bigmodel.profile_big_graph(gathers)))
            print()
        if args.json:
            write_json(args.json, [asdict(run) for run in runs], force=args.force)
        return 0 if all(run.output_loads and run.same_output is not False for run in runs) else 1


class BigModelJob(BenchJob):
    """bench big-model: peak memory of rewrite on a model over 2 GB (bigmodel.measure)."""

    name = "big-model"
    help = "peak memory of `rewrite` on a model with a GB-sized external table (default 2.2 GB, a sparse file)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("big_model", type=positive_float, nargs="?", default=2.2, metavar="GB")
        super().add_arguments(parser)
        parser.add_argument("--folder", dest="big_model_folder", default=SUPPRESSED, metavar="DIR",
                            help="where it builds its model")
        parser.add_argument("--ort-optimize", action="store_true", default=SUPPRESSED,
                            help="rewrite with --ort-optimize")

    def run(self, args: argparse.Namespace) -> int:
        from ..bench import bigmodel
        if args.big_model_folder and not Path(args.big_model_folder).is_dir():
            raise CommandError(f"big-model --folder {args.big_model_folder}: no such folder")
        run = bigmodel.measure(args.big_model, Path(args.big_model_folder) if args.big_model_folder else None,
                               args.ort_optimize)
        print(json.dumps(asdict(run), indent=2))
        if args.json:
            write_json(args.json, asdict(run), force=args.force)
        return 0 if run.exit_status == 0 and run.rows_match else 1


KERNEL, RUNTIME, END_TO_END, LOWERING = KernelJob(), RuntimeJob(), EndToEndJob(), LoweringJob()
BUILD_EXPORTS, BIG_GRAPH, BIG_MODEL = BuildExportsJob(), BigGraphJob(), BigModelJob()
JOBS = (KERNEL, RUNTIME, END_TO_END, LOWERING, BUILD_EXPORTS, BIG_GRAPH, BIG_MODEL)  # as `bench --help` lists them
# Which job runs: the first chosen, in this order (the legacy flags can name several; kernel when none is).
DISPATCH = (LOWERING, BIG_MODEL, BIG_GRAPH, RUNTIME, END_TO_END, BUILD_EXPORTS, KERNEL)
