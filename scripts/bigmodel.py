"""Peak memory of ``gathermultiaxis rewrite`` on a model over protobuf's 2 GB limit.

``gathermultiaxis bench --big-model [GB] [--big-model-folder DIR] [--ort-optimize]`` builds a model whose
embedding table (the data of a Gather, ``--gb`` gigabytes of float32) lives in a sparse external-data
file (holes read as zeros, so it takes no disk space), rewrites it in a child process, and prints the
child's peak resident set size (``ru_maxrss`` from ``os.wait4``), the size of the written files and
whether the rewritten model gives the original's rows. Not a test: it needs a few GB of free disk when
the file system does not keep holes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .harness import IR_VERSION

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
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_maxrss / 1024, stderr  # ru_maxrss is in KiB on Linux


def measure(gigabytes: float = 2.2, folder: Path | None = None, ort_optimize: bool = False) -> BigModelRun:
    with tempfile.TemporaryDirectory(prefix="gathermultiaxis-big-", dir=folder) as scratch:
        scratch = Path(scratch)
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

    from .ops.ortop import session_options

    feeds = {"ids": np.array([*_MARKED_ROWS, 1], np.int64)}
    want = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = ort.InferenceSession(str(target), session_options(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    return (want.dtype == got.dtype and want.shape == got.shape and want.tobytes() == got.tobytes()
            and len({row.tobytes() for row in want}) == len(feeds["ids"]))
