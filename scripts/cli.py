"""The ``gathermultiaxis`` command line: ``rewrite``, ``lower``, ``check``, ``bench``, ``example``.

This module owns argument parsing and printing; the work is done by library functions
(``graphs.rewrite_model``, ``graphs.lower_model``, ``conformance.check.run``, ``bench.kernel.run_bench``)
that Python callers use directly.

Exit status:
  0    success (check: every case passed, or found ORT's builtin kernel wrong)
  1    check: a case failed (outputs differ, only one side raised, the rewrite crashed or hung);
       lower: a GatherMultiaxis node could not be lowered (the model is written, the report says why)
  2    bad input: a path, file or option the command cannot use; one line on stderr, before any work
  3    check: a case was not compared or not runnable (see --allow)
  4    check: a case holds no gather to compare ("no gather"; a model with none, or only gathers left), and
       nothing failed, was not compared or not runnable (see --allow)
  130  interrupted (Ctrl-C): check prints the summary of what ran and writes the partial JSON report
  143  check: stopped by SIGTERM (`kill`): the same as Ctrl-C (summary, partial JSON report, the
       child process stopped)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__  # bench/, exports/ and policies: imported by the commands that use them
from .conformance.isolation import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S

# conformance.runtimes.RUNTIMES, written out: the parser imports no runner (tests/cli/test_cli.py holds them equal)
RUNTIME_NAMES = ("ort", "openvino", "tract", "reference", "web")

if TYPE_CHECKING:  # imported by import_library() once the arguments are parsed
    from .conformance import check, cluster, mutate
    from .conformance.cases import (BadInput, FileSource, InputOptions, default_suite, find_sources, load_inputs,
                                    parse_input_shapes)
    from .conformance.reportfile import ReportFile, resumed_results
    from .examples import EXAMPLE_PATH
    from .graphs import GATHER_OPS, OPT_IN_OPS, lower_model, rewrite_model
    from .graphs.load_check import changed_part
    from .graphs import modelfile
    from .graphs.modelfile import (ModelFileError, check_target, external_data_files, load_model, read_model,
                                    same_file, save_model, write_bytes_atomic)
    from .graphs.ort_optimizer import ort_optimized
    from .harness import session_options


_library_imported = False


def import_library() -> None:
    """Import the library modules the commands use, as this module's names: ``main`` calls it once the
    arguments are parsed, so that ``--help``, ``--version`` and a bad option load neither onnx nor the
    passes nor the conformance runner (tests/project/test_imports.py pins what they load).

    Returns:
        None.
    """
    global _library_imported, check, cluster, mutate, BadInput, FileSource, InputOptions, default_suite, find_sources, load_inputs
    global parse_input_shapes, ReportFile, resumed_results, EXAMPLE_PATH, GATHER_OPS, OPT_IN_OPS, lower_model
    global rewrite_model, changed_part, modelfile, ModelFileError, check_target, external_data_files, load_model
    global read_model, same_file, save_model, write_bytes_atomic, ort_optimized, session_options
    if _library_imported:  # once: a name a caller replaced since (a test's monkeypatch) stays replaced
        return
    _library_imported = True
    from .conformance import check, cluster, mutate
    from .conformance.cases import (BadInput, FileSource, InputOptions, default_suite, find_sources, load_inputs,
                                    parse_input_shapes)
    from .conformance.reportfile import ReportFile, resumed_results
    from .examples import EXAMPLE_PATH
    from .graphs import GATHER_OPS, OPT_IN_OPS, lower_model, rewrite_model
    from .graphs.load_check import changed_part
    from .graphs import modelfile
    from .graphs.modelfile import (ModelFileError, check_target, external_data_files, load_model, read_model,
                                    same_file, save_model, write_bytes_atomic)
    from .graphs.ort_optimizer import ort_optimized
    from .harness import session_options


def printable(text: str) -> str:
    """``text`` with the bytes of file names that are not UTF-8 (surrogate escapes) shown as ``\\xff``:
    printable on any stream.

    Args:
        text: the text to show.

    Returns:
        The text, every byte that is not UTF-8 written as a backslash escape.
    """
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class CommandError(Exception):
    """One line for the user; exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr (which command, what is wrong, where to look), exit status 2."""

    def error(self, message: str):
        """Print the one line and exit.

        Args:
            message: argparse's description of what is wrong.

        Returns:
            Never: exits with status 2.
        """
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


class Output:
    """Where a command prints: results on stdout; progress on stderr (a live line on a terminal, a
    line every ``period`` seconds otherwise); ``-q`` keeps only failures and the summary, ``-v`` adds
    a line per case."""

    def __init__(self, verbosity: int, period: float = 30.0):
        self.verbosity, self.period = verbosity, period
        self.live = sys.stderr.isatty()
        self._last = time.monotonic()
        self._shown = False

    def progress(self, done: int, total: int | None, text: str) -> None:
        """Show a progress line (nothing under ``-q``).

        Args:
            done: the items done so far.
            total: the number of items, or None (or 0) when unknown.
            text: what is being done (on a terminal, cut to 70 characters).

        Returns:
            None.
        """
        if self.verbosity < 0:
            return
        of = f"/{total}" if total else ""
        if self.live:
            sys.stderr.write(f"\r[{done}{of}] {text[:70]:<70}")
            sys.stderr.flush()
            self._shown = True
        elif time.monotonic() - self._last >= self.period or (total and done == total and done > 1):
            self._last = time.monotonic()
            print(f"[{done}{of}] {text}", file=sys.stderr, flush=True)

    def end_progress(self) -> None:
        """Erase the live progress line, if one is shown.

        Returns:
            None.
        """
        if self._shown:
            sys.stderr.write("\r" + " " * 80 + "\r")
            sys.stderr.flush()
            self._shown = False


def _writable(path: str | None, force: bool) -> None:
    if path:
        try:
            check_target(path, overwrite=force)
        except ModelFileError as error:
            raise CommandError(str(error)) from None


def _not_over(option: str, path: str | None, files: dict[Path, str]) -> None:
    """Refuse ``option path`` (a report, or a model to write) naming a file the command reads or writes
    (``files``: path -> what it is, e.g. "the input model"), with or without --force: it would be lost,
    or the report would take its place."""
    if path:
        for other, what in files.items():
            if same_file(path, other):
                raise CommandError(f"{option} {path}: is {what}; choose another name")


def _model_files(model: Path, what: str, with_data: bool) -> dict[Path, str]:
    """``model`` as ``what``; with ``with_data``, also the files holding its external data (read from it:
    asked only when a file they might be is there, see ``_exists``)."""
    files = {model: what}
    if with_data:
        files.update((data, f"external data of {what} ({model})") for data in sorted(external_data_files(model)))
    return files


def _exists(path: str | os.PathLike | None) -> bool:
    return path is not None and bool(path) and os.path.lexists(path)


def _inputs_read(load_inputs_path: str | None) -> dict[Path, str]:
    """The files --load-inputs reads (a file, or a folder's .npz files and test_data_set_*/*.pb)."""
    if not load_inputs_path:
        return {}
    where = Path(load_inputs_path)
    if not where.is_dir():
        return {where: "the --load-inputs file"}
    return dict.fromkeys([*where.glob("*.npz"), *where.glob("test_data_set_*/*.pb")], "an input --load-inputs reads")


def _input_shapes(args) -> dict[str, tuple[int, ...]]:
    """--input-shapes through the one parser every command uses (``conformance.cases.parse_input_shapes``):
    a malformed spec is bad input (exit 2), before any work."""
    try:
        return parse_input_shapes(args.input_shapes or [])
    except BadInput as error:
        raise CommandError(str(error)) from None


def _read(path, inline_small: bool = True):
    """``read_model`` for a model the command line names: a file it cannot use is bad input (exit 2).
    The model and the folder its external data is in (None without external data)."""
    try:
        return read_model(path, inline_small)
    except ModelFileError as error:
        raise CommandError(str(error)) from None


def _write_json(path: str, payload, force: bool) -> None:
    """Checked before the work (``_writable``) and again at write time: a report another run wrote
    meanwhile is not overwritten without --force (exit 2, after the results are printed)."""
    try:
        write_bytes_atomic(Path(path), (json.dumps(payload, indent=2) + "\n").encode(), overwrite=force)
    except ModelFileError as error:
        raise CommandError(str(error)) from None


# -- rewrite -------------------------------------------------------------------------------------

def _source_and_target(args) -> tuple[Path, Path]:
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


def loads_in_ort(path, part=None):
    """``graphs.modelfile.loads_in_ort`` with ``session_options``: the written model's load check.

    Args:
        path: the written model file.
        part: what of the model to load-check (``graphs.load_check.changed_part``), or None for the whole model.

    Returns:
        None.
    """
    modelfile.loads_in_ort(path, part, session_options=session_options)


def _transform_file(args, transform):
    """Load ``args.model``, apply ``transform(model, external_data_folder) -> (model, report)`` (after ORT's
    optimizer with --ort-optimize; the folder its external data is read from), save the result where
    -o / --in-place says, print and return the report.

    Refused before any work: a --json report naming the input, the output or either's data file; an
    output (or its data file) that is the input's data file (without --in-place: the input would read
    the new data); an existing output or data file without --force, where --in-place may replace only
    the input and the data files it refers to (not another model's ``IN.onnx.data``)."""
    source, target = _source_and_target(args)
    target_data = target.parent / (target.name + ".data")
    # the input's data files, read only when one of the names it could take is already there
    source_files = _model_files(source, "the input model",
                                with_data=any(map(_exists, (target, target_data, args.json))))
    source_data = [path for path in source_files if path != source]
    written = {target_data: "the output's external data file"} | (
        {} if args.in_place else {target: "the output model"})
    _not_over("--json", args.json, source_files | written)
    for path in () if args.in_place else (target, target_data):
        if any(same_file(path, data) for data in source_data):
            raise CommandError(f"{path}: is external data of the input model ({source}), which would then read "
                               f"the output's data; choose another output name")
    if args.in_place and _exists(target_data) and not args.force and not any(
            same_file(target_data, data) for data in source_data):
        raise CommandError(f"{target_data}: already exists, and {source} does not refer to it (another model's "
                           f"data?); pass --force to overwrite it")
    _writable(args.json, args.force)
    replaceable = [source, *source_data] if args.in_place else []
    try:
        # ORT loads it (or the command stops here)
        loaded, data_folder = load_model(source, session_options=session_options)
        external = data_folder is not None
        for path in [target] + ([target_data] if external else []):  # before the work (and again when saved)
            check_target(path, overwrite=args.force or any(same_file(path, other) for other in replaceable))
        with (ort_optimized(loaded, data_folder, target, session_options=session_options)
              if getattr(args, "ort_optimize", False)
              else contextlib.nullcontext((loaded, data_folder))) as (model, data_folder):
            result, report = transform(model, data_folder)
            validate = _load_check(loaded, model, result, report.main_graph_types or None)
            del loaded, model
            save_model(result, target, external_data=external, external_data_folder=data_folder,
                       overwrite=args.force, replaceable=replaceable, validate=validate)
    except ModelFileError as error:
        raise CommandError(str(error)) from None
    if args.verbose >= 0:
        print(report.table())
    print(printable(f"wrote {target}"))
    if args.json:
        _write_json(args.json, report.as_dict(), force=args.force)
    return report


def _load_check(loaded, transformed, result, types):
    """How the written model is proven to load in ORT, which loaded ``loaded``: not at all when it is
    ``loaded`` (written by onnx, its external data copied byte for byte), by loading only the part the
    transform changed when that part is all that differs (graphs.load_check), else by loading all of it.
    ``transformed`` is what the transform was given: ``loaded``, or ORT's optimized model of it, which
    no load proved. ``types``: the pass's types of ``loaded``'s main graph, if it reports them."""
    if result == loaded:
        return None
    part = changed_part(loaded, result, types) if transformed is loaded else None
    return loads_in_ort if part is None else functools.partial(loads_in_ort, part=part)


def run_rewrite(args) -> int:
    """``rewrite IN -o OUT``: every ONNX gather (``--ops``) -> GatherMultiaxis.

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0.

    Raises:
        CommandError: the input or output is unusable (``main`` prints it, exit status 2).
    """
    _transform_file(args, lambda model, folder: rewrite_model(model, args.ops or GATHER_OPS,
                                                           runtime_alignment=not args.static_ranks_only,
                                                           session_options=session_options,
                                                           external_data_folder=folder))
    return 0


def run_lower(args) -> int:
    """``lower IN -o OUT [--target webnn]``: GatherMultiaxis -> standard ONNX ops (or WebNN's subset). Exit
    1 (the model still written) when a node could not be lowered (for WebNN: to its subset), the report
    saying why.

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0, or 1 when a node was left unlowered.

    Raises:
        CommandError: the input or output is unusable, a WebNN input shape is not static, or ``--input-shapes`` is given without ``--target webnn``
            (``main`` prints it, exit status 2).
    """
    if args.target == "webnn":
        from .graphs.webnn import NotStatic, lower_for_webnn

        shapes = _input_shapes(args)

        def transform(model, external_data_folder):
            try:
                return lower_for_webnn(model, shapes, external_data_folder)
            except NotStatic as error:
                raise CommandError(f"{args.model}: {error}") from None

        return 1 if _transform_file(args, transform).left else 0
    if args.input_shapes:
        raise CommandError("--input-shapes goes with --target webnn")
    return 1 if _transform_file(args, lower_model).left else 0


def run_webnn_check(args) -> int:
    """``webnn-check MODEL``: the nodes outside what ORT's WebNN EP takes (graphs.webnn.webnn_check).
    Exit 0 when there is none, 1 otherwise.

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0 or 1.

    Raises:
        CommandError: the ``--json`` file would overwrite the model or cannot be written
            (``main`` prints it, exit status 2).
    """
    from .graphs.webnn import webnn_check

    shapes = _input_shapes(args)
    _not_over("--json", args.json, _model_files(Path(args.model), "the model", with_data=_exists(args.json)))
    _writable(args.json, args.force)
    model, data_folder = _read(args.model)
    findings = webnn_check(model, shapes, data_folder)
    for finding in findings:
        print(printable(f"{finding.op_type} {finding.node!r}: {finding.reason}"))
    print(f"{len(findings)} finding(s) outside WebNN's subset" if findings else "every node is within WebNN's subset")
    if args.json:
        _write_json(args.json, [asdict(f) for f in findings], force=args.force)
    return 1 if findings else 0


def _op_list(text: str) -> list[str]:
    from .graphs import GATHER_OPS, OPT_IN_OPS  # parsing imports the library only for the option that needs it

    ops = [op.strip() for op in text.split(",") if op.strip()]
    unknown = [op for op in ops if op not in GATHER_OPS + OPT_IN_OPS]
    if unknown or not ops:
        raise argparse.ArgumentTypeError(f"choose from {','.join(GATHER_OPS + OPT_IN_OPS)} (got {text!r})")
    return ops


# -- check ---------------------------------------------------------------------------------------

def _check_sources(args) -> tuple[list, set[str]]:
    """The cases to check, and the verdicts that do not fail the run."""
    allowed = set(args.allow or ())
    if args.mutate:
        if args.fuzz:
            raise CommandError("--mutate and --fuzz are two runs; run them separately")
        if args.mode is not check.CheckMode.DEFAULT:
            raise CommandError(f"--mutate compares the default session, the kernel path and the lowered model "
                               f"itself; it takes no --{args.mode.value}")
        sources = find_sources(args.paths) if args.paths else []
        _vet_named_models(sources, {str(Path(path)) for path in args.paths})
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
        _vet_named_models(sources, {str(Path(path)) for path in args.paths})
        return sources, allowed
    # The default suite holds ONNX node tests that ORT itself cannot run (bfloat16 attention, ...):
    # they are listed, but do not fail the run.
    return default_suite(), allowed | {"not runnable"}


def _check_reads(sources: list, report: str) -> dict[Path, str]:
    """The files a check of ``sources`` reads that the ``report`` path might name: each model file; its
    external data and a backend-test folder's test data when the report lies in its folder (data files
    lie there, and only those models are read for their names)."""
    report_folders = Path(os.path.realpath(report)).parents
    files: dict[Path, str] = {}
    for source in sources:
        if isinstance(source, FileSource):
            folder = Path(source.path)
            model = folder / "model.onnx" if source.backend_folder else folder
            inside = Path(os.path.realpath(model.parent)) in report_folders
            files |= _model_files(model, "a model this check reads", with_data=inside)
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
                    files |= _model_files(Path(base), "a model this check reads", with_data=False)
    return files


def _vet_named_models(sources: list, named: set[str]) -> None:
    """A model named on the command line that cannot be read (truncated, not ONNX) or whose external
    data is missing, short or outside its folder is bad input (exit 2), found before any work; models
    found in folders get a verdict instead ("not runnable")."""
    for source in sources:
        if source.path in named:
            model_path = Path(source.path) / "model.onnx" if source.backend_folder else Path(source.path)
            _read(model_path, inline_small=False)


class CheckProgress:
    """The progress of ``check`` on stderr: cases done, rate and ETA (tqdm, when installed: the
    ``progress`` extra; a live bar on a terminal, a line every ``period`` seconds otherwise); without
    tqdm, ``Output``'s count of cases. Nothing under ``-q``."""

    def __init__(self, verbosity: int, total: int, initial: int, period: float = 30.0):
        self.output, self.total = Output(verbosity), total
        self.done, self.initial, self.period = initial, initial, period
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        self.tqdm = tqdm
        self.started = self.last = time.monotonic()
        self.bar = None
        if tqdm is not None and verbosity >= 0 and self.output.live:
            self.bar = tqdm(total=total, initial=initial, unit="case", file=sys.stderr, dynamic_ncols=True,
                            leave=False)

    def result_line(self, text: str) -> None:
        """A line on stdout (``-v``) that does not tear the bar.

        Args:
            text: the line.

        Returns:
            None.
        """
        if self.bar is not None:
            self.bar.clear()
        self.output.end_progress()
        print(printable(text), flush=True)
        if self.bar is not None:
            self.bar.refresh()

    def advance(self, name: str) -> None:
        """Count one case done and show the progress.

        Args:
            name: the case's name (shown without tqdm).

        Returns:
            None.
        """
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.tqdm is not None and self.output.verbosity >= 0:
            now = time.monotonic()
            if now - self.last >= self.period or (self.done == self.total and self.done > 1):  # as Output
                self.last = now
                meter = self.tqdm.format_meter(self.done - self.initial, self.total - self.initial,
                                               now - self.started, unit="case")
                print(f"[{self.done}/{self.total}] {meter}", file=sys.stderr, flush=True)
        else:
            self.output.progress(self.done, self.total, name)

    def close(self) -> None:
        """Remove the bar or the live line.

        Returns:
            None.
        """
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.output.end_progress()


def _default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_check(args) -> int:
    """``check [PATH...]``: run the conformance cases (the built-in suite, models, ``--fuzz``) and compare with
    ORT's builtin kernels.

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: ``check.Report.exit_status`` (0 passed, 1 failed, 3 not compared or not runnable,
        4 no gather; 130 or 143 when Ctrl-C or SIGTERM interrupted it), or 143 when SIGTERM arrived as the
        run ended.

    Raises:
        CommandError: bad inputs, a missing ``--save-dir``, or a report file that cannot be written
            (``main`` prints it, exit status 2).
    """
    args.mode = check.CheckMode(args.mode)  # parsed as its name: the parser imports no runner
    _check_runtime(args)
    resume_into = args.resume and (args.json is None or Path(args.json) == Path(args.resume))
    report_path = args.resume if resume_into else args.json
    if not resume_into:
        _writable(args.json, args.force)
    if args.save_dir and not Path(args.save_dir).is_dir():
        raise CommandError(f"--save-dir {args.save_dir}: no such folder")
    try:
        options = InputOptions(parse_input_shapes(args.input_shapes or []),
                               load_inputs(args.load_inputs) if args.load_inputs else (), args.seed)
        sources, allowed = _check_sources(args)
        finished = (resumed_results(args.resume, args.mode.value, check.case_keys(sources), args.runtime or "")
                    if args.resume else [])
    except BadInput as error:
        raise CommandError(str(error)) from None
    cluster_timeout = _reachable_cluster(args)
    if _exists(report_path):  # only an existing file can be one the check reads
        option = "--json" if report_path == args.json else "--resume"
        _not_over(option, report_path, _check_reads(sources, report_path) | _inputs_read(args.load_inputs))
    progress = CheckProgress(args.verbose, len(sources), len(finished))
    command = sys.argv if args.argv is None else args.argv
    report_file = ReportFile(report_path, overwrite=args.force or bool(resume_into)) if report_path else None
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
            progress.result_line(f"{result.verdict:<13} {result.name}" + (f"  ({result.detail})" if result.detail else "")
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
    if not args.paths and not args.fuzz and all(r.folded_by_ort for r in report.results if r.verdict == "no gather"):
        # The built-in suite under --ort-optimize: node tests whose gathers ORT's optimizer folds away (static
        # shapes, constant indices) leave nothing of ours to compare, which is not a failure; any other
        # "no gather" still is.
        allowed = allowed | {"no gather"}
    return 143 if sigterm.received and not report.interrupted else report.exit_status(allowed)


def _reachable_cluster(args) -> float:
    """--cluster-timeout (or its default), once a scheduler answered at --cluster within it: an address
    where none does is bad input (exit 2), found before the run instead of a traceback or a hang."""
    if args.cluster is None:
        if args.cluster_timeout is not None:
            raise CommandError("--cluster-timeout goes with --cluster")
        return DEFAULT_CONNECT_TIMEOUT_S
    timeout = DEFAULT_CONNECT_TIMEOUT_S if args.cluster_timeout is None else args.cluster_timeout
    try:
        cluster.reach_scheduler(args.cluster, timeout)
    except (cluster.NoScheduler, ImportError) as error:
        raise CommandError(f"--cluster {args.cluster}: {error}") from None
    return timeout


LISTED_PASSES = 50  # more passed cases than this are counted, not listed, unless -v


def _check_runtime(args) -> None:
    """``check --runtime``: only with --lowered or --webnn, not with --cluster, and installed (else exit 2)."""
    if args.runtime is None:
        return
    if args.mode not in (check.CheckMode.LOWERED, check.CheckMode.WEBNN):
        raise CommandError(f"--runtime {args.runtime} goes with --lowered or --webnn")
    if args.cluster:
        raise CommandError(f"--runtime {args.runtime} runs on this machine only, not with --cluster")
    from .conformance.runtimes import RuntimeUnavailable, check_available

    try:
        check_available(args.runtime)
    except RuntimeUnavailable as error:
        raise CommandError(str(error)) from None


def print_table(results: list[check.CheckResult], verbosity: int) -> None:
    """-q: the failed cases; default: every case, or only those that did not pass when there are many
    (a fuzz run); -v: every case.

    Args:
        results: the cases' results.
        verbosity: -1 (``-q``), 0, or more (``-v``).

    Returns:
        None.
    """
    if verbosity < 0:
        shown = [r for r in results if r.verdict == "failed"]
    elif verbosity == 0 and len(results) > LISTED_PASSES:
        shown = [r for r in results if r.verdict != "passed"]
    else:
        shown = results
    if shown:
        print(printable(check.format_table(shown)))
    if len(shown) < len(results) and verbosity == 0:
        print(f"({len(results) - len(shown)} passed cases not listed; -v lists them)")


def _whole_number_at_least(minimum: int, rule: str) -> Callable[[str], int]:
    """An argparse ``type``: a whole number of at least ``minimum``, else ``rule`` in the error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{rule}, got {value}")
        return value
    return parse


_positive_int = _whole_number_at_least(1, "must be at least 1")
_non_negative_int = _whole_number_at_least(0, "must be 0 or more")
_seed = _whole_number_at_least(0, "a seed is 0 or more (NumPy's generators take no negative seed)")  # every --seed


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


# -- bench, example ------------------------------------------------------------------------------

def run_big_model(args) -> int:
    """bench big-model: peak memory of rewrite on a model over 2 GB (bigmodel.measure).

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0 when the measured run succeeded and its rows match, else 1.

    Raises:
        CommandError: ``--big-model-folder`` is not a folder (``main`` prints it, exit status 2).
    """
    from .bench import bigmodel
    if args.big_model_folder and not Path(args.big_model_folder).is_dir():
        raise CommandError(f"big-model --folder {args.big_model_folder}: no such folder")
    run = bigmodel.measure(args.big_model, Path(args.big_model_folder) if args.big_model_folder else None,
                           args.ort_optimize)
    print(json.dumps(asdict(run), indent=2))
    if args.json:
        _write_json(args.json, asdict(run), force=args.force)
    return 0 if run.exit_status == 0 and run.rows_match else 1


def run_big_graph(args) -> int:
    """bench big-graph: rewrite time and peak memory on a model of many nodes (bigmodel.measure_big_graph).

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0 when the output model loads, else 1.
    """
    from .bench import bigmodel
    run = bigmodel.measure_big_graph(args.big_graph, repeats=args.repeats or 1)
    print(bigmodel.format_big_graph(run))
    if args.json:
        _write_json(args.json, asdict(run), force=args.force)
    return 0 if run.output_loads else 1


def run_build_exports(args) -> int:
    """bench build-exports DIR: the real exports end-to-end times (exports.models.build_exports).

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0 when at least one export was written, else 1.

    Raises:
        CommandError: the folder does not exist (``main`` prints it, exit status 2).
    """
    from .exports.models import build_exports

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


def run_end_to_end(args) -> int:
    """bench end-to-end MODEL|FOLDER...: whole models in fresh processes (end_to_end).

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0 when every row is bit-identical and was timed, else 1.

    Raises:
        CommandError: a path does not exist or holds no .onnx file (``main`` prints it, exit status 2).
    """
    from .bench import end_to_end

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
        _write_json(args.json, [asdict(r) for r in rows], force=args.force)
    return 0 if all(r.bit_identical and r.processes for r in rows) else 1


def run_lowering_bench(args) -> int:
    """bench lowering [MODEL|FOLDER...]: rewrite then lower, against the original and the builtin kernels
    (bench.lowering). Exit 1 when a lowered model's outputs differ from the original's or a row failed.

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0, or 1 as above.

    Raises:
        CommandError: a path does not exist or holds no .onnx file, or there is nothing to measure
            (``main`` prints it, exit status 2).
    """
    from .bench import end_to_end
    from .bench import lowering as lowering_bench

    missing = [item for item in args.models if not Path(item).exists()]
    if missing:
        raise CommandError(f"lowering {missing[0]}: no such file or folder")
    if args.models and not end_to_end.model_paths(args.models):
        raise CommandError(f"lowering {' '.join(args.models)}: no .onnx file")
    if not args.models and args.no_kernels:
        raise CommandError("lowering: nothing to measure (no model given, and --no-kernels)")
    output = Output(args.verbose)
    if args.on_runtimes:
        return _lowering_on_runtimes(args, output)
    if args.webnn:
        raise CommandError("lowering: --webnn goes with --runtime")
    rows = lowering_bench.run(args.models, with_kernels=not args.no_kernels, repeats=args.repeats or 41,
                              processes=args.processes, progress=lambda text: output.progress(0, None, text))
    output.end_progress()
    print(end_to_end.versions_line())
    print(lowering_bench.format_report(rows))
    if args.json:
        _write_json(args.json, lowering_bench.as_json(rows), force=args.force)
    # failed: unreadable, or the passes crashed (nothing counted); or lowered but not bit-identical or not timed.
    # A GatherMultiaxis left by the lowering is a finding the report shows, not a failure of the bench.
    failed = [row for row in rows if not row.op_counts or (
        row.all_lowered and not (row.bit_identical and row.bit_identical_unoptimized and row.processes))]
    return 1 if failed else 0


def _lowering_on_runtimes(args, output: "Output") -> int:
    """bench lowering --runtime R...: the form against the original on each runtime (exit 1 if outputs differ)."""
    from .bench import end_to_end
    from .bench import lowering as lowering_bench
    from .conformance.runtimes import RuntimeUnavailable, check_available

    for name in dict.fromkeys(args.on_runtimes):
        try:
            check_available(name)
        except RuntimeUnavailable as error:
            raise CommandError(f"--runtime {name}: {error}") from None
    rows = lowering_bench.run_on_runtimes(args.models, list(dict.fromkeys(args.on_runtimes)), webnn=args.webnn,
                                          with_kernels=not args.no_kernels, repeats=args.repeats or 41,
                                          processes=args.processes,
                                          progress=lambda text: output.progress(0, None, text))
    output.end_progress()
    print(end_to_end.versions_line())
    print(lowering_bench.format_runtime_report(rows))
    if args.json:
        _write_json(args.json, {"machine": end_to_end.versions_line(), "rows": [asdict(row) for row in rows],
                                "summary": lowering_bench.runtime_summary(rows)}, force=args.force)
    return 1 if any(row.same_outputs is False for row in rows) else 0


def run_runtime_bench(args) -> int:
    """bench runtime: the models a user meets, through both entry points (bench.runtime).

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0.
    """
    from .bench import runtime as runtime_bench
    output = Output(args.verbose)
    results = runtime_bench.run_runtime_bench(args.repeats or 41, progress=lambda name: output.progress(0, None, name))
    output.end_progress()
    print(runtime_bench.format_runtime_report(results))
    print("per call, Python side of a tiny gather (median us): " + ", ".join(
        f"{name} {value:.2f}" for name, value in runtime_bench.per_call_breakdown().items()))
    memory = [] if args.quick else [(external, runtime_bench.rss_over_bound_table(external=external))
                                    for external in (False, True)]
    for external, rss in memory:
        print(runtime_bench.format_rss(rss, external))
    if args.json:
        _write_json(args.json, {"workloads": [asdict(r) for r in results],
                                "rss": [dict(rss, external=external) for external, rss in memory]}, force=args.force)
    return 0


def run_policies(args) -> int:
    """policies MODEL: the out-of-range indices each gather gets, and each runtime policy's outputs
    (policies.policy_report). Exit 0; 1 when no index was out of range or negative (nothing to compare).

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0 or 1.

    Raises:
        CommandError: bad inputs, inputs that cannot be generated, or inputs the report refuses
            (``main`` prints it, exit status 2).
    """
    from .conformance import policies

    shapes = _input_shapes(args)
    _not_over("--json", args.json, _model_files(Path(args.model), "the model", with_data=_exists(args.json))
              | _inputs_read(args.load_inputs))
    _writable(args.json, args.force)
    model, data_folder = _read(args.model)
    try:
        if args.load_inputs:
            loaded = load_inputs(args.load_inputs)
            if not loaded:
                raise CommandError(f"--load-inputs {args.load_inputs}: no data set")
            feeds = loaded[0].feeds
        else:
            feeds = policies.policy_inputs(model, args.seed, args.out_of_range, shapes, data_folder)
            if args.out_of_range:  # which inputs were pushed, and to what
                pushed = policies.out_of_range_bounds(model, feeds)
                print("--out-of-range pushed: " + ("; ".join(
                    f"{name} (axis of {bound}: {bound + 2} and {-bound - 3})" for name, bound in pushed.items())
                    or "no input (none reaches a gather's indices)"))
    except (BadInput, policies.CannotGenerate) as error:
        raise CommandError(str(error)) from None
    try:
        report = policies.policy_report(model, feeds, data_folder)
    except policies.RefusedInputs as error:
        raise CommandError(f"{args.model}: {error}") from None
    print(report.table())
    if args.json:
        _write_json(args.json, asdict(report), force=args.force)
    return 0 if any(g.above or g.below or g.negative_in_range for g in report.gathers) else 1


_LEGACY_BENCH = {"big_model": "big-model [GB]", "big_graph": "big-graph [GATHERS]", "runtime": "runtime",
                 "end_to_end": "end-to-end MODEL|FOLDER...", "build_exports": "build-exports DIR"}


def _bench_reads(args) -> dict[Path, str]:
    """The files bench end-to-end and lowering read (models, their data and ``MODEL.inputs.npz``) that an
    existing --json path might name."""
    items = [*(getattr(args, "models", None) or ()), *(getattr(args, "end_to_end", None) or ())]
    if not items or not _exists(args.json):
        return {}
    from .bench import end_to_end

    files: dict[Path, str] = {}
    for model in end_to_end.model_paths(items):
        files |= _model_files(model, "a model this bench reads", with_data=True)
        for inputs in (model.with_name(model.stem + ".inputs.npz"), model.with_name("inputs.npz")):
            files[inputs] = f"the inputs of {model}"
    return files


def run_bench(args) -> int:
    """bench [JOB]: the jobs' handlers import their modules only when they run.

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status of the job (the kernel bench: 0).

    Raises:
        CommandError: an output would overwrite an input or an existing file, or ``--plot`` lacks matplotlib
            (``main`` prints it, exit status 2).
    """
    if args.job is None:
        used = [flag for flag in _LEGACY_BENCH if getattr(args, flag)]
        if used:
            print(f"note: `bench --{used[0].replace('_', '-')}` is now `bench {_LEGACY_BENCH[used[0]]}`", file=sys.stderr)
    _not_over("--json", args.json, _bench_reads(args))
    if getattr(args, "plot", None) and args.json:
        _not_over("--plot", args.plot, {Path(args.json): "the --json report"})
    _writable(args.json, args.force)
    if args.job == "lowering":
        return run_lowering_bench(args)
    if args.big_model:
        return run_big_model(args)
    if args.big_graph:
        return run_big_graph(args)
    if args.runtime:
        return run_runtime_bench(args)
    if args.end_to_end:
        return run_end_to_end(args)
    if args.build_exports:
        return run_build_exports(args)
    from .bench import kernel as kernel_bench
    if args.plot:
        _writable(args.plot, args.force)
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
        _write_json(args.json, [asdict(r) for r in results], force=args.force)
    if args.plot:
        kernel_bench.plot(results, args.plot)
        print(f"wrote {args.plot}")
    return 0


def run_example(args) -> int:
    """``example OUT``: write the bundled example model to a file.

    Args:
        args: the parsed command line (the ``argparse.Namespace`` of ``build_parser()``).

    Returns:
        The exit status: 0.

    Raises:
        CommandError: the file cannot be written (or exists, without ``--force``)
            (``main`` prints it, exit status 2).
    """
    try:
        write_bytes_atomic(Path(args.output), EXAMPLE_PATH.read_bytes(), overwrite=args.force)
    except ModelFileError as error:
        raise CommandError(str(error)) from None
    if args.verbose >= 0:
        print(f"wrote the bundled example model to {args.output}")
    return 0


# -- the parser ----------------------------------------------------------------------------------

def _bench_options(parser: argparse.ArgumentParser, default, quick: bool = False, reference: bool = False,
                   legacy: bool = False) -> None:
    """The options bench jobs share. On a job's parser their default is argparse.SUPPRESS, so that the
    same option given before the job name (``bench --repeats 9 runtime``) is kept."""
    keep = {} if default is None else {"default": default}
    parser.add_argument("--repeats", type=_positive_int, help="timed runs per measurement", **({"default": None} | keep))
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON", **({"default": None} | keep))
    parser.add_argument("--force", action="store_true", help="overwrite existing JSON or plot files", **keep)
    if quick or legacy:
        parser.add_argument("--quick", action="store_true", help="small workloads; runtime: no memory rows", **keep)
    if reference or legacy:
        parser.add_argument("--reference-cap", type=_positive_float, metavar="SECONDS",
                            help="time cap for the onnx reference evaluator (default 30 s)",
                            **({"default": 30.0} | keep))
        parser.add_argument("--plot", metavar="FILE.png", help="draw the ratios as a bar chart (needs matplotlib)",
                            **({"default": None} | keep))
    if legacy:  # the spellings before the jobs: still accepted, with a note of the new one
        hidden = argparse.SUPPRESS
        parser.add_argument("--runtime", action="store_true", help=hidden)
        parser.add_argument("--end-to-end", nargs="+", metavar="MODEL|FOLDER", help=hidden)
        parser.add_argument("--processes", type=_positive_int, default=2, help=hidden)
        parser.add_argument("--build-exports", metavar="DIR", help=hidden)
        parser.add_argument("--big-model", type=_positive_float, nargs="?", const=2.2, default=None, help=hidden)
        parser.add_argument("--big-graph", type=_positive_int, nargs="?", const=50_000, default=None, help=hidden)
        parser.add_argument("--big-model-folder", metavar="DIR", help=hidden)
        parser.add_argument("--ort-optimize", action="store_true", help=hidden)


def build_parser() -> argparse.ArgumentParser:
    """The ``gathermultiaxis`` command line: its options and one subcommand per job, each with its ``run``
    handler.

    Returns:
        The ``argparse.ArgumentParser``.
    """
    common = OneLineParser(add_help=False)
    loudness = common.add_mutually_exclusive_group()
    loudness.add_argument("-q", "--quiet", dest="verbose", action="store_const", const=-1, default=0,
                          help="print less (check: only failures and the summary; no progress)")
    loudness.add_argument("-v", "--verbose", dest="verbose", action="count", help="print more")

    model_file = OneLineParser(add_help=False)  # rewrite and lower: one model file in, one out
    model_file.add_argument("model", help="the ONNX model")
    model_file.add_argument("-o", "--output", help="where to write the result")
    model_file.add_argument("--in-place", action="store_true", help="replace the input file")
    model_file.add_argument("--force", action="store_true", help="overwrite existing output files")
    model_file.add_argument("--json", metavar="FILE", help="also write the report as JSON")

    parser = OneLineParser(
        prog="gathermultiaxis", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="One gather operator for ONNX Runtime: rewrite models to GatherMultiaxis and check them.",
        epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--version", action="version", version=f"gathermultiaxis {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    rewrite = commands.add_parser(
        "rewrite", parents=[common, model_file], help="replace Gather, GatherElements and GatherND nodes by GatherMultiaxis",
        description="Rewrite every Gather, GatherElements and GatherND node of a model (subgraphs and "
                    "model-local functions included) as GatherMultiaxis plus rank-alignment nodes.")
    rewrite.add_argument("--ops", type=_op_list, default=None, metavar="OPS",
                         help="comma-separated op types to rewrite (default: Gather,GatherElements,GatherND; "
                              "GatherBlockQuantized (com.microsoft) only when listed)")
    rewrite.add_argument("--static-ranks-only", action="store_true",
                         help="leave a gather whose rank only the run time knows as it is, instead of aligning it "
                              "at run time (for models to be lowered: `lower` needs static axes)")
    rewrite.add_argument("--ort-optimize", action="store_true",
                         help="run ONNX Runtime's offline optimizer (CPU, extended level) first, so the rewrite is "
                              "bit-identical to the original under ORT's default session options too")
    rewrite.set_defaults(run=run_rewrite)

    lower = commands.add_parser(
        "lower", parents=[common, model_file], help="replace GatherMultiaxis nodes by standard ONNX ops (any ONNX runtime)",
        description="Lower every GatherMultiaxis node (subgraphs and model-local functions included) to standard "
                    "ONNX ops in the model's own opset (11 or later; mode 'error' from 7). Exit status 1 when a "
                    "node is left (the model is written, the report says why).")
    lower.add_argument("--target", choices=("onnx", "webnn"), default="onnx",
                       help="onnx: standard ONNX ops (default); webnn: ops that map one-to-one onto WebNN, for "
                            "static input shapes (the model's own, or --input-shapes)")
    lower.add_argument("--input-shapes", nargs="+", metavar="NAME:[DIMS]", help="--target webnn: fix input shapes")
    lower.set_defaults(run=run_lower)

    webnn = commands.add_parser(
        "webnn-check", parents=[common], help="list every node ORT's WebNN execution provider would not take, and why")
    webnn.add_argument("model", help="the ONNX model (typically after rewrite and lower --target webnn)")
    webnn.add_argument("--input-shapes", nargs="+", metavar="NAME:[DIMS]", help="fix input shapes (WebNN's are static)")
    webnn.add_argument("--json", metavar="FILE", help="also write the findings as JSON")
    webnn.add_argument("--force", action="store_true", help="overwrite an existing JSON report")
    webnn.set_defaults(run=run_webnn_check)

    checker = commands.add_parser(
        "check", parents=[common], help="compare rewritten models with ORT's builtin gathers",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Rewrite each model, run the original (plain ORT) and the rewrite (GatherMultiaxis) on the "
                    "same inputs and compare them bit for bit, each model in a child process with a timeout. "
                    "With no PATH: ONNX's own node tests that hold a gather, plus the bundled example.",
        epilog="verdicts: passed, failed, not compared (every data set raised on both sides, or none could be "
               "made), not runnable (ORT cannot run the original), builtin wrong (ONNX's reference evaluator "
               "sides with the rewrite), no gather (nothing was rewritten, so nothing to compare).\n" + __doc__.split("\n\n", 2)[2])
    checker.add_argument("paths", nargs="*", metavar="PATH",
                         help="an .onnx file, a backend-test folder (model.onnx + test_data_set_*), or a folder of them")
    checker.add_argument("--fuzz", type=_positive_int, default=0, metavar="N",
                         help="check N random single-node models instead (no PATH)")
    checker.add_argument("--mutate", type=_positive_int, default=0, metavar="N",
                         help="check N rewritten models edited after the rewrite instead (fuzz models, the bundled "
                              "example and each PATH model; ops inserted, records copied, attributes changed, "
                              "Range indices, unknown types): the default session, the kernel path and the "
                              "lowered model must agree bit for bit")
    checker.add_argument("--seed", type=_seed, default=0, help="seed of generated inputs and of --fuzz and --mutate cases")
    checker.add_argument("--save-dir", metavar="DIR",
                         help="where --fuzz and --mutate save reproducers of failures (default: a temp dir)")
    checker.add_argument("--input-shapes", nargs="+", metavar="NAME:[DIMS]",
                         help="shapes of generated inputs, e.g. input_ids:[1,128] (symbolic dims otherwise take "
                              "3, then 1, 8, 64, 512, 4096 while the original model refuses them)")
    checker.add_argument("--load-inputs", metavar="FILE.npz|FOLDER",
                         help="inputs to use for models without test data (or, found in a folder, without an "
                              "inputs file of their own: NAME.inputs.npz or inputs.npz beside them): an .npz of "
                              "arrays named after the inputs, or a folder of .npz files or test_data_set_* folders")
    checker.add_argument("--timeout", type=_positive_float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                         help=f"per model (default {DEFAULT_TIMEOUT_S:g} s); a model that takes longer is "
                              "'failed' (or 'not runnable' when the original hung)")
    modes = checker.add_mutually_exclusive_group()
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
    checker.add_argument("--runtime", choices=RUNTIME_NAMES, default=None,
                         help="with --lowered or --webnn: run the original and the form both on this runtime as "
                              "its users do (ort: default optimizations; openvino, tract and web are extras, "
                              "see docs/conformance.md); without it, both run on ORT with optimizations off")
    checker.add_argument("--fail-fast", action="store_true", help="stop at the first failed case")
    checker.add_argument("--allow", action="append",
                         choices=["not compared", "not runnable", "no gather", "nondeterministic"], metavar="VERDICT",
                         help="do not fail the run (exit 3, or 4) for this verdict: 'not compared', 'not runnable', "
                              "'nondeterministic' or 'no gather' "
                              "(repeatable; with no PATH, 'not runnable' is allowed)")
    checker.add_argument("--json", metavar="FILE",
                         help="also write the report as JSON: one line per case as it finishes (JSON Lines), "
                              "replaced by one JSON document when the run ends (also on Ctrl-C or SIGTERM)")
    checker.add_argument("--force", action="store_true", help="overwrite an existing JSON report")
    checker.add_argument("--jobs", "-j", type=_positive_int, default=_default_jobs(), metavar="N",
                         help="cases checked at once, each in its own child process (default: the number of "
                              "CPUs; 1: one after another)")
    checker.add_argument("--cluster", metavar="ADDRESS",
                         help="send the cases to a running Dask cluster (tcp://HOST:8786; 'local': start one of "
                              "--jobs worker processes for this run); needs pip install \"gathermultiaxis[cluster]\"")
    checker.add_argument("--cluster-timeout", type=_positive_float, metavar="SECONDS",
                         help=f"how long the --cluster scheduler may take to answer (default "
                              f"{DEFAULT_CONNECT_TIMEOUT_S:g} s); an address where none answers in time "
                              f"is bad input (exit 2), before the run")
    checker.add_argument("--resume", metavar="REPORT",
                         help="skip the cases a --json report of the same run already holds (a finished, "
                              "interrupted or killed run) and write the whole report to it (or to --json)")
    checker.set_defaults(run=run_check, argv=None)

    bench_command = commands.add_parser(
        "bench", parents=[common],
        help="benchmarks: kernel, runtime, end-to-end, lowering, big-graph, big-model, build-exports",
        description="Benchmarks, one job each (default: kernel). Medians, spreads and ratios of interleaved "
                    "runs; no absolute targets (the machine is shared).")
    _bench_options(bench_command, None, legacy=True)
    jobs = bench_command.add_subparsers(dest="job", metavar="JOB")
    suppressed = argparse.SUPPRESS  # a job's own options never overwrite what was given before the job
    kernel = jobs.add_parser("kernel", help="the kernel against NumPy, ORT builtin, the bridge floor and the "
                                            "ONNX reference, on full-size workloads (the default job)")
    _bench_options(kernel, suppressed, quick=True, reference=True)
    runtime = jobs.add_parser("runtime", help="the models a user meets (GPT-2 embeddings, int8 + DequantizeLinear, "
                                              "detection post-processing) through InferenceSession and "
                                              "session_options() against builtin; the call-path breakdown; the "
                                              "memory of a session over a bound 150 MB table (--quick skips it)")
    _bench_options(runtime, suppressed, quick=True)
    runtime.set_defaults(runtime=True)
    end_to_end = jobs.add_parser("end-to-end", help="whole models (a folder: its *.onnx files): the original on "
                                                    "ORT, the `rewrite --ort-optimize` model in InferenceSession "
                                                    "and its lowering on ORT, one fresh process per column and "
                                                    "round (exit 1 if the rewritten model's output differs)")
    end_to_end.add_argument("end_to_end", nargs="+", metavar="MODEL|FOLDER")
    _bench_options(end_to_end, suppressed)
    end_to_end.add_argument("--processes", type=_positive_int, default=suppressed,
                            help="rounds of fresh processes (default 2; each model's worse round counts)")
    end_to_end.add_argument("--load", type=_non_negative_int, default=0, metavar="N",
                            help="run N busy-loop processes, pinned one per core, during the measurement "
                                 "(N = the number of cores: another process busy on every core)")
    lowering = jobs.add_parser("lowering", help="`rewrite` then `lower` on whole models (a folder: its *.onnx files) "
                                                "and on gather kernels: lowered / original time on plain ORT "
                                                "(each model and column in fresh processes), node and op counts, "
                                                "bit-exactness, beside issue 27's goals (exit 1 if outputs differ)")
    lowering.add_argument("models", nargs="*", metavar="MODEL|FOLDER")
    _bench_options(lowering, suppressed)
    lowering.add_argument("--processes", type=_positive_int, default=suppressed,
                          help="rounds of fresh processes (default 2)")
    lowering.add_argument("--no-kernels", action="store_true", help="only the models given, not the kernels")
    lowering.add_argument("--runtime", action="append", choices=RUNTIME_NAMES, metavar="RUNTIME", dest="on_runtimes",
                          help=f"time the lowered form against the original on this runtime instead (one of "
                               f"{', '.join(RUNTIME_NAMES)}; repeatable), both forms in each fresh process, alternating")
    lowering.add_argument("--webnn", action="store_true", help="with --runtime: the `lower --target webnn` form")
    build = jobs.add_parser("build-exports", help="write the real exports end-to-end is meant for into DIR "
                                                  "(transformers models with random weights, a hummingbird-ml "
                                                  "tree ensemble; needs torch and transformers)")
    build.add_argument("build_exports", metavar="DIR")
    big_graph = jobs.add_parser("big-graph", help="seconds and peak memory of `rewrite` on a chain of GATHERS x "
                                                  "(Gather + Add) nodes (default 50000: 100k nodes) against "
                                                  "onnx.load + infer_shapes of it, in fresh processes")
    big_graph.add_argument("big_graph", type=_positive_int, nargs="?", default=50_000, metavar="GATHERS")
    _bench_options(big_graph, suppressed)
    big_model = jobs.add_parser("big-model", help="peak memory of `rewrite` on a model with a GB-sized external "
                                                  "table (default 2.2 GB, a sparse file)")
    big_model.add_argument("big_model", type=_positive_float, nargs="?", default=2.2, metavar="GB")
    _bench_options(big_model, suppressed)
    big_model.add_argument("--folder", dest="big_model_folder", default=suppressed, metavar="DIR",
                           help="where it builds its model")
    big_model.add_argument("--ort-optimize", action="store_true", default=suppressed, help="rewrite with --ort-optimize")
    bench_command.set_defaults(run=run_bench)

    policies = commands.add_parser(
        "policies", parents=[common], help="out-of-range indices of a model's gathers, and what each runtime's "
                                           "policy (error, zero, clamp) makes of the outputs")
    policies.add_argument("model", help="the ONNX model (original, not rewritten)")
    policies.add_argument("--load-inputs", metavar="FILE.npz|FOLDER", help="inputs (the first data set); "
                                                                            "default: generated")
    policies.add_argument("--input-shapes", nargs="+", metavar="NAME:[DIMS]", help="shapes of generated inputs")
    policies.add_argument("--out-of-range", action="store_true",
                          help="push each generated index input past its bounds (first value above, last below)")
    policies.add_argument("--seed", type=_seed, default=0, help="seed of the generated inputs")
    policies.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    policies.add_argument("--force", action="store_true", help="overwrite an existing JSON report")
    policies.set_defaults(run=run_policies)

    example = commands.add_parser("example", parents=[common], help="write the bundled example model to a file")
    example.add_argument("output", help="where to write it")
    example.add_argument("--force", action="store_true", help="overwrite an existing file")
    example.set_defaults(run=run_example)
    return parser


_LOG_LEVELS = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}  # -q, default, -v; -vv and more: DEBUG


class _StderrHandler(logging.StreamHandler):
    """A handler writing to ``sys.stderr`` as it is at each record (tests and callers may replace it)."""

    @property  # StreamHandler keeps a fixed stream; this one follows sys.stderr
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


_LOG_HANDLER = _StderrHandler()  # added to the package's logger by the command line only
_LOG_HANDLER.setFormatter(logging.Formatter("gathermultiaxis: %(name)s: %(message)s"))


def show_library_log(verbose: int) -> None:
    """Show the library's log records on stderr at the level ``-q``/``-v`` choose.

    Args:
        verbose: -1 for ``-q``, 0 by default, the count of ``-v`` otherwise.

    Returns:
        None.
    """
    package_log = logging.getLogger("gathermultiaxis")
    package_log.setLevel(_LOG_LEVELS.get(verbose, logging.DEBUG))
    if _LOG_HANDLER not in package_log.handlers:
        package_log.addHandler(_LOG_HANDLER)


def main(argv: list[str] | None = None) -> int:
    """The ``gathermultiaxis`` command: parse ``argv``, run the chosen subcommand.

    Args:
        argv: the arguments after the program name, or None for ``sys.argv[1:]``.

    Returns:
        The exit status: the subcommand's, 0 when no subcommand is given (the help is printed), 2 on a
        ``CommandError``, 130 on Ctrl-C.

    Raises:
        SystemExit: bad arguments (status 2), or ``--help`` (status 0), from argparse.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    import_library()
    if argv is not None and "argv" in args:
        args.argv = ["gathermultiaxis", *argv]
    show_library_log(getattr(args, "verbose", 0))
    try:
        return args.run(args)
    except CommandError as error:
        print(printable(f"gathermultiaxis {args.command}: {error}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gathermultiaxis {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
