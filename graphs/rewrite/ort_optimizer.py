"""ORT's offline optimizer as a pre-pass of the rewrite (``rewrite --ort-optimize``)."""

# Under ORT's default session options, ORT constant-folds and fuses through builtin gathers but not through a
# custom op, so a rewritten model can differ from the original in the last bit. Running ORT's own optimizer on
# the original first (CPU execution provider, ORT_ENABLE_EXTENDED: the level that does not change layouts for
# one machine) applies those folds and fusions once, to both sides; the rewrite of the optimized model is then
# bit-identical to the original under default options. The optimized model holds CPU-only fused ops
# (com.microsoft) and runs on the CPU execution provider. ORT's optimizer is not always right:
# ``DISABLED_OPTIMIZERS`` are left out of the pre-pass so that it never bakes a wrong answer into the model.

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Iterator

import onnx
from onnx import ModelProto

from ..modelfile import ModelFileError, SessionOptionsFactory, external_tensors, staging_folder

# ORT 1.31's GatherToSliceFusion turns Gather(x, Range(T-1, -1, -1)) (a reversal) into a Slice that
# selects nothing.
DISABLED_OPTIMIZERS = ("GatherToSliceFusion",)

_OPTIMIZED_NAME = "ort_optimized.onnx"


class OrtOptimizeError(ValueError):
    """ONNX Runtime cannot load or optimize the model; the message holds ORT's reason."""

_EXTERNAL_FROM_BYTES = 1024


def ort_optimize(model: ModelProto, external_data_folder: str | Path | None = None,
                 workdir: str | Path | None = None, *, session_options: SessionOptionsFactory) -> ModelProto:
    """ORT's offline optimization of ``model`` (CPU EP, ORT_ENABLE_EXTENDED, ``DISABLED_OPTIMIZERS`` off), on
    options ``session_options`` (``gathermultiaxis.session_options``) registers the GatherMultiaxis library on.
    External data is read relative to ``external_data_folder`` (by default the working folder). The result holds
    all its data in memory, except for a model with external data and a ``workdir``: then its tensors of over
    1 KiB stay in ``workdir/ort_optimized.onnx.data`` (``workdir`` must outlive the result's use). Raises
    OrtOptimizeError with ORT's reason when ORT cannot load or optimize the model."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="gathermultiaxis-ort-") as scratch:
        folder = Path(workdir) if workdir is not None else Path(scratch)
        target = folder / _OPTIMIZED_NAME
        options = session_options(None)  # new options (see modelfile.SessionOptionsFactory)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(target)
        options.log_severity_level = 3
        external = bool(external_tensors(model))
        if external:
            options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                             str(Path(external_data_folder or Path.cwd()).resolve()))
        keep_external = external and workdir is not None
        if external:
            # ORT writes the weights beside the optimized model. (Without a file of its own, ORT keeps each
            # external initializer it left unchanged pointing at the original's location, relative to a
            # folder that no longer holds it: the optimized model's data was then looked for in ``folder``.)
            options.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                             _OPTIMIZED_NAME + ".data")
            options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                             str(_EXTERNAL_FROM_BYTES))
        try:
            ort.InferenceSession(model.SerializeToString(), options,
                                 providers=["CPUExecutionProvider"], disabled_optimizers=list(DISABLED_OPTIMIZERS))
        except Exception as error:  # noqa: BLE001 - ORT raises its own exception types
            from ..modelfile import one_line

            raise OrtOptimizeError(f"ONNX Runtime cannot optimize the model ({one_line(error)})") from None
        return onnx.load_model(str(target), load_external_data=not keep_external)


@contextlib.contextmanager
def ort_optimized(model: ModelProto, external_data_folder: Path | None, output: Path, *,
                  session_options: SessionOptionsFactory) -> Iterator[tuple[ModelProto, Path]]:
    """``ort_optimize`` for the command line: yields the optimized model and its external data's folder, a
    temporary folder beside ``output`` (same file system) removed on exit; ORT's refusal becomes a ModelFileError."""
    output = Path(output)
    with staging_folder(output, output.parent if str(output.parent) else Path(".")) as workdir:
        try:
            optimized = ort_optimize(model, external_data_folder, workdir, session_options=session_options)
        except OrtOptimizeError as error:
            raise ModelFileError(f"{output}: {error}") from None
        yield optimized, workdir


__all__ = ["DISABLED_OPTIMIZERS", "OrtOptimizeError", "ort_optimize", "ort_optimized"]
