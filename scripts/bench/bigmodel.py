"""``bench big-model`` / ``big-graph``: ``rewrite`` on a model over protobuf's 2 GB limit / of many nodes.

The big model's table is a sparse external-data file (holes read as zeros). The big graph's floors are
``onnx.load`` + shape inference + ``onnx.save`` and ORT loading it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper

from ..harness import IR_VERSION
from .rewrite_profile import RewriteProfile, profile_rewrite

WIDTH = 1024
_MARKED_ROWS = (0, 3, -1)


def build_big_model(folder: Path, gigabytes: float) -> Path:
    """``folder/big.onnx``: Gather(table, ids) @ projection + bias, the table external (sparse file)."""
    rows = int(gigabytes * 1e9) // (WIDTH * 4)
    table = TensorProto(name="table", data_type=TensorProto.FLOAT, dims=[rows, WIDTH])
    table.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "big.onnx.weights"), ("offset", "0"), ("length", str(rows * WIDTH * 4))):
        table.external_data.add(key=key, value=value)
    projection = numpy_helper.from_array(np.eye(WIDTH, 8, dtype=np.float32), "projection")
    bias = numpy_helper.from_array(np.arange(8, dtype=np.float32), "bias")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0, name="embedding"),
             helper.make_node("MatMul", ["rows", "projection"], ["projected"]),
             helper.make_node("Add", ["projected", "bias"], ["out"])]
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 8])],
                              [table, projection, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    onnx.save_model(model, str(folder / "big.onnx"))
    with open(folder / "big.onnx.weights", "wb") as weights:
        weights.truncate(rows * WIDTH * 4)
        for row in _MARKED_ROWS:  # a few rows that are not zeros, so the check below can tell rows apart
            weights.seek((row % rows) * WIDTH * 4)
            weights.write((np.arange(WIDTH, dtype=np.float32) + row).tobytes())
    return folder / "big.onnx"


@dataclass
class BigModelRun:
    model_bytes: int  # the model file plus its external data
    exit_status: int
    peak_rss_mib: float
    output_bytes: int  # apparent size of the written files
    output_disk_bytes: int  # blocks actually allocated for them
    rows_match: bool
    stderr: str


def _run_measured(command: list[str]) -> tuple[int, float, str]:
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None  # stderr=PIPE
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_maxrss / 1024, stderr  # ru_maxrss is in KiB on Linux


def measure(gigabytes: float = 2.2, folder: Path | None = None, ort_optimize: bool = False) -> BigModelRun:
    """Rewrite a big model in a child process (its peak RSS), then compare the rows of both.

    Args:
        gigabytes: the table's size.
        folder: where the scratch folder goes (None: the system's temporary folder).
        ort_optimize: rewrite with ``--ort-optimize``.

    Returns:
        The sizes, the exit status, the peak RSS, and whether the rows match.
    """
    with tempfile.TemporaryDirectory(prefix="gathermultiaxis-big-", dir=folder) as scratch_name:
        scratch = Path(scratch_name)
        source = build_big_model(scratch, gigabytes)
        (scratch / "out").mkdir()
        target = scratch / "out" / "rewritten.onnx"
        command = [sys.executable, "-m", "gathermultiaxis", "rewrite", str(source), "-o", str(target)]
        status, peak, stderr = _run_measured(command + (["--ort-optimize"] if ort_optimize else []))
        written = list((scratch / "out").iterdir())
        rows_match = status == 0 and _rows_match(source, target)
        return BigModelRun(sum(p.stat().st_size for p in scratch.iterdir() if p.is_file()), status, round(peak, 1),
                           sum(p.stat().st_size for p in written), sum(p.stat().st_blocks * 512 for p in written),
                           rows_match, stderr.strip())


def _rows_match(source: Path, target: Path) -> bool:
    """Original (plain ORT) and rewrite (GatherMultiaxis) give the same rows, first and last included."""
    import onnxruntime as ort

    from ..ops.runtime.registration import session_options

    feeds = {"ids": np.array([*_MARKED_ROWS, 1], np.int64)}
    want = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = ort.InferenceSession(str(target), session_options(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    return (want.dtype == got.dtype and want.shape == got.shape and want.tobytes() == got.tobytes()
            and len({row.tobytes() for row in want}) == len(feeds["ids"]))


# -- many nodes: rewrite time and memory against onnx.load + infer_shapes + save ---------------------

def build_big_graph(gathers: int) -> ModelProto:
    """A chain of ``gathers`` x (Gather + Add), each link reversing 8 columns and adding one."""
    nodes = []
    previous = "x"
    for i in range(gathers):
        nodes.append(helper.make_node("Gather", [previous, "reversed"], [f"gathered{i}"], axis=1, name=f"gather{i}"))
        nodes.append(helper.make_node("Add", [f"gathered{i}", "one"], [f"sum{i}"], name=f"add{i}"))
        previous = f"sum{i}"
    graph = helper.make_graph(nodes, "big_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, ["n", 8])],
                              [numpy_helper.from_array(np.arange(7, -1, -1, dtype=np.int64), "reversed"),
                               numpy_helper.from_array(np.ones(8, np.float32), "one")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


@dataclass
class Measured:
    seconds: list[float]       # wall clock
    peak_rss_mib: list[float]
    cpu_seconds: list[float] = field(default_factory=list)  # user + system: what a loaded machine does not inflate

    @property
    def median_cpu_seconds(self) -> float:
        """The median of the user + system CPU seconds."""
        return float(np.median(self.cpu_seconds))

    @property
    def median_seconds(self) -> float:
        """The median wall-clock seconds."""
        return float(np.median(self.seconds))

    @property
    def median_peak_rss_mib(self) -> float:
        """The median peak resident memory, MiB."""
        return float(np.median(self.peak_rss_mib))


@dataclass
class BigGraphRun:
    gathers: int
    nodes: int
    model_bytes: int
    repeats: int
    rewrite: Measured             # `gathermultiaxis rewrite` as a user runs it (a fresh process)
    load_infer_save: Measured     # onnx.load + onnx.shape_inference.infer_shapes + onnx.save (a fresh process)
    ort_load: Measured            # ORT loading the input as `rewrite` checks it (a fresh process)
    python_startup: Measured      # `python -c "import onnx"`: the floor under both
    rewrite_over_load_infer_save: dict[str, float]  # seconds, CPU seconds and peak RSS, ratios of medians
    output_loads: bool
    output_sha256: str = ""       # of the rewritten file
    against: Measured | None = None  # the rewrite by another installation's Python (``against``), interleaved
    against_over_load_infer_save: dict[str, float] | None = None
    same_output: bool | None = None  # whether that rewrite wrote the same bytes, in every round


# Each child reports its own peak RSS (VmHWM, which exec resets) as it exits: ``ru_maxrss`` from wait4
# would include the pages of this process the child had before exec (the fork copy), ~300 MB here.
_PEAK_MARK = "peak-rss-kib"
_REPORT_PEAK = ("import atexit, sys\n"
                "def _report_peak():\n"
                "    with open('/proc/self/status') as status:\n"
                "        kib = next(line.split()[1] for line in status if line.startswith('VmHWM'))\n"
                f"    sys.stderr.write('\\n{_PEAK_MARK} ' + kib + '\\n')\n"
                "atexit.register(_report_peak)\n")
_LOAD_INFER_SAVE = _REPORT_PEAK + ("import onnx; "
                                   "onnx.save(onnx.shape_inference.infer_shapes(onnx.load(sys.argv[1])), sys.argv[2])")
_ORT_LOAD = _REPORT_PEAK + ("from gathermultiaxis import session_options; "
                            "from gathermultiaxis.graphs.modelfile import ort_load_error; "
                            "assert not ort_load_error(sys.argv[1], session_options=session_options)")
_REWRITE = _REPORT_PEAK + ("import runpy; sys.argv = ['gathermultiaxis', *sys.argv[1:]]; "
                           "runpy.run_module('gathermultiaxis', run_name='__main__')")


def child_environment() -> dict[str, str]:
    """The environment without PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION (onnxruntime-extensions may set it)."""
    return {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}


def _timed(command: list[str]) -> tuple[int, float, float, float, str]:
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=child_environment())
    assert child.stderr is not None  # stderr=PIPE
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    marks = [line.split()[1] for line in stderr.splitlines() if line.startswith(_PEAK_MARK)]
    peak_mib = int(marks[-1]) / 1024 if marks else float("nan")
    return os.waitstatus_to_exitcode(status), seconds, usage.ru_utime + usage.ru_stime, peak_mib, stderr


def _measure_rounds(commands: dict[str, list[str]], repeats: int, after_round=None) -> dict[str, Measured]:
    """Each command once per round, in order, for ``repeats`` rounds (``after_round()`` after each)."""
    results = {name: Measured([], []) for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            status, seconds, cpu, peak, stderr = _timed(command)
            if status != 0:
                raise RuntimeError(f"{' '.join(command[:4])} ... failed (exit {status}): {stderr.strip()[-500:]}")
            results[name].seconds.append(round(seconds, 2))
            results[name].cpu_seconds.append(round(cpu, 2))
            results[name].peak_rss_mib.append(round(peak, 1))
        if after_round is not None:
            after_round()
    return results


def _ratios(measured: Measured, baseline: Measured) -> dict[str, float]:
    return {"seconds": measured.median_seconds / baseline.median_seconds,
            "cpu_seconds": measured.median_cpu_seconds / baseline.median_cpu_seconds,
            "peak_rss": measured.median_peak_rss_mib / baseline.median_peak_rss_mib}


def measure_big_graph(gathers: int = 50_000, repeats: int = 1, folder: Path | None = None,
                      against: str | None = None) -> BigGraphRun:
    """Time ``rewrite`` of ``build_big_graph(gathers)`` against its floors, in interleaved fresh processes.

    Args:
        gathers: the number of Gather + Add links.
        repeats: interleaved rounds of fresh processes.
        folder: where the scratch folder goes (None: the system's temporary folder).
        against: another Python whose ``gathermultiaxis rewrite`` is timed in the same rounds (another
            checkout's environment), its output compared byte for byte with this one's.

    Returns:
        Each command's wall and CPU seconds and peak RSS, and whether every Gather was rewritten.
    """
    with tempfile.TemporaryDirectory(prefix="gathermultiaxis-graph-", dir=folder) as scratch_name:
        scratch = Path(scratch_name)
        source, target, other = scratch / "graph.onnx", scratch / "rewritten.onnx", scratch / "rewritten_against.onnx"
        model = build_big_graph(gathers)
        nodes = len(model.graph.node)
        onnx.save_model(model, str(source))
        del model
        commands = {"rewrite": [sys.executable, "-c", _REWRITE, "rewrite", str(source), "-o", str(target), "--force", "-q"]}
        if against is not None:
            commands["against"] = [against, "-c", _REWRITE, "rewrite", str(source), "-o", str(other), "--force", "-q"]
        commands |= {"load_infer_save": [sys.executable, "-c", _LOAD_INFER_SAVE, str(source), str(scratch / "saved.onnx")],
                     "ort_load": [sys.executable, "-c", _ORT_LOAD, str(source)],
                     "python_startup": [sys.executable, "-c", _REPORT_PEAK + "import onnx"]}
        same: list[bool] = []
        results = _measure_rounds(commands, repeats, None if against is None else
                                  lambda: same.append(target.read_bytes() == other.read_bytes()))
        output_loads = _graph_output_loads(target)
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        model_bytes = source.stat().st_size
    baseline = results["load_infer_save"]
    measured_against = results.get("against")
    return BigGraphRun(gathers, nodes, model_bytes, repeats, results["rewrite"], baseline, results["ort_load"],
                       results["python_startup"], _ratios(results["rewrite"], baseline), output_loads, digest,
                       measured_against, None if measured_against is None else _ratios(measured_against, baseline),
                       None if against is None else all(same))


def profile_big_graph(gathers: int, folder: Path | None = None) -> RewriteProfile:
    """``rewrite`` of ``build_big_graph(gathers)`` under cProfile in a fresh process (``rewrite_profile``)."""
    with tempfile.TemporaryDirectory(prefix="gathermultiaxis-graph-", dir=folder) as scratch:
        source = Path(scratch) / "graph.onnx"
        onnx.save_model(build_big_graph(gathers), str(source))
        return profile_rewrite(source, child_environment())


def _graph_output_loads(target: Path) -> bool:
    """The rewritten chain loads in ORT and every Gather became a GatherMultiaxis (not run: too slow)."""
    model = onnx.load(str(target))
    ops = {node.op_type for node in model.graph.node}
    return "Gather" not in ops and "GatherMultiaxis" in ops


def format_big_graph(run: BigGraphRun) -> str:
    """The report ``bench big-graph`` prints: a Markdown table and the ratios to onnx.load + infer_shapes + save."""

    def row(name: str, measured: Measured) -> str:
        return (f"| {name} | {measured.median_seconds:.2f} [{min(measured.seconds):.2f}-{max(measured.seconds):.2f}] | "
                f"{measured.median_cpu_seconds:.2f} [{min(measured.cpu_seconds):.2f}-{max(measured.cpu_seconds):.2f}] | "
                f"{measured.median_peak_rss_mib:.0f} [{min(measured.peak_rss_mib):.0f}-"
                f"{max(measured.peak_rss_mib):.0f}] |")

    def ratios(name: str, ratio: dict[str, float]) -> str:
        return (f"{name} / (load + infer_shapes + save): {ratio['cpu_seconds']:.2f}x CPU time, "
                f"{ratio['seconds']:.2f}x time, {ratio['peak_rss']:.2f}x peak RSS")

    lines = [f"{run.nodes} nodes, {run.gathers} Gathers, {run.model_bytes / 2**20:.1f} MiB; fresh processes, "
             f"{run.repeats} interleaved round(s), median [min-max]",
             "| command | seconds | CPU seconds (user + sys) | peak RSS MiB |", "|---|---|---|---|",
             row("gathermultiaxis rewrite", run.rewrite)]
    if run.against is not None:
        lines.append(row("gathermultiaxis rewrite (--against)", run.against))
    lines += [row("onnx.load + infer_shapes + save", run.load_infer_save),
              row("ORT loads the input (a plain session)", run.ort_load),
              row("python -c 'import onnx'", run.python_startup),
              ratios("rewrite", run.rewrite_over_load_infer_save)
              + f"; every Gather rewritten: {'yes' if run.output_loads else 'NO'}; output sha256 {run.output_sha256[:16]}"]
    if run.against_over_load_infer_save is not None:
        lines.append(ratios("rewrite (--against)", run.against_over_load_infer_save)
                     + f"; same output bytes in every round: {'yes' if run.same_output else 'NO'}")
    return "\n".join(lines)
