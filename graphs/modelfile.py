"""Loading and saving models safely: clear errors, no partial files, external data kept beside the model.

A model is accepted when ONNX Runtime can load it (a CPU session with graph optimizations off, the
GatherMultiaxis library registered): ORT-internal and com.microsoft ops included, and with ORT's reason
when it cannot. Weights stored as external data stay external: they are never read into memory, only
streamed, chunk by chunk, from the source's data files into ``<output>.data``.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Iterator

import onnx
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, numpy_helper

from .ir.walk import subgraphs

if TYPE_CHECKING:
    import onnxruntime

# What ORT loads a model with: called with None, returns new ``onnxruntime.SessionOptions`` with the
# GatherMultiaxis op library registered (``gathermultiaxis.session_options``). The caller (the session, the
# command line) passes it: the passes use the op's definition, not its ORT runtime. The passes call it with
# None and set what they need on the result: options passed in are refused in a process that registered
# onnxruntime-extensions' library before the op types were defined (ops.runtime.registration.EARLY_REGISTRATION).
SessionOptionsFactory = Callable[["onnxruntime.SessionOptions | None"], "onnxruntime.SessionOptions"]

# Models whose serialized size reaches protobuf's 2 GiB limit must keep their weights outside.
PROTOBUF_LIMIT = (1 << 31) - (1 << 20)
# External tensors up to this size are read into the model at load (shape inference reads small constants
# such as Reshape targets); larger ones stay in their files.
_INLINE_UP_TO_BYTES = 1 << 16
# Inline tensors over this size go to the data file when a model must be split (onnx's own default).
_EXTERNAL_FROM_BYTES = 1024
# Offsets in a written data file are multiples of this, so ORT can memory-map every tensor.
DATA_ALIGNMENT = mmap.ALLOCATIONGRANULARITY
_CHUNK = 1 << 22


class ModelFileError(Exception):
    """A model file cannot be read or is not a valid ONNX model, or an output file cannot be written."""


# -- tensors anywhere in a model -----------------------------------------------------------------

def _graph_tensors(graph: GraphProto) -> Iterator[TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    yield from _node_tensors(graph.node)


def _node_tensors(nodes) -> Iterator[TensorProto]:
    for node in nodes:
        for attribute in node.attribute:
            if attribute.type == AttributeProto.TENSOR:
                yield attribute.t
            elif attribute.type == AttributeProto.TENSORS:
                yield from attribute.tensors
            elif attribute.type == AttributeProto.SPARSE_TENSOR:
                yield attribute.sparse_tensor.values
                yield attribute.sparse_tensor.indices
            else:
                for graph in subgraphs(attribute):
                    yield from _graph_tensors(graph)


def all_tensors(model: ModelProto) -> Iterator[TensorProto]:
    """Every tensor of ``model``: initializers (sparse ones included) of the main graph and of every
    subgraph, and tensor attributes (Constant values, ...) in graphs and model-local function bodies.
    """
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        yield from _node_tensors(function.node)


def external_tensors(model: ModelProto) -> list[TensorProto]:
    """The tensors of ``model`` whose data lives in an external file."""
    return [t for t in all_tensors(model) if t.data_location == TensorProto.EXTERNAL]


def external_entry(tensor: TensorProto) -> tuple[str, int, int | None]:
    """(location, offset, length or None) of an external tensor."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    length = entries.get("length")
    return entries.get("location", ""), int(entries.get("offset") or 0), int(length) if length else None


# -- loading -------------------------------------------------------------------------------------

def path_kind(path: Path) -> str:
    """What a path is, following links (so that a link to /dev/zero is a device): "file", "folder",
    "missing", or a description such as "a FIFO" (never opened: reading a FIFO or a device hangs).
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing" if not path.is_symlink() else "a dangling link"
    except OSError as error:
        return f"unreadable ({error.strerror})"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def load_model(path: str | os.PathLike, *, session_options: SessionOptionsFactory,
               loaded_by: Callable[[ModelProto], bool] | None = None) -> tuple[ModelProto, Path | None]:
    """Load a model ORT accepts without reading its large external data; the model and the folder its
    external data are relative to (for :func:`save_model`), or ``None``. External tensors up to 64 KiB are
    read in (shape inference needs small constants). Raises ModelFileError with the reason.

    ``loaded_by(model)``: the caller's own ORT session of the model as read (with ``session_options``, the
    model with only outputs and nodes added), True when it loaded: that proves the file loads, and ORT is
    not asked again. Asked only of a model without external data; False: ORT's load of the file decides.
    """
    model, folder = read_model(path, inline_small=False)
    if folder is None and loaded_by is not None and loaded_by(model):
        return model, folder
    ort_refusal = ort_load_error(str(path), session_options=session_options)
    if ort_refusal:
        raise ModelFileError(f"{path}: invalid ONNX model, ONNX Runtime cannot load it ({ort_refusal})")
    if folder is not None:
        _inline_small_external(model, folder)
    return model, folder


def read_model(path: str | os.PathLike, inline_small: bool = True) -> tuple[ModelProto, Path | None]:
    """:func:`load_model` without asking ONNX Runtime (a readable model, not a FIFO, its external data
    inside its folder and long enough); ModelFileError naming the file and the problem."""
    path = Path(path)
    kind = path_kind(path)
    if kind == "folder":
        raise ModelFileError(f"{path}: is a folder, not a model file")
    if kind == "missing":
        raise ModelFileError(f"{path}: no such file")
    if kind != "file":
        raise ModelFileError(f"{path}: {kind}, not a model file")
    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except Exception as error:  # noqa: BLE001 - protobuf raises several types for garbage
        raise ModelFileError(f"{path}: not a readable ONNX model ({one_line(error)})") from None
    if not model.graph.node and not model.graph.output:
        raise ModelFileError(f"{path}: not an ONNX model (it has no graph)")
    folder = path.parent.resolve()
    external = external_tensors(model)
    for tensor in external:
        _check_external_reference(path, folder, tensor)
    if external and inline_small:
        _inline_small_external(model, folder)
    return model, folder if external else None


def external_data_files(path: str | os.PathLike) -> set[Path]:
    """The files (resolved) that hold external data of the model at ``path``: those it must not be
    written over. Empty when it has none, or cannot be read (whatever reads it then says why); a path
    that is not a regular file is never opened (a FIFO would block).
    """
    if path_kind(Path(path)) != "file":
        return set()
    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - protobuf raises several types for garbage
        return set()
    folder = Path(path).parent
    return {Path(os.path.realpath(folder / external_entry(tensor)[0])) for tensor in external_tensors(model)}


def _inline_small_external(model: ModelProto, folder: Path) -> None:
    for tensor in external_tensors(model):
        if _external_size(folder, tensor) <= _INLINE_UP_TO_BYTES:
            onnx.external_data_helper.load_external_data_for_tensor(tensor, str(folder))
            tensor.data_location = TensorProto.DEFAULT
            del tensor.external_data[:]


def _check_external_reference(path: Path, folder: Path, tensor: TensorProto) -> None:
    try:
        check_external_data(tensor, folder)
    except ExternalDataError as error:
        raise ModelFileError(f"{path}: {error}") from None


class ExternalDataError(ModelFileError):
    """A tensor's external-data entry that ONNX Runtime would refuse: malformed, outside the model's
    folder, not a regular file, or disagreeing with the tensor's size or with its file."""


@dataclass(frozen=True)
class ExternalData:
    """Where a tensor's bytes are: ``size`` bytes at ``offset`` of the regular file ``path`` (resolved)."""

    path: Path
    offset: int
    size: int


# The keys ONNX Runtime (1.32) accepts in TensorProto.external_data; it refuses any other.
_EXTERNAL_KEYS = ("location", "offset", "length", "checksum")
_INT64_MAX = (1 << 63) - 1
# Element types packed several to a byte: type -> elements per byte.
_PACKED_TYPES = {getattr(TensorProto, name): per_byte
                 for name, per_byte in (("INT4", 2), ("UINT4", 2), ("FLOAT4E2M1", 2), ("INT2", 4), ("UINT2", 4))
                 if hasattr(TensorProto, name)}


def _stored_size(tensor: TensorProto) -> int | None:
    """Bytes of the tensor's values as ONNX Runtime computes them from dims and type; None when unknown."""
    count = 1
    for dim in tensor.dims:
        count *= dim
    if tensor.data_type in _PACKED_TYPES:
        per_byte = _PACKED_TYPES[tensor.data_type]
        return (count + per_byte - 1) // per_byte
    if tensor.data_type in (TensorProto.STRING, TensorProto.UNDEFINED):
        return None
    try:
        return count * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None


def _external_number(tensor: TensorProto, key: str, text: str, signed: bool) -> int:
    digits = text[1:] if signed and text.startswith("-") else text
    value = int(text) if digits.isascii() and digits.isdigit() else None
    if value is None or not (-_INT64_MAX - 1 <= value <= (_INT64_MAX if signed else (1 << 64) - 1)):
        raise ExternalDataError(f"external data of {tensor.name!r}: {key} {text!r} is not "
                                f"{'an' if signed else 'a non-negative'} integer")
    return value


def check_external_data(tensor: TensorProto, folder: str | os.PathLike) -> ExternalData:
    """Check ``tensor``'s external-data entry as ONNX Runtime 1.32 does when it loads a model from ``folder``
    (a relative location inside it, links followed, to a regular file never opened here; a length matching
    dims and type; the bytes inside the file), and say where its bytes are; else ExternalDataError. Unlike
    ORT, a location holding a NUL is refused."""
    entries: dict[str, str] = {}
    for entry in tensor.external_data:
        if entry.key not in _EXTERNAL_KEYS:
            raise ExternalDataError(f"external data of {tensor.name!r}: unknown key {entry.key!r} "
                                    f"(ONNX Runtime allows {', '.join(_EXTERNAL_KEYS)})")
        if entry.key == "location" and "location" in entries:
            raise ExternalDataError(f"external data of {tensor.name!r}: more than one location")
        entries[entry.key] = entry.value
    location = entries.get("location")
    if location is None:
        raise ExternalDataError(f"external data of {tensor.name!r}: no location")
    if not location or "\x00" in location:
        raise ExternalDataError(f"external data of {tensor.name!r}: "
                                f"{'an empty location' if not location else 'a location holding a NUL character'}")
    offset = _external_number(tensor, "offset", entries.get("offset", "0"), signed=True)
    length = _external_number(tensor, "length", entries.get("length", "0"), signed=False)
    if os.path.isabs(location):
        raise ExternalDataError(f"external data of {tensor.name!r} points outside the model's folder "
                                f"({location!r} is an absolute path; ONNX Runtime allows only paths relative "
                                f"to the model's folder)")
    root = Path(os.path.realpath(folder))
    target = Path(os.path.realpath(root / location))
    if target != root and root not in target.parents:
        raise ExternalDataError(f"external data of {tensor.name!r} points outside the model's folder "
                                f"({location!r} resolves to {str(target)!r}, outside {str(root)!r})")
    kind = path_kind(target)
    if kind in ("missing", "a dangling link") or location.endswith(("/", os.sep)):
        raise ExternalDataError(f"external data file {location!r} of {tensor.name!r} is missing")
    if kind != "file":
        raise ExternalDataError(f"external data file {location!r} of {tensor.name!r} is "
                                f"{'a folder' if kind == 'folder' else kind}, not a regular file")
    size = _stored_size(tensor)
    if length and size is not None and length != size:
        raise ExternalDataError(f"external data of {tensor.name!r}: length {length} disagrees with its dims "
                                f"{list(tensor.dims)}, which need {size} bytes")
    size = size if size is not None else length
    file_size = target.stat().st_size
    if offset < 0 or offset + size > file_size:
        raise ExternalDataError(f"external data of {tensor.name!r} (offset {offset}, length {size}) runs past "
                                f"the end of {location!r} ({file_size} bytes)")
    return ExternalData(target, offset, size)


def _external_size(folder: Path, tensor: TensorProto) -> int:
    location, offset, length = external_entry(tensor)
    return length if length is not None else (folder / location).stat().st_size - offset


def ort_load_error(model: str | bytes, external_data_folder: Path | None = None, *,
                   session_options: SessionOptionsFactory) -> str:
    """ORT's reason, on one line, for refusing to load ``model`` (a path or serialized bytes) in a CPU
    session with graph optimizations off and the GatherMultiaxis library registered (by
    ``session_options``, which the caller passes: ``gathermultiaxis.session_options``); "" when it loads.

    External data is memory-mapped by ORT, not read; ``external_data_folder`` locates it for bytes.
    """
    import onnxruntime as ort

    if isinstance(model, str) and not _is_utf8(model):
        return _ort_load_error_by_folder(Path(model), session_options)
    options = session_options(None)  # new options: see SessionOptionsFactory
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    if external_data_folder is not None:
        options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                         str(external_data_folder))
    try:
        ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - ORT raises its own exception types
        return one_line(error)
    return ""


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a file name that is not UTF-8 (surrogate-escaped bytes)
        return False
    return True


def _ort_load_error_by_folder(path: Path, session_options: SessionOptionsFactory) -> str:
    """ORT takes paths as UTF-8 strings only: a model whose path is not UTF-8 is given as bytes, its
    external data located through an open handle on its folder (/proc/self/fd/N on Linux)."""
    try:
        content = path.read_bytes()
        folder_handle = os.open(path.parent if str(path.parent) else ".", os.O_RDONLY)
    except OSError as error:
        return f"cannot read it ({error.strerror})"
    try:
        handle_path = Path(f"/proc/self/fd/{folder_handle}")
        folder = handle_path if handle_path.is_dir() else path.parent
        return ort_load_error(content, folder, session_options=session_options)
    finally:
        os.close(folder_handle)


def loads_in_ort(path: Path, part: ModelProto | None = None, *, session_options: SessionOptionsFactory) -> None:
    """Raise ModelFileError with ORT's reason when the written model at ``path`` does not load; with
    ``part`` (``load_check.changed_part``), loading that proves it."""
    refusal = ort_load_error(str(path) if part is None else part.SerializeToString(), session_options=session_options)
    if refusal:
        raise ModelFileError(f"{path.name}: the written model does not load in ONNX Runtime ({refusal})")


def one_line(error: BaseException, limit: int = 500) -> str:
    """An exception's message on one line (checker messages span several), or its type name."""
    text = " ".join(str(error).split())
    text = text or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- saving --------------------------------------------------------------------------------------

def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file: the same file when both exist (links and hard links followed),
    else the same resolved path.
    """
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _replaceable(target: Path, overwrite: bool, replaceable: Collection[Path]) -> bool:
    return overwrite or any(same_file(target, path) for path in replaceable)


def _output_folder(path: Path, targets: list[Path], overwrite: bool, replaceable: Collection[Path] = ()) -> Path:
    """The folder ``path`` goes into; refuses a missing folder, a target that is not a regular file (a
    folder, a device: even with ``overwrite``), or existing targets unless ``overwrite`` or listed in
    ``replaceable``."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ModelFileError(f"{path}: the output folder {str(folder)!r} does not exist")
    for target in targets:
        kind = path_kind(target)
        if kind not in ("file", "missing", "a dangling link"):
            raise ModelFileError(f"{target}: is {'a folder' if kind == 'folder' else kind}, not a file; "
                                 f"choose another output name")
        if kind == "file" and not _replaceable(target, overwrite, replaceable):
            raise ModelFileError(f"{target}: already exists (pass --force to overwrite it)")
    return folder


@contextlib.contextmanager
def staging_folder(path: Path, folder: Path) -> Iterator[Path]:
    """A temporary folder next to the target, always removed: files are moved into place only when complete.
    An OSError becomes ModelFileError."""
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


class _DataWriter:
    """Appends tensor payloads to one data file at aligned offsets; runs of zeros become holes, so a
    sparse source stays sparse."""

    def __init__(self, file, name: str):
        self.file, self.name, self.end = file, name, 0
        self._zeros = bytes(_CHUNK)

    def _start(self) -> int:
        offset = -(-self.end // DATA_ALIGNMENT) * DATA_ALIGNMENT
        self.file.seek(offset)
        return offset

    def _write(self, chunk) -> None:
        if chunk == (self._zeros if len(chunk) == _CHUNK else bytes(len(chunk))):
            self.file.seek(len(chunk), os.SEEK_CUR)
        else:
            self.file.write(chunk)

    def _finish(self, tensor: TensorProto, offset: int, length: int) -> None:
        self.end = offset + length
        del tensor.external_data[:]
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.name), ("offset", str(offset)), ("length", str(length))):
            tensor.external_data.add(key=key, value=value)

    def copy(self, tensor: TensorProto, source_folder: Path) -> None:
        location, source_offset, length = external_entry(tensor)
        offset = self._start()
        with open(source_folder / location, "rb") as source:
            source.seek(source_offset)
            remaining = length if length is not None else os.fstat(source.fileno()).st_size - source_offset
            length = remaining
            while remaining:
                chunk = source.read(min(_CHUNK, remaining))
                if not chunk:
                    raise OSError(f"external data of {tensor.name!r} ends early in {location!r}")
                self._write(chunk)
                remaining -= len(chunk)
        self._finish(tensor, offset, length)

    def move_out(self, tensor: TensorProto) -> None:
        payload = tensor.raw_data if tensor.HasField("raw_data") else numpy_helper.from_array(
            numpy_helper.to_array(tensor)).raw_data
        offset = self._start()
        view = memoryview(payload)
        for start in range(0, len(view), _CHUNK):
            self._write(view[start: start + _CHUNK])
        for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
            tensor.ClearField(field)
        self._finish(tensor, offset, len(payload))

    def close(self) -> None:
        self.file.truncate(self.end)  # holes at the end still count in the file's size
        self.file.close()


@contextlib.contextmanager
def _with_data_file(model: ModelProto, data_path: Path, source_folder: Path | None,
                    move_inline: bool) -> Iterator[None]:
    """Point ``model``'s external tensors into ``data_path`` (their payloads copied there), and with
    ``move_inline`` its large inline tensors too; the model is restored on exit."""
    saved: list[tuple[TensorProto, TensorProto]] = []
    writer = _DataWriter(open(data_path, "wb"), data_path.name)
    try:
        for tensor in all_tensors(model):
            external = tensor.data_location == TensorProto.EXTERNAL
            movable = (move_inline and not external and tensor.data_type != TensorProto.STRING
                       and tensor.ByteSize() > _EXTERNAL_FROM_BYTES)
            if not external and not movable:
                continue
            before = TensorProto()
            before.CopyFrom(tensor)
            saved.append((tensor, before))
            if external:
                writer.copy(tensor, source_folder if source_folder is not None else Path.cwd())
            else:
                writer.move_out(tensor)
        writer.close()
        yield
    finally:
        for tensor, before in saved:
            tensor.CopyFrom(before)


def save_model(model: ModelProto, path: str | os.PathLike, *, external_data: bool = False,
               external_data_folder: Path | None = None, overwrite: bool = False,
               replaceable: Collection[Path] = (),
               validate: Callable[[Path], None] | None = None) -> list[Path]:
    """Write ``model`` to ``path`` atomically; returns the files written.

    External tensors (relative to ``external_data_folder``) are streamed into ``<name>.data``; with
    ``external_data``, or a model too large for one protobuf, its large inline tensors too. ``validate`` gets
    the written path before anything is moved into place. Existing files are replaced only with ``overwrite``
    or when in ``replaceable`` (``--in-place``); if moving fails, the previous files are put back. Raises
    ModelFileError (a name not UTF-8 with a data file, a missing folder, a target in the way, a write failure,
    ``validate``'s refusal).
    """
    path = Path(path)
    data_name = path.name + ".data"
    move_inline = external_data or model.ByteSize() >= PROTOBUF_LIMIT
    split = move_inline or bool(external_tensors(model))
    if split and not _is_utf8(data_name):  # the model names its data file in a UTF-8 protobuf string
        raise ModelFileError(f"{path}: the output's name is not valid UTF-8, and the model cannot name its "
                             f"external data file {data_name!r} (ONNX stores locations as UTF-8): choose a UTF-8 name")
    targets = [path] + ([path.parent / data_name] if split else [])
    folder = _output_folder(path, targets, overwrite, replaceable)
    with staging_folder(path, folder) as staging:
        staged = staging / path.name
        if split:
            with _with_data_file(model, staging / data_name, external_data_folder, move_inline):
                onnx.save_model(model, str(staged))
        else:
            onnx.save_model(model, str(staged))
        if validate is not None:
            validate(staged)
        moves = ([(staging / data_name, folder / data_name)] if split else []) + [(staged, path)]
        _move_all_into_place([(source, target, _replaceable(target, overwrite, replaceable))
                              for source, target in moves], staging)
    return targets


def _move_all_into_place(moves: list[tuple[Path, Path, bool]], staging: Path) -> None:
    """Move each staged file onto its target (``(staged, target, overwrite)``), all or nothing: an
    existing target is first hard-linked into ``staging`` (it stays in place meanwhile), and on any
    exception every target already replaced gets its old file back and every new one is removed. The
    data file goes first, so a model is never in place without its data."""
    undo: list[tuple[Path, Path | None]] = []  # (target, its old file in staging, or None: it was new)
    try:
        for number, (staged, target, overwrite) in enumerate(moves):
            old = None
            if overwrite and os.path.lexists(target):
                old = staging / f".old-{number}"
                try:
                    os.link(target, old, follow_symlinks=False)
                except OSError:  # a file system without hard links: move it aside (then restored on failure)
                    os.replace(target, old)
                undo.append((target, old))
            _move_into_place(staged, target, overwrite)
            if old is None:
                undo.append((target, None))
    except BaseException:
        for target, old in reversed(undo):
            with contextlib.suppress(OSError):  # put back what can be put back, then report the first failure
                if old is not None:
                    os.replace(old, target)
                else:
                    target.unlink()
        raise


def _move_into_place(staged: Path, target: Path, overwrite: bool) -> None:
    """Move a complete file into place. Without ``overwrite`` an existing target is refused at this
    moment (another run may have written it since the command started): a hard link cannot replace a
    file, so the check and the move are one step."""
    if overwrite:
        os.replace(staged, target)
        return
    try:
        os.link(staged, target)
    except FileExistsError:
        raise ModelFileError(f"{target}: already exists (written by something else while this command ran; "
                             f"pass --force to overwrite it)") from None
    except OSError:  # a file system without hard links: claim the name exclusively, then replace it
        try:
            os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            raise ModelFileError(f"{target}: already exists (written by something else while this command "
                                 f"ran; pass --force to overwrite it)") from None
        os.replace(staged, target)
        return
    os.unlink(staged)


def write_bytes_atomic(path: str | os.PathLike, content: bytes, overwrite: bool = False) -> None:
    """Write ``content`` to ``path`` atomically (reports, the bundled example); ModelFileError on failure."""
    path = Path(path)
    folder = _output_folder(path, [path], overwrite)
    with staging_folder(path, folder) as staging:
        (staging / path.name).write_bytes(content)
        _move_into_place(staging / path.name, path, overwrite)


def check_target(path: str | os.PathLike, overwrite: bool = False) -> None:
    """Raise ModelFileError now, before any work, if ``path`` could not be written later (no folder, or it
    exists without ``overwrite``)."""
    _output_folder(Path(path), [Path(path)], overwrite)
