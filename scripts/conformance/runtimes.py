"""ONNX runtimes other than ORT's Python CPU provider, behind one protocol (``check --runtime``,
``bench lowering --runtime``).

A runtime that refuses a model raises ``Refused`` with its own message, at load or at the first run; a
model that raises on some inputs raises anything else. Every ``load`` is a fresh compilation, so that two
loads tell a runtime's own nondeterminism from a difference the lowering made. Outputs keep the runtime's
dtypes. OpenVINO infers in f32, so that nothing is computed below the model's precision. All runtimes
but ``ort`` and ``reference`` are optional (``RuntimeUnavailable`` names what to install).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np
import onnx
from onnx import ModelProto

RUNTIMES = ("ort", "openvino", "tract", "reference", "web")

WEB_FOLDER = Path(__file__).resolve().parent / "web"  # the page, package.json and package-lock.json


class RuntimeUnavailable(Exception):
    """The runtime's package or program is missing (the message says what to install)."""


class Refused(Exception):
    """The runtime refuses the model (it cannot read, convert or compile it); the message is its own, one line."""


class Loaded(Protocol):
    """A model loaded (compiled) by a runtime."""

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds`` (by input name): the outputs in the graph's order.

        Raises:
            Refused: the runtime refuses the model (a runtime that reads it only when it runs).
        """
        ...


class Runtime(Protocol):
    """An ONNX runtime: ``name``, ``version()`` and ``load(model)``."""

    name: str

    def version(self) -> str:
        """The runtime's version (what the report records)."""
        ...

    def load(self, model: ModelProto) -> Loaded:
        """Load and compile ``model`` afresh (external data already read in).

        Raises:
            Refused: the runtime refuses the model.
        """
        ...


def _one_line(error: BaseException) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())[:600]


def _package_version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def _need(module: str, package: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise RuntimeUnavailable(f"the {package} runtime needs the Python package {package!r} "
                                 f"(pip install 'gathermultiaxis[runtimes]')")


# -- ONNX Runtime ---------------------------------------------------------------------------------

class OrtRuntime:
    """onnxruntime's CPU execution provider, one intra-op thread, default graph optimizations."""

    name = "ort"

    def version(self) -> str:
        """onnxruntime's version."""
        import onnxruntime

        return onnxruntime.__version__

    def load(self, model: ModelProto) -> Loaded:
        """A fresh InferenceSession."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 4
        try:
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as error:  # noqa: BLE001 - ORT raises several types for a model it refuses
            raise Refused(_one_line(error)) from None
        return _Outputs(lambda feeds: [np.asarray(value) for value in session.run(None, feeds)])


class _Outputs:
    """A loaded model that is one function of the feeds."""

    def __init__(self, function: Callable[[dict[str, np.ndarray]], list[np.ndarray]]):
        self.function = function

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The function's outputs."""
        return self.function(feeds)


# -- OpenVINO -------------------------------------------------------------------------------------

class OpenVinoRuntime:
    """OpenVINO's CPU plugin reading ONNX from memory, f32 inference precision, one thread."""

    name = "openvino"

    def __init__(self) -> None:
        _need("openvino", "openvino")
        import openvino

        self.core = openvino.Core()

    def version(self) -> str:
        """openvino's version."""
        import openvino

        return openvino.__version__.split("-")[0]

    def load(self, model: ModelProto) -> Loaded:
        """read_model + compile_model; an input of unknown rank gets the fed shape at the first run (the
        CPU plugin refuses a dynamic rank, so users fix it the same way)."""
        try:
            read = self.core.read_model(model.SerializeToString())
        except Exception as error:  # noqa: BLE001
            raise Refused(_one_line(error)) from None
        return _OpenVinoModel(self.core, read)


class _OpenVinoModel:
    def __init__(self, core, model) -> None:
        self.core, self.model = core, model
        self.compiled: Any = None

    def _compile(self, feeds: dict[str, np.ndarray]):
        import openvino

        try:
            if any(port.get_partial_shape().rank.is_dynamic for port in self.model.inputs):
                self.model.reshape({port: openvino.PartialShape(list(feeds[name].shape)) for port in self.model.inputs
                                    for name in sorted(port.get_names())[:1] if name in feeds})
            return self.core.compile_model(self.model, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                               "INFERENCE_NUM_THREADS": 1})
        except Exception as error:  # noqa: BLE001
            raise Refused(_one_line(error)) from None

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """One infer request (compiled at the first run)."""
        import openvino

        if self.compiled is None:
            self.compiled = self._compile(feeds)
        request = self.compiled.create_infer_request()
        tensors = {}
        for port in self.compiled.inputs:
            # a port carries every name of its tensor (an input passed through keeps both): take the fed one
            names = [name for name in port.get_names() if name in feeds]
            if not names:
                raise Refused(f"OpenVINO's model has an input {sorted(port.get_names())} that is not fed")
            value = feeds[names[0]]
            tensors[port] = openvino.Tensor(value.astype(str)) if value.dtype == object else value
        request.infer(tensors)
        outputs = []
        for port in self.compiled.outputs:
            tensor = request.get_tensor(port)
            if tensor.element_type == openvino.Type.string:
                value = np.asarray(tensor.str_data, dtype=object)
            else:
                value = np.array(tensor.data, copy=True)
            outputs.append(value.reshape(tuple(tensor.shape)))
        return outputs


# -- tract ----------------------------------------------------------------------------------------

_TRACT_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.float64): "f64",
                np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32",
                np.dtype(np.int64): "i64", np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16",
                np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64", np.dtype(bool): "bool"}


class TractRuntime:
    """Sonos' tract as its documentation runs it: input facts fixed to the fed arrays', then optimized."""

    name = "tract"

    def __init__(self) -> None:
        _need("tract", "tract")

    def version(self) -> str:
        """tract's version."""
        import tract

        return str(tract.version())

    def load(self, model: ModelProto) -> Loaded:
        """Keep the bytes: tract needs the input facts, known at the first run."""
        return _TractModel(model.SerializeToString())


class _TractModel:
    def __init__(self, model_bytes: bytes) -> None:
        self.model_bytes, self.runnable, self.order = model_bytes, None, list[str]()

    def _compile(self, feeds: dict[str, np.ndarray]) -> None:
        import tract

        with tempfile.TemporaryDirectory(prefix="gathermultiaxis-tract-") as folder:
            path = Path(folder) / "model.onnx"  # tract reads ONNX from a path only
            path.write_bytes(self.model_bytes)
            try:
                model = tract.onnx().load(str(path))
                self.order = [model.input_name(i) for i in range(model.input_count())]
                for number, name in enumerate(self.order):
                    if name not in feeds:
                        raise Refused(f"tract's model has an input {name!r} that is not fed")
                    value = feeds[name]
                    if value.dtype not in _TRACT_TYPES:
                        kind = "strings" if value.dtype == object else value.dtype
                        raise Refused(f"tract's Python API has no tensor type for input {name!r} ({kind})")
                    model.set_input_fact(number, ",".join([*map(str, value.shape), _TRACT_TYPES[value.dtype]]))
                self.runnable = model.into_model().into_runnable()  # into_runnable optimizes (tract >= 0.22)
            except Refused:
                raise
            except Exception as error:  # noqa: BLE001
                raise Refused(_one_line(error)) from None

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Compile for these feeds' facts at the first run, then run."""
        if self.runnable is None:
            self._compile(feeds)
        assert self.runnable is not None
        # np.array, not ascontiguousarray: the latter makes a 0-d array 1-d
        results = self.runnable.run([np.array(feeds[name], order="C") for name in self.order])
        return [np.asarray(result.to_numpy()) for result in results]


# -- onnx's reference evaluator -------------------------------------------------------------------

class ReferenceRuntime:
    """onnx.reference.ReferenceEvaluator, ONNX's reference implementation in Python."""

    name = "reference"

    def version(self) -> str:
        """onnx's version."""
        return onnx.__version__

    def load(self, model: ModelProto) -> Loaded:
        """A fresh evaluator."""
        from onnx.reference import ReferenceEvaluator

        try:
            evaluator = ReferenceEvaluator(model)
        except Exception as error:  # noqa: BLE001
            raise Refused(_one_line(error)) from None
        return _Outputs(lambda feeds: [np.asarray(value) for value in evaluator.run(None, feeds)])


# -- onnxruntime-web in headless Chromium ---------------------------------------------------------

# numpy dtype <-> onnxruntime-web's tensor type; float16 travels as its bits
_WEB_TYPES: dict[np.dtype, str] = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64", np.dtype(np.int8): "int8",
              np.dtype(np.uint8): "uint8", np.dtype(np.int16): "int16", np.dtype(np.uint16): "uint16",
              np.dtype(np.int32): "int32", np.dtype(np.uint32): "uint32", np.dtype(np.int64): "int64",
              np.dtype(np.uint64): "uint64", np.dtype(bool): "bool", np.dtype(np.float16): "float16"}
_FROM_WEB: dict[str, np.dtype] = {name: dtype for dtype, name in _WEB_TYPES.items()}


def _pack(header: dict, chunks: list[bytes]) -> bytes:
    """The wire format both ways: uint32 header length (little-endian), JSON header, raw bytes."""
    text = json.dumps(header).encode()
    return struct.pack("<I", len(text)) + text + b"".join(chunks)


def _unpack(body: bytes) -> tuple[dict, bytes]:
    (length,) = struct.unpack_from("<I", body)
    return json.loads(body[4:4 + length]), body[4 + length:]


def web_inputs(feeds: dict[str, np.ndarray]) -> tuple[list[dict], list[bytes]]:
    """The feeds as the page takes them: ``(specs, chunks)``, a spec per input and the raw bytes.

    Raises:
        Refused: a type onnxruntime-web's JavaScript tensors cannot carry (bfloat16, complex).
    """
    specs: list[dict] = []
    chunks: list[bytes] = []
    offset = 0
    for name, value in feeds.items():
        value = np.asarray(value)
        dims = [int(d) for d in value.shape]
        if value.dtype == object or value.dtype.kind == "U":
            specs.append({"name": name, "type": "string", "dims": dims, "strings": [str(s) for s in value.reshape(-1)]})
            continue
        if value.dtype not in _WEB_TYPES:
            raise Refused(f"onnxruntime-web's tensors cannot carry input {name!r} of type {value.dtype}")
        data = np.ascontiguousarray(value).tobytes()
        specs.append({"name": name, "type": _WEB_TYPES[value.dtype], "dims": dims, "offset": offset,
                      "nbytes": len(data)})
        chunks.append(data)
        offset += len(data)
    return specs, chunks


def web_outputs(specs: list[dict], payload: bytes) -> list[np.ndarray]:
    """The page's outputs (``specs`` and raw ``payload``) as arrays, bit for bit."""
    arrays = []
    for spec in specs:
        shape = tuple(spec["dims"])
        if spec["type"] == "string":
            arrays.append(np.array(spec["strings"], dtype=object).reshape(shape))
            continue
        dtype: np.dtype | None = _FROM_WEB.get(spec["type"])
        if dtype is None:
            raise ValueError(f"output {spec['name']!r} of type {spec['type']} has no NumPy counterpart here")
        raw = payload[spec["offset"]:spec["offset"] + spec["nbytes"]]
        if dtype == np.dtype(bool):
            arrays.append(np.frombuffer(raw, dtype=np.uint8).astype(bool).reshape(shape))
        else:
            arrays.append(np.frombuffer(raw, dtype=dtype).reshape(shape).copy())
    return arrays


def web_missing(node_modules: Path | None = None) -> list[str]:
    """What the web runtime needs and does not find, a phrase each saying how to get it."""
    node_modules = node_modules or web_node_modules()
    missing = []
    if not chromium_path():
        missing.append("chromium (apt-get install chromium, or set GATHERMULTIAXIS_CHROMIUM)")
    if not shutil.which("node"):
        missing.append("node (apt-get install nodejs npm)")
    for package in ("onnxruntime-web", "playwright-core"):
        if not (node_modules / package / "package.json").is_file():
            missing.append(f"the npm package {package} in {node_modules} (npm ci in {WEB_FOLDER})")
    return missing


def chromium_path() -> str | None:
    """Chromium's executable: $GATHERMULTIAXIS_CHROMIUM, else ``chromium`` on the PATH, else None."""
    return os.environ.get("GATHERMULTIAXIS_CHROMIUM") or shutil.which("chromium")


def web_node_modules() -> Path:
    """Where the npm packages are: $GATHERMULTIAXIS_WEB_NODE_MODULES, else ``node_modules`` beside the page."""
    return Path(os.environ.get("GATHERMULTIAXIS_WEB_NODE_MODULES") or WEB_FOLDER / "node_modules")


class _PageServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, node_modules: Path):
        super().__init__(("127.0.0.1", 0), _PageHandler)
        self.files = {"/page/": WEB_FOLDER / "page", "/ort/": node_modules / "onnxruntime-web" / "dist"}
        self.cases: queue.Queue = queue.Queue()
        self.results: queue.Queue = queue.Queue()
        self.ready: queue.Queue = queue.Queue()
        self.closing = False

    def handle_error(self, request, client_address) -> None:
        """Quiet about the browser dropping its connection as it shuts down; loud about anything else."""
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class _PageHandler(BaseHTTPRequestHandler):
    """Loopback only: the page, onnxruntime-web's files, and the queue of cases (the page long-polls /next)."""

    server: _PageServer
    TYPES = {".html": "text/html", ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm"}

    def log_message(self, format, *args) -> None:  # noqa: A002 - BaseHTTPRequestHandler's signature
        """Quiet: the page's requests are not news."""

    def _send(self, status: int, body: bytes = b"", kind: str = "application/octet-stream") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        # cross-origin isolated: the page's clock then ticks in 5 us, not 100 us (the bench's times)
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        """The page, its script, onnxruntime-web's files, or the next case (204 while there is none)."""
        path = self.path.split("?")[0]
        if path in ("/", "/index.html"):
            return self._send(200, (WEB_FOLDER / "page" / "index.html").read_bytes(), "text/html")
        if path == "/next":
            if self.server.closing:
                return self._send(200)  # an empty answer ends the page's loop
            try:
                message = self.server.cases.get(timeout=5)
            except queue.Empty:
                return self._send(204)
            return self._send(200, message or b"")
        for prefix, folder in self.server.files.items():
            if path.startswith(prefix):
                name = path[len(prefix):]
                file = (folder / name).resolve()
                # one level, no "..": nothing outside the two folders is served
                if "/" in name or not file.is_file() or file.parent != folder.resolve():
                    return self._send(404)
                return self._send(200, file.read_bytes(), self.TYPES.get(file.suffix, "application/octet-stream"))
        return self._send(404)

    def do_POST(self) -> None:
        """The page's facts when it is up (/ready), an answer (/result), or its death (/fatal)."""
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/ready":
            self.server.ready.put(json.loads(body))
        elif self.path == "/result":
            self.server.results.put(body)
        elif self.path == "/fatal":
            self.server.ready.put({"fatal": body.decode(errors="replace")})
            self.server.results.put(None)
        self._send(200)


class WebRuntime:
    """onnxruntime-web's WASM build (one thread) in headless Chromium: one browser and page for every model
    of this object (started at the first run), each run a fresh session."""

    name = "web"
    STARTUP_TIMEOUT_S = 120.0
    RUN_TIMEOUT_S = 300.0

    def __init__(self, optimization: str = "all") -> None:
        missing = web_missing()
        if missing:
            raise RuntimeUnavailable(f"the web runtime needs {'; '.join(missing)}")
        self.optimization, self.node_modules = optimization, web_node_modules()
        self.server: _PageServer | None = None
        self.driver: subprocess.Popen | None = None
        self.facts: dict = {}
        self.startup_s = 0.0
        self._ids = 0

    def version(self) -> str:
        """onnxruntime-web's version and Chromium's (starts the browser)."""
        self.start()
        return f"onnxruntime-web {self.facts.get('ort', {}).get('web', '?')}, {self.facts.get('chromium', '?')}"

    def start(self) -> None:
        """Start the page server and the browser, unless they are up."""
        if self.driver is not None and self.driver.poll() is None:
            return
        self.close()
        started = time.perf_counter()
        self.server = _PageServer(self.node_modules)
        threading.Thread(target=self.server.serve_forever, name="web-runtime-page-server", daemon=True).start()
        url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        chromium = chromium_path() or "chromium"
        environment = {**os.environ, "CHROMIUM": chromium, "NODE_MODULES": str(self.node_modules)}
        self.driver = subprocess.Popen([shutil.which("node") or "node", str(WEB_FOLDER / "drive.mjs"), url],
                                       cwd=WEB_FOLDER, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, env=environment)
        try:
            facts = self.server.ready.get(timeout=self.STARTUP_TIMEOUT_S)
        except queue.Empty:
            self.close()
            raise Refused(f"the browser page did not start within {self.STARTUP_TIMEOUT_S:g} s") from None
        if "fatal" in facts:
            self.close()
            raise Refused(f"the browser page failed to start: {facts['fatal']}")
        facts["chromium"] = subprocess.run([chromium, "--version"], capture_output=True, text=True).stdout.strip()
        self.facts, self.startup_s = facts, time.perf_counter() - started

    def load(self, model: ModelProto) -> Loaded:
        """Keep the bytes: the page makes a session at each run."""
        model_bytes = model.SerializeToString()
        return _Outputs(lambda feeds: self.run(model_bytes, feeds))

    def run(self, model_bytes: bytes, feeds: dict[str, np.ndarray], repeat: int = 0) -> list[np.ndarray]:
        """A fresh session in the page, one run (``repeat`` more, timed into ``times``), released.

        Raises:
            Refused: onnxruntime-web refuses the model, or the browser did not start.
            RuntimeError: the run raised, the browser died, or no answer came in time.
        """
        specs, chunks = web_inputs(feeds)
        self.start()
        assert self.server is not None
        self._ids += 1
        header = {"id": self._ids, "model_nbytes": len(model_bytes), "inputs": specs,
                  "optimization": self.optimization, "repeat": repeat}
        self.server.cases.put(_pack(header, [model_bytes, *chunks]))
        deadline = time.monotonic() + self.RUN_TIMEOUT_S
        while True:
            try:
                body = self.server.results.get(timeout=1.0)
                break
            except queue.Empty:
                if self.driver is None or self.driver.poll() is not None:
                    log = self.close()
                    raise RuntimeError(f"the browser died: {log}") from None
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"no answer from the page within {self.RUN_TIMEOUT_S:g} s") from None
        if body is None:
            raise RuntimeError(f"the page stopped: {self.close()}")
        answer, payload = _unpack(body)
        if answer.get("id") != header["id"]:
            raise RuntimeError(f"the page answered case {answer.get('id')} for case {header['id']}")
        if answer["status"] == "refused":
            raise Refused(" ".join(answer["message"].split())[:600])
        if answer["status"] != "ok":
            raise RuntimeError(f"{answer['status']}: {' '.join(answer['message'].split())[:600]}")
        self.times = [t / 1e3 for t in answer.get("times", [])]
        return web_outputs(answer["outputs"], payload)

    times: list[float] = []  # seconds of the ``repeat`` runs of the last ``run``

    def close(self) -> str:
        """Stop the browser and the server: the end of what the page logged, or ""."""
        log = ""
        if self.server is not None:
            self.server.closing = True
        if self.driver is not None:
            try:
                assert self.driver.stdin is not None and self.driver.stderr is not None
                self.driver.stdin.close()  # drive.mjs closes the browser when its stdin ends
                _, errors = self.driver.communicate(timeout=15)
                log = " ".join(errors.decode(errors="replace").split())[-600:]
            except Exception:  # noqa: BLE001 - a driver that does not stop is killed
                self.driver.kill()
                self.driver.wait()
            self.driver = None
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        return log


# -- choosing one ---------------------------------------------------------------------------------

_FACTORIES: dict[str, Callable[[], Runtime]] = {
    "ort": OrtRuntime, "openvino": OpenVinoRuntime, "tract": TractRuntime, "reference": ReferenceRuntime,
    "web": WebRuntime}
_live: dict[str, Runtime] = {}


def runtime(name: str) -> Runtime:
    """The runtime called ``name`` (one of ``RUNTIMES``), made once per process (one browser for ``web``).

    Raises:
        RuntimeUnavailable: its package or program is missing.
        KeyError: no runtime has that name.
    """
    if name not in _live:
        _live[name] = _FACTORIES[name]()
    return _live[name]


def check_available(name: str) -> None:
    """Raise ``RuntimeUnavailable`` when runtime ``name`` cannot be made here (without starting a browser)."""
    if name in ("openvino", "tract"):
        _need(name, name)
    elif name == "web":
        missing = web_missing()
        if missing:
            raise RuntimeUnavailable(f"the web runtime needs {'; '.join(missing)}")


def runtime_version(name: str) -> str:
    """The version of runtime ``name``'s package without loading it, or "not installed"."""
    try:
        if name == "web":
            return json.loads((web_node_modules() / "onnxruntime-web" / "package.json").read_text())["version"]
        return _package_version({"ort": "onnxruntime", "reference": "onnx"}.get(name, name))
    except Exception:  # noqa: BLE001 - missing package or unreadable metadata
        return "not installed"
