"""Loading and saving models safely: clear errors, no partial files, external data kept beside the model."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import onnx
from onnx import ModelProto

# Models whose serialized size reaches protobuf's 2 GiB limit must keep their weights outside.
_PROTOBUF_LIMIT = (1 << 31) - (1 << 20)


class ModelFileError(Exception):
    """A model file cannot be read or is not a valid ONNX model, or an output file cannot be written."""


def _uses_external_data(model: ModelProto) -> bool:
    return any(init.data_location == onnx.TensorProto.EXTERNAL for init in model.graph.initializer)


def load_model(path: str | os.PathLike) -> tuple[ModelProto, bool]:
    """Load and check a model; returns it (external data loaded) and whether it had external data."""
    path = Path(path)
    if path.is_dir():
        raise ModelFileError(f"{path}: is a folder, not a model file")
    if not path.is_file():
        raise ModelFileError(f"{path}: no such file")
    try:
        header = onnx.load_model(str(path), load_external_data=False)
    except Exception as error:  # noqa: BLE001 - protobuf raises several types for garbage
        raise ModelFileError(f"{path}: not a readable ONNX model ({one_line(error)})") from None
    if not header.graph.node and not header.graph.output:
        raise ModelFileError(f"{path}: not an ONNX model (it has no graph)")
    external = _uses_external_data(header)
    base = path.parent.resolve()
    for init in header.graph.initializer:
        for entry in init.external_data:
            if entry.key == "location":
                target = (base / entry.value).resolve()
                if base not in target.parents:
                    raise ModelFileError(f"{path}: external data of {init.name!r} points outside the model's "
                                         f"folder ({entry.value!r})")
                if not target.is_file():
                    raise ModelFileError(f"{path}: external data file {entry.value!r} of {init.name!r} is missing")
    try:
        onnx.checker.check_model(str(path))
        model = onnx.load_model(str(path), load_external_data=True) if external else header
    except Exception as error:  # noqa: BLE001
        raise ModelFileError(f"{path}: invalid ONNX model ({one_line(error)})") from None
    return model, external


def one_line(error: BaseException, limit: int = 500) -> str:
    """An exception's message on one line (checker messages span several), or its type name."""
    text = " ".join(str(error).split())
    text = text or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _output_folder(path: Path, targets: list[Path], overwrite: bool) -> Path:
    """The folder ``path`` goes into; refuses a missing folder, or existing targets unless ``overwrite``."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ModelFileError(f"{path}: the output folder {str(folder)!r} does not exist")
    for target in targets:
        if target.exists() and not overwrite:
            raise ModelFileError(f"{target}: already exists (pass --force to overwrite it)")
    return folder


@contextlib.contextmanager
def _staging(path: Path, folder: Path) -> Iterator[Path]:
    """A temporary folder next to the target: files are written there and moved into place only when
    complete, so a failure leaves no partial file behind (the folder is always removed)."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=".gathermultiaxis-", dir=folder))
    except OSError as error:
        raise ModelFileError(f"{path}: cannot write to {str(folder)!r} ({error.strerror})") from None
    try:
        yield staging
    except OSError as error:
        raise ModelFileError(f"{path}: cannot write ({error.strerror or error})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def save_model(model: ModelProto, path: str | os.PathLike, *, external_data: bool = False,
               overwrite: bool = False) -> list[Path]:
    """Write ``model`` to ``path`` atomically; returns the files written.

    With ``external_data`` (or when the model is too large for one protobuf) the weights go to
    ``<name>.data`` beside the model.
    """
    path = Path(path)
    data_name = path.name + ".data"
    split = external_data or model.ByteSize() >= _PROTOBUF_LIMIT
    targets = [path] + ([path.parent / data_name] if split else [])
    folder = _output_folder(path, targets, overwrite)
    with _staging(path, folder) as staging:
        staged = staging / path.name
        if split:
            onnx.save_model(model, str(staged), save_as_external_data=True, all_tensors_to_one_file=True,
                            location=data_name, size_threshold=1024)
            os.replace(staging / data_name, folder / data_name)
        else:
            onnx.save_model(model, str(staged))
        os.replace(staged, path)
    return targets


def write_bytes_atomic(path: str | os.PathLike, content: bytes, overwrite: bool = False) -> None:
    """Write ``content`` to ``path`` atomically (reports, the bundled example)."""
    path = Path(path)
    folder = _output_folder(path, [path], overwrite)
    with _staging(path, folder) as staging:
        (staging / path.name).write_bytes(content)
        os.replace(staging / path.name, path)


def check_target(path: str | os.PathLike, overwrite: bool = False) -> None:
    """Raise ModelFileError now, before any work, if ``path`` could not be written later: its folder
    is missing, or it exists and ``overwrite`` is false."""
    _output_folder(Path(path), [Path(path)], overwrite)
