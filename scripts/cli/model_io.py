"""Reading a model the command line names, and the read-transform-write of ``rewrite`` and ``lower``."""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .command_base import CommandError, printable
from .option_groups import ModelFileOptions, exists, model_files, not_over, write_json, writable


def read_model_file(path: str | Path, inline_small: bool = True) -> tuple[Any, Path | None]:
    """``graphs.modelfile.read_model``, a file it cannot use being bad input (exit 2): the model, and the
    folder of its external data (None without)."""
    from ..graphs.modelfile import ModelFileError, read_model

    try:
        return read_model(path, inline_small)
    except ModelFileError as error:
        raise CommandError(str(error)) from None


def loads_in_ort(path: Path, part: Any = None) -> None:
    """``graphs.modelfile.loads_in_ort`` with ``session_options``: the written model's load check."""
    from ..graphs import modelfile
    from ..harness import session_options

    modelfile.loads_in_ort(path, part, session_options=session_options)


def load_check(loaded: Any, transformed: Any, result: Any, types: Any) -> Callable[..., None] | None:
    """How the written model is proven to load in ORT, which loaded ``loaded``: not at all when it is
    ``loaded`` (written by onnx, its external data copied byte for byte), by loading only the part the
    transform changed when that part is all that differs (graphs.load_check), else by loading all of it.
    ``transformed`` is what the transform was given: ``loaded``, or ORT's optimized model of it, which
    no load proved. ``types``: the pass's types of ``loaded``'s main graph, if it reports them."""
    if result == loaded:
        return None
    from ..graphs.load_check import changed_part

    part = changed_part(loaded, result, types) if transformed is loaded else None
    return loads_in_ort if part is None else functools.partial(loads_in_ort, part=part)


def refuse_clobbering(args: argparse.Namespace, source: Path, target: Path) -> list[Path]:
    """Refused before any work: a --json report naming the input, the output or either's data file; an
    output (or its data file) that is the input's data file (without --in-place: the input would read
    the new data); an existing output or data file without --force, where --in-place may replace only
    the input and the data files it refers to (not another model's ``IN.onnx.data``). Returns the files
    the command may replace."""
    from ..graphs.modelfile import same_file

    target_data = target.parent / (target.name + ".data")
    # the input's data files, read only when one of the names it could take is already there
    source_files = model_files(source, "the input model", with_data=any(map(exists, (target, target_data, args.json))))
    source_data = [path for path in source_files if path != source]
    written = {target_data: "the output's external data file"} | (
        {} if args.in_place else {target: "the output model"})
    not_over("--json", args.json, source_files | written)
    for path in () if args.in_place else (target, target_data):
        if any(same_file(path, data) for data in source_data):
            raise CommandError(f"{path}: is external data of the input model ({source}), which would then read "
                               f"the output's data; choose another output name")
    if args.in_place and exists(target_data) and not args.force and not any(
            same_file(target_data, data) for data in source_data):
        raise CommandError(f"{target_data}: already exists, and {source} does not refer to it (another model's "
                           f"data?); pass --force to overwrite it")
    writable(args.json, args.force)
    return [source, *source_data] if args.in_place else []


def transform_file(args: argparse.Namespace, transform: Callable[[Any, Path | None], Any],
                   loaded_by: Callable[[Any], bool] | None = None) -> Any:
    """Load ``args.model``, apply ``transform(model, external_data_folder) -> (model, report)`` (after ORT's
    optimizer with --ort-optimize), save the result where -o / --in-place says, print and return the report.
    ``loaded_by``: the transform's own ORT session of the input, which proves it loads (``load_model``'s)."""
    source, target = ModelFileOptions.source_and_target(args)
    replaceable = refuse_clobbering(args, source, target)
    with without_cycle_collection():
        report = _transform_and_save(args, transform, loaded_by, source, target, replaceable)
    if args.verbose >= 0:
        print(report.table())
    print(printable(f"wrote {target}"))
    if args.json:
        write_json(args.json, report.as_dict(), force=args.force)
    return report


@contextlib.contextmanager
def without_cycle_collection():
    """Python's cycle collector off: a big model's pass makes millions of objects and few cycles, and each
    full collection would walk them all again (5-10% of a 20k-node rewrite)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _transform_and_save(args: argparse.Namespace, transform: Callable[[Any, Path | None], Any],
                        loaded_by: Callable[[Any], bool] | None, source: Path, target: Path,
                        replaceable: list[Path]) -> Any:
    from ..graphs.modelfile import ModelFileError, check_target, load_model, same_file, save_model
    from ..graphs.rewrite.ort_optimizer import ort_optimized
    from ..harness import session_options

    try:
        # ORT loads it (or the command stops here)
        loaded, data_folder = load_model(source, session_options=session_options, loaded_by=loaded_by)
        external = data_folder is not None
        for path in [target] + ([target.parent / (target.name + ".data")] if external else []):
            check_target(path, overwrite=args.force or any(same_file(path, other) for other in replaceable))
        with (ort_optimized(loaded, data_folder, target, session_options=session_options)
              if getattr(args, "ort_optimize", False)
              else contextlib.nullcontext((loaded, data_folder))) as (model, data_folder):
            result, report = transform(model, data_folder)
            validate = load_check(loaded, model, result, report.main_graph_types or None)
            del loaded, model
            save_model(result, target, external_data=external, external_data_folder=data_folder,
                       overwrite=args.force, replaceable=replaceable, validate=validate)
    except ModelFileError as error:
        raise CommandError(str(error)) from None
    return report
