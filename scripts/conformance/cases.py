"""What the conformance runner checks: cases (a model and its data sets) and where they come from: ONNX's
node tests (the default suite), a backend-test folder (``model.onnx`` + ``test_data_set_*/input_*.pb``,
``output_*.pb``), a plain ``.onnx`` file, or the fuzzer. Files are vetted by ``find_sources`` before any
work (``BadInput``) and read by ``load_case`` in the runner's child process, where a hang or a crash costs
one verdict and not the run. ``--input-shapes`` and ``--load-inputs`` are parsed and read here."""

from __future__ import annotations

import functools
import re
import warnings
import zipfile
from dataclasses import dataclass, field
from math import prod
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, numpy_helper

from ..examples import EXAMPLE_PATH, example_inputs
from ..graphs import holds_gather
from ..graphs.modelfile import path_kind, read_model

GENERATED_BYTES_LIMIT = 1 << 30  # per data set: a declared [100000, 100000] input is not generated


class BadInput(Exception):
    """A path or an option the runner cannot use; one line for the user (exit status 2)."""


class CannotGenerate(Exception):
    """No inputs can be generated for the model (the case is "not compared")."""


@dataclass
class DataSet:
    feeds: dict[str, np.ndarray]
    expected: list[np.ndarray] | None = None  # expected outputs, when the case brings them
    raising_compares: bool = False  # inputs made invalid on purpose (fuzz): both sides raising is a result


@dataclass
class CheckCase:
    name: str
    model: ModelProto
    data_sets: list[DataSet] = field(default_factory=list)  # none: generated (see input_generation.sized_inputs)
    source: str = ""
    external_data_folder: str | None = None  # where ORT reads the tensors the model keeps in files
    data_sets_origin: str = "test data"  # where data_sets come from, for the user (``input_generation.describe_feeds``)


@dataclass(frozen=True)
class FileSource:
    """A model file or backend-test folder to be read in the runner's child process."""

    path: str
    backend_folder: bool = False
    inputs: str | None = None  # a model found in a folder: its own inputs file beside it (``inputs_beside``)

    @property
    def name(self) -> str:
        return Path(self.path).name if self.backend_folder else self.path


@dataclass(frozen=True)
class InputOptions:
    """How inputs are made for models without test data."""

    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # --input-shapes
    loaded: tuple[DataSet, ...] = ()  # --load-inputs
    seed: int = 0


# -- finding cases -------------------------------------------------------------------------------

# The onnx node-test modules whose cases hold a gather (84 cases in onnx 1.23: Gather, GatherElements and
# GatherND tests, and the function expansions of AffineGrid, Attention, CenterCropPad, FlexAttention,
# NegativeLogLikelihoodLoss and RotaryEmbedding). Each module computes its cases' data when imported:
# these 9 take ~1/10 of the time of all 1,884 node tests. tests/conformance/test_cases.py checks
# that the full collection finds no other case.
NODE_TEST_MODULES = ("affinegrid", "attention", "center_crop_pad", "flexattention", "gather", "gatherelements",
                     "gathernd", "negativeloglikelihoodloss", "rotaryembedding")


def _node_testcases(modules: tuple[str, ...] | None) -> list:
    """onnx's node test cases made by importing ``modules`` of ``onnx.backend.test.case.node`` (None: all
    of them, onnx's ``collect_testcases``), with every case an earlier call already made."""
    import importlib

    from onnx.backend.test.case import node  # imports no test module

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = getattr(node, "_NodeTestCases", None)  # where the test modules put their cases
        try:
            if modules is not None and made is not None:
                for module in modules:
                    importlib.import_module(f"{node.__name__}.{module}")
                return made
        except ModuleNotFoundError:  # another onnx version: fall back to all of them
            pass
        try:
            return node.collect_testcases(None)  # onnx >= 1.23 takes the op type to collect (None: all)
        except TypeError:
            return node.collect_testcases()


def default_suite(node_test_modules: tuple[str, ...] | None = NODE_TEST_MODULES) -> list[CheckCase]:
    """ONNX's node test cases holding a gather anywhere (from ``node_test_modules``; None: from all), then the
    bundled example model."""
    testcases = _node_testcases(node_test_modules)
    cases = []
    for testcase in testcases:
        if testcase.model is None or not holds_gather(testcase.model):
            continue
        names = [value.name for value in testcase.model.graph.input]
        data_sets = [DataSet(dict(zip(names, inputs)), list(outputs)) for inputs, outputs in testcase.data_sets]
        cases.append(CheckCase(testcase.name, testcase.model, data_sets, "onnx node tests"))
    example = onnx.load_model(str(EXAMPLE_PATH))
    cases.append(CheckCase("bundled example", example, [DataSet(example_inputs(seed=s)) for s in range(2)],
                           str(EXAMPLE_PATH)))
    return cases


DEFAULT_SUITE_SOURCES = ("onnx node tests", str(EXAMPLE_PATH))  # CheckCase.source of the default suite's cases


@functools.cache
def _default_suite_by_name() -> dict[str, CheckCase]:
    return {case.name: case for case in default_suite()}


def default_suite_case(name: str) -> CheckCase:
    """The default suite's case ``name`` (the suite is collected once per process).

    Raises:
        BadInput: the suite (of this onnx version) has no such case."""
    try:
        return _default_suite_by_name()[name]
    except KeyError:
        raise BadInput(f"the default suite has no case {name!r} here (onnx {onnx.__version__})") from None


def _is_backend_folder(folder: Path) -> bool:
    return path_kind(folder / "model.onnx") == "file" and any(folder.glob("test_data_set_*"))


def _vet_model_file(path: Path) -> None:
    kind = path_kind(path)
    if kind != "file":
        raise BadInput(f"{path}: {'no such file or folder' if kind == 'missing' else kind + ', not a model file'}")


def inputs_beside(model: Path) -> Path | None:
    """A model's own inputs file: ``NAME.inputs.npz`` beside ``NAME.onnx`` (``bench build-exports`` writes
    them), else ``inputs.npz`` in its folder (a folder per model, ``model.onnx`` and its inputs)."""
    for candidate in (model.with_name(model.stem + ".inputs.npz"), model.with_name("inputs.npz")):
        if path_kind(candidate) == "file":
            return candidate
    return None


def find_sources(paths: list[str]) -> list[FileSource]:
    """The cases under ``paths`` (model files or folders, as given on the command line): .onnx files,
    backend-test folders, or folders holding many of either, in the order of ``paths`` (a folder's models
    sorted); a model found in a folder takes its own inputs file when there is one (``inputs_beside``).

    Raises:
        BadInput: before any model is read, for a missing path, a FIFO, a device, a dangling link, a folder
            with no model, or an empty file."""
    sources = []
    for raw in paths:
        path = Path(raw)
        kind = path_kind(path)
        if kind == "file":
            if path.stat().st_size == 0:
                raise BadInput(f"{path}: empty file, not an ONNX model")
            sources.append(FileSource(str(path)))
        elif kind == "folder" and (path / "model.onnx").exists():
            _vet_model_file(path / "model.onnx")
            sources.append(FileSource(str(path), backend_folder=True))
        elif kind == "folder":
            found = sorted(path.rglob("*.onnx"))
            if not found:
                raise BadInput(f"{path}: no .onnx file in this folder")
            for child in found:
                if child.name == "model.onnx" and _is_backend_folder(child.parent):
                    sources.append(FileSource(str(child.parent), backend_folder=True))
                    continue
                _vet_model_file(child)
                beside = inputs_beside(child)
                sources.append(FileSource(str(child), inputs=str(beside) if beside else None))
        else:
            raise BadInput(f"{path}: {'no such file or folder' if kind == 'missing' else kind + ', not a model file or folder'}")
    return sources


def _read_tensor(path: Path) -> np.ndarray:
    tensor = TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


def _numbered(folder: Path, prefix: str) -> list[Path]:
    return sorted(folder.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))


def feed_names(model: ModelProto) -> list[str]:
    """The graph inputs a run must feed (initializers listed as inputs are optional)."""
    initializers = {init.name for init in model.graph.initializer}
    return [value.name for value in model.graph.input if value.name not in initializers]


def _backend_data_sets(folder: Path, names: list[str]) -> list[DataSet]:
    data_sets = []
    for data_dir in sorted(folder.glob("test_data_set_*")):
        inputs = [_read_tensor(p) for p in _numbered(data_dir, "input")]
        outputs = [_read_tensor(p) for p in _numbered(data_dir, "output")]
        data_sets.append(DataSet(dict(zip(names, inputs)), outputs or None))
    return data_sets


def load_case(source: FileSource) -> CheckCase:
    """Read a model file or backend-test folder (in the runner's child process): the model (external data left
    in its files), the folder's data sets (or a model file's own inputs file's, or none), its data folder."""
    # External data stays in its files (ORT memory-maps it; a model over 2 GiB could not be serialized)
    if source.backend_folder:
        folder = Path(source.path)
        model, data_folder = read_model(folder / "model.onnx")
        return CheckCase(source.name, model, _backend_data_sets(folder, feed_names(model)), source.path,
                         str(data_folder) if data_folder else None)
    model, data_folder = read_model(source.path)
    data_sets = list(load_inputs(source.inputs)) if source.inputs else []
    return CheckCase(source.name, model, data_sets, source.path, str(data_folder) if data_folder else None,
                     f"loaded from {source.inputs}")


# -- options for inputs --------------------------------------------------------------------------

_SHAPE = re.compile(r"^(?P<name>.+):\[(?P<dims>.*)\]$", re.DOTALL)
_SIZE = re.compile(r"[0-9]+")
_INT64_MAX = (1 << 63) - 1  # ONNX dims are int64


def parse_input_shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    """``NAME:[d0,d1,...]`` (polygraphy's form) for each spec: a dict from input name to shape. Sizes are whole
    numbers from 0 to 2**63-1 separated by commas (a trailing comma allowed, ``NAME:[]`` a scalar), each name
    given once. The one parser of ``--input-shapes`` for every command.

    Raises:
        BadInput: naming the spec and what is wrong."""
    shapes = {}
    for spec in specs:
        match = _SHAPE.match(spec.strip())
        if not match:
            raise BadInput(f"--input-shapes {spec!r}: expected NAME:[d0,d1,...], e.g. input_ids:[1,128]")
        name, text = match["name"], match["dims"]
        items = [item.strip() for item in text.split(",")] if text.strip() else []
        if len(items) > 1 and not items[-1]:
            items.pop()  # one trailing comma, as in Python's [1, 128,]
        for item in items:
            if not _SIZE.fullmatch(item):
                problem = "an empty dim" if not item else f"dim {item!r} is not a size"
                raise BadInput(f"--input-shapes {spec!r}: {problem} (sizes are whole numbers from 0, separated "
                               f"by commas, e.g. input_ids:[1,128])")
            if int(item) > _INT64_MAX:
                raise BadInput(f"--input-shapes {spec!r}: dim {item} is over 2**63-1, the largest ONNX dim")
        if name in shapes:
            raise BadInput(f"--input-shapes {spec!r}: input {name!r} is given twice")
        shapes[name] = tuple(int(item) for item in items)
    return shapes


LOADED_BYTES_LIMIT = GENERATED_BYTES_LIMIT  # everything --load-inputs reads, checked before reading it


class _LoadBudget:
    """Bytes --load-inputs may still take; refuses, naming the file, before anything is decompressed."""

    def __init__(self, option: str):
        self.option, self.left = option, LOADED_BYTES_LIMIT

    def take(self, size: int, what: str) -> None:
        """Count ``size`` bytes against the budget; BadInput when over what is left."""
        if size > self.left:
            raise BadInput(f"{self.option}: {what} would take {size / 2**30:.2f} GiB, over the "
                           f"{LOADED_BYTES_LIMIT / 2**30:g} GiB limit on loaded inputs (all files together)")
        self.left -= size


def load_inputs(path: str) -> tuple[DataSet, ...]:
    """Data sets (feeds only) from an .npz file (arrays named after the inputs), or a folder of .npz files or
    of backend-test data sets (``test_data_set_*/input_*.pb``, matched by the tensors' names). At most
    ``LOADED_BYTES_LIMIT`` bytes in all, checked before reading; a bare .npy file is refused (its array has no
    name to match an input by).

    Raises:
        BadInput: the path is missing or unreadable, holds no data set, is over the limit, or holds unnamed
            tensors, a .npy file, or object arrays."""
    location = Path(path)
    kind = path_kind(location)
    budget = _LoadBudget(f"--load-inputs {path}")
    try:
        if kind == "file":
            return (_npz_data_set(location, budget),)
        if kind == "folder":
            data_sets = [_npz_data_set(p, budget) for p in sorted(location.glob("*.npz"))]
            for data_dir in sorted(location.glob("test_data_set_*")):
                for p in _numbered(data_dir, "input"):
                    budget.take(p.stat().st_size, str(p))
                tensors = [TensorProto.FromString(p.read_bytes()) for p in _numbered(data_dir, "input")]
                unnamed = [str(p) for p, t in zip(_numbered(data_dir, "input"), tensors) if not t.name]
                if unnamed:
                    raise BadInput(f"--load-inputs {path}: {unnamed[0]} has no tensor name to match an input by")
                data_sets.append(DataSet({t.name: numpy_helper.to_array(t) for t in tensors}))
            if not data_sets:
                raise BadInput(f"--load-inputs {path}: no .npz file or test_data_set_* folder in it")
            return tuple(data_sets)
    except BadInput:
        raise
    except Exception as error:  # noqa: BLE001 - numpy and protobuf raise many types for bad files
        raise BadInput(f"--load-inputs {path}: cannot read ({' '.join(str(error).split())[:200]})") from None
    raise BadInput(f"--load-inputs {path}: {'no such file or folder' if kind == 'missing' else kind}")


def _npz_data_set(path: Path, budget: _LoadBudget) -> DataSet:
    """The arrays of an .npz file, after checking what they would take (see load_inputs)."""
    with open(path, "rb") as file:
        start = file.read(6)
    if start == b"\x93NUMPY":
        raise BadInput(f"{budget.option}: {path} is a .npy file, one array without a name; inputs are matched "
                       f"by name: save them with numpy.savez(FILE.npz, input_name=array, ...)")
    if not zipfile.is_zipfile(path):
        raise BadInput(f"{budget.option}: {path} is not an .npz file (not a zip archive of .npy arrays)")
    with zipfile.ZipFile(path) as archive:
        for member in archive.infolist():
            if not member.filename.endswith(".npy"):
                raise BadInput(f"{budget.option}: {path} holds {member.filename!r}, not an .npy array: not an .npz "
                               f"file of arrays")
            budget.take(member.file_size, f"{path}: {member.filename} ({member.file_size} bytes unpacked)")
            shape, dtype = _npy_header(archive, member, budget.option, path)
            if dtype.hasobject:
                raise BadInput(f"{budget.option}: {path}: {member.filename} holds Python objects (dtype {dtype}), "
                               f"which are never unpickled here: save arrays of numbers, booleans or strings")
    with np.load(path, allow_pickle=False) as arrays:
        return DataSet({name: arrays[name] for name in arrays.files})


def _npy_header(archive: zipfile.ZipFile, member: zipfile.ZipInfo, option: str, path: Path):
    """(shape, dtype) from an .npz member's .npy header; its size is checked against the declared one, so
    that the array read later cannot be larger than what the budget took."""
    with archive.open(member) as stream:
        try:
            version = np.lib.format.read_magic(stream)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(stream)
        except ValueError as error:
            raise BadInput(f"{option}: {path}: {member.filename} is not a valid .npy array ({error})") from None
    size = prod(shape) * dtype.itemsize
    if size > member.file_size:
        raise BadInput(f"{option}: {path}: {member.filename} declares shape {list(shape)} {dtype} "
                       f"({size / 2**30:.2f} GiB) but holds only {member.file_size} bytes")
    return shape, dtype


# -- generated inputs ----------------------------------------------------------------------------
