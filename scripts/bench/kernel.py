"""``gathermultiaxis bench``: speed and memory of GatherMultiaxis, as ratios measured in one run.

Every entry runs on the same arrays in one process; the PyOp bridge's floor is one copy of the inputs plus
the kernel; the kernel's peak memory is taken by tracemalloc in an untimed call."""

from __future__ import annotations

import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

from ..ops.alignment import GATHER_ELEMENTS, GATHER_ND
from ..graphs import lower_model, rewrite_model
from ..graphs.ranks.tensor_info import TensorInfo
from ..graphs.sources.registry import RULES
from ..graphs.sources.source_gather import OptInRule
from ..harness import IR_VERSION, make_session, single_gather_model, tensor_type_of
from ..ops import gather_multiaxis
from ..ops.contract import DOMAIN, OP_TYPE, Mode
from .timing import interleaved


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float

    def text(self) -> str:
        """The timing as the report prints it."""
        return f"{self.median_ms:9.3f} ms [{self.min_ms:.3f}-{self.max_ms:.3f}]"


@dataclass
class Workload:
    name: str
    model: ModelProto            # the original model (builtin gathers)
    feeds: dict
    kernel: Callable[[], np.ndarray]  # the gather_multiaxis call the rewritten graph makes
    numpy: Callable[[], np.ndarray]   # the idiomatic NumPy for the same result
    op_inputs: list                   # the arrays the bridge copies into the op
    rewritten: ModelProto | None = None  # default: rewrite_model(model)
    rewritten_feeds: dict | None = None  # default: feeds
    notes: list[str] = field(default_factory=list)


@dataclass
class Result:
    name: str
    output_elements: int
    times: dict[str, Timing | None] = field(default_factory=dict)
    ratios: dict[str, float | None] = field(default_factory=dict)
    kernel_peak_extra_bytes: int = 0
    notes: list[str] = field(default_factory=list)


def _time(call, repeats: int, cap_s: float | None = None) -> Timing | None:
    """Median ms after a warm-up; one run only when it takes over ``cap_s`` / 3; None when the call fails."""
    start = time.perf_counter()
    try:
        call()  # warm-up (and the only run when it takes longer than the cap)
    except Exception:  # noqa: BLE001 - e.g. the reference evaluator failing on a workload
        return None
    first = time.perf_counter() - start
    if cap_s is not None and first > cap_s / 3:
        return Timing(first * 1e3, first * 1e3, first * 1e3)
    samples = interleaved({"call": call}, repeats, warmups=0)["call"]
    return Timing(float(np.median(samples)), min(samples), max(samples))


def _time_together(calls: dict[str, Callable], repeats: int) -> dict[str, Timing]:
    """Time several calls round-robin, so that the shared machine's drift favours none."""
    samples = interleaved(calls, repeats)
    return {name: Timing(float(np.median(v)), min(v), max(v)) for name, v in samples.items()}

_Size = TypeVar("_Size", int, tuple[int, ...])  # a benchmark's size: a count or a shape


def _single(op_type, data, indices, data_type=None, **attributes) -> ModelProto:
    return single_gather_model(op_type, data_type or tensor_type_of(data), tensor_type_of(indices), list(data.shape),
                               list(indices.shape), **attributes)


def _aligned_call(model: ModelProto, data, indices):
    """The gather_multiaxis call the rewrite of the model's one gather makes, by the rewriter's own rule."""
    node = model.graph.node[0]
    data_info, indices_info = (TensorInfo(value.type.tensor_type.elem_type, array.shape)
                               for value, array in zip(model.graph.input, (data, indices)))
    rule = RULES[node.op_type]
    assert not isinstance(rule, OptInRule), "the benchmark's models hold ONNX gathers only"
    replacement = rule(node, data_info, indices_info)
    alignment = replacement.alignment
    aligned_data = np.expand_dims(data, alignment.data_unsqueeze)
    aligned_indices = np.expand_dims(indices, alignment.indices_unsqueeze)
    return lambda: gather_multiaxis(aligned_data, aligned_indices, alignment.axes, replacement.mode)


def workloads(quick: bool, seed: int = 0) -> list[Workload]:
    """The kernel benchmark's workloads (see the module docstring)."""
    rng = np.random.default_rng(seed)

    def s(full: _Size, small: _Size) -> _Size:  # the full size, or the small one when quick
        return small if quick else full

    items = []

    def single(name, op_type, data, indices, numpy_call, **attributes):
        model = _single(op_type, data, indices, **attributes)
        items.append(Workload(name, model, {"data": data, "indices": indices}, _aligned_call(model, data, indices),
                              numpy_call, [data, indices]))

    table = rng.standard_normal(s((50000, 512), (2000, 64))).astype(np.float32)
    ids = rng.integers(0, table.shape[0], s((32, 256), (8, 64)))
    single("embedding (Gather axis 0, int64)", "Gather", table, ids, lambda: np.take(table, ids, axis=0), axis=0)
    ids32 = ids.astype(np.int32)
    single("embedding (Gather axis 0, int32)", "Gather", table, ids32, lambda: np.take(table, ids32, axis=0), axis=0)

    half = table.astype(np.float16)
    single("embedding float16 (Cast round trip)", "Gather", half, ids, lambda: np.take(half, ids, axis=0), axis=0)
    items[-1].notes = ["the kernel row gathers float16 directly; ORT runs Cast -> GatherMultiaxis(float32) -> Cast"]
    as_float = half.astype(np.float32)
    items[-1].op_inputs = [as_float, ids]  # what crosses the bridge: the float32 copy of the table

    rows = rng.standard_normal(s((4096, 1024), (256, 128))).astype(np.float32)
    picks = rng.integers(0, rows.shape[1], rows.shape)
    single(f"{GATHER_ELEMENTS} last axis", GATHER_ELEMENTS, rows, picks, lambda: np.take_along_axis(rows, picks, 1), axis=1)

    volume = rng.standard_normal(s((64, 256, 256), (16, 64, 64))).astype(np.float32)
    triples = np.stack([rng.integers(0, n, s(1 << 20, 1 << 15)) for n in volume.shape], axis=-1)
    single(f"{GATHER_ND} full coordinates", GATHER_ND, volume, triples, lambda: volume[tuple(triples.T)])

    batched = rng.standard_normal(s((60, 4, 1000, 64), (30, 2, 100, 35))).astype(np.float32)
    slices = rng.integers(0, batched.shape[2], s((60, 4, 200, 1), (30, 2, 3, 1)))
    single(f"{GATHER_ND} slices, batch_dims=2", GATHER_ND, batched, slices,
           lambda: np.take_along_axis(batched, slices, axis=2), batch_dims=2)

    items.append(_multiaxis_workload(rng, s))

    x = rng.standard_normal((2, 3)).astype(np.float32)
    zero = np.array(0, dtype=np.int64)
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], name="batch", axis=0)]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
                              [helper.make_tensor_value_info("batch", TensorProto.INT64, [])],
                              [numpy_helper.from_array(zero, "zero")])
    shape = np.array(x.shape, dtype=np.int64)
    aligned_zero = zero.reshape(1)
    items.append(Workload("tiny shape gather (per-call overhead)",
                          helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=IR_VERSION),
                          {"x": x}, lambda: gather_multiaxis(shape, aligned_zero, [0]), lambda: np.take(shape, zero),
                          [shape, zero]))
    return items


def _multiaxis_workload(rng, s) -> Workload:
    """(x, y) points from NHWC images, axes [2, 1]; baseline: GatherND batch_dims=1 on (y, x) pairs."""
    images = rng.standard_normal(s((8, 256, 256, 16), (2, 32, 32, 8))).astype(np.float32)
    points = s(8192, 512)
    xy = np.stack([rng.integers(0, images.shape[2], (images.shape[0], points)),
                   rng.integers(0, images.shape[1], (images.shape[0], points))], axis=-1)
    yx = xy[..., ::-1].copy()
    original = _single(GATHER_ND, images, yx, batch_dims=1)
    indices = xy.reshape(images.shape[0], points, 1, 2)  # [N, P, 1, 2]: x, y pairs
    aligned_images = images  # [N, H, W, C]
    node = helper.make_node(OP_TYPE, ["data", "indices", "axes"], ["output"], domain=DOMAIN, mode=Mode.ERROR.value)
    graph = helper.make_graph(
        [node], "multiaxis",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, list(images.shape)),
         helper.make_tensor_value_info("indices", TensorProto.INT64, list(indices.shape))],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([2, 1], dtype=np.int64), "axes")])
    rewritten = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)],
                                  ir_version=IR_VERSION)
    n = np.arange(images.shape[0])[:, None]
    return Workload("multiaxis (x, y) on NHWC, axes [2, 1]", original, {"data": images, "indices": yx},
                    lambda: gather_multiaxis(aligned_images, indices, [2, 1]),
                    lambda: images[n, xy[..., 1], xy[..., 0]], [images, indices], rewritten=rewritten,
                    rewritten_feeds={"data": images, "indices": indices})


def _kernel_peak_extra(workload: Workload) -> tuple[int, int]:
    """(peak bytes allocated during the kernel beyond its output, output elements)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    output = workload.kernel()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return max(peak - output.nbytes, 0), output.size


def _ratio(a: Timing | None, b: Timing | None) -> float | None:
    return None if a is None or b is None or b.median_ms == 0 else a.median_ms / b.median_ms


def run_bench(quick: bool = False, repeats: int | None = None, reference_cap_s: float = 30.0,
              progress: Callable[[str], None] | None = None) -> list[Result]:
    """Time every workload.

    Args:
        quick: the small workloads.
        repeats: interleaved samples per call; None: 15 (quick: 5).
        reference_cap_s: the onnx reference evaluator runs once only where that takes over a third of this.
        progress: called with each workload's name before it runs.

    Returns:
        One result per workload: its timings, ratios, peak memory and notes.
    """
    repeats = repeats or (5 if quick else 15)
    results = []
    for workload in workloads(quick):
        if progress:
            progress(workload.name)
        rewritten = workload.rewritten or rewrite_model(workload.model)[0]
        builtin = make_session(workload.model, custom=False, optimized=True)
        custom = make_session(rewritten, custom=True, optimized=True)
        lowered = make_session(lower_model(rewritten)[0], custom=False, optimized=True)  # plain ORT
        expected = builtin.run(None, workload.feeds)[0]
        custom_feeds = workload.rewritten_feeds or workload.feeds
        actual = custom.run(None, custom_feeds)[0]
        # dtype and bytes, not shape: the multiaxis workload's own model keeps a size-1 dim GatherND drops
        for side, output in (("rewritten", actual), ("lowered", lowered.run(None, custom_feeds)[0])):
            if expected.dtype != output.dtype or expected.tobytes() != output.tobytes():
                raise AssertionError(f"{workload.name}: the {side} model's output differs from the builtin one")
        kernel_out, numpy_out = workload.kernel(), np.asarray(workload.numpy())
        if kernel_out.reshape(-1).tobytes() != numpy_out.reshape(-1).tobytes():
            raise AssertionError(f"{workload.name}: the kernel and the idiomatic NumPy disagree")
        result = Result(workload.name, int(expected.size), notes=list(workload.notes))

        def bridge_floor(w=workload):
            for array in w.op_inputs:
                np.array(array, copy=True)
            return w.kernel()

        from onnx.reference import ReferenceEvaluator  # slow to import: only when benched

        reference = ReferenceEvaluator(workload.model)
        result.times = {
            **_time_together({"kernel": workload.kernel, "numpy": workload.numpy}, repeats),
            **_time_together({"ort builtin": lambda: builtin.run(None, workload.feeds),
                              "ort rewritten": lambda: custom.run(None, custom_feeds),
                              "ort lowered": lambda: lowered.run(None, custom_feeds),
                              "bridge floor": bridge_floor,
                              "output copy": lambda: np.array(kernel_out, copy=True)}, repeats),
            "onnx reference": _time(lambda: reference.run(None, workload.feeds), max(1, repeats // 3), reference_cap_s),
        }
        t = result.times
        floor, output_copy = t["bridge floor"], t["output copy"]
        assert floor is not None and output_copy is not None  # timed by _time_together, which skips nothing
        result.ratios = {
            "kernel / numpy": _ratio(t["kernel"], t["numpy"]),
            "ort rewritten / builtin": _ratio(t["ort rewritten"], t["ort builtin"]),
            "ort rewritten / bridge floor": _ratio(t["ort rewritten"], t["bridge floor"]),
            "ort rewritten / (bridge floor + output copy)": _ratio(
                t["ort rewritten"], Timing(floor.median_ms + output_copy.median_ms, 0, 0)),
            "onnx reference / ort rewritten": _ratio(t["onnx reference"], t["ort rewritten"]),
            "ort lowered / builtin": _ratio(t["ort lowered"], t["ort builtin"]),
            "ort lowered / rewritten": _ratio(t["ort lowered"], t["ort rewritten"]),
        }
        if t["ort rewritten"] and t["ort builtin"]:
            result.ratios["ort rewritten - builtin (us)"] = (t["ort rewritten"].median_ms - t["ort builtin"].median_ms) * 1e3
        copy = t["bridge floor"].median_ms - t["kernel"].median_ms if t["bridge floor"] and t["kernel"] else 0
        if t["ort rewritten"] and copy > 0.5 * t["ort rewritten"].median_ms:
            result.notes.append(f"the bridge's input copy ({copy:.2f} ms) is most of the rewritten run")
        if t["onnx reference"] is None:
            result.notes.append("the onnx reference evaluator failed on this workload")
        extra, elements = _kernel_peak_extra(workload)
        result.kernel_peak_extra_bytes = extra
        result.ratios["kernel peak extra / (8 B x output)"] = extra / (8 * elements) if elements else 0.0
        results.append(result)
    return results


def format_report(results: list[Result]) -> str:
    """The full report: every timing and ratio per workload, then ``summary_table``."""
    lines = []
    for r in results:
        lines.append(f"{r.name}  ({r.output_elements} output elements)")
        for name, timing in r.times.items():
            lines.append(f"  {name:<16}{timing.text() if timing else '        n/a'}")
        for name, value in r.ratios.items():
            lines.append(f"  {name:<38}{'n/a' if value is None else f'{value:8.2f}'}")
        for note in r.notes:
            lines.append(f"  note: {note}")
    lines.append("")
    lines.append(summary_table(results))
    return "\n".join(lines)


def summary_table(results: list[Result]) -> str:
    """The ratios as one Markdown table (the one docs/performance.md quotes)."""

    def f(value, digits=2):
        return "n/a" if value is None else f"{value:.{digits}f}"

    rows = ["| workload | kernel / NumPy | ORT rewritten / builtin | rewritten / bridge floor | rewritten / (floor + "
            "output copy) | builtin ms | rewritten ms | reference / rewritten | kernel peak extra / 8 B per output |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        t = r.times
        rows.append(f"| {r.name} | {f(r.ratios['kernel / numpy'])} | {f(r.ratios['ort rewritten / builtin'])} | "
                    f"{f(r.ratios['ort rewritten / bridge floor'])} | "
                    f"{f(r.ratios['ort rewritten / (bridge floor + output copy)'])} | "
                    f"{f(t['ort builtin'] and t['ort builtin'].median_ms, 3)} | "
                    f"{f(t['ort rewritten'] and t['ort rewritten'].median_ms, 3)} | "
                    f"{f(r.ratios['onnx reference / ort rewritten'], 1)} | {f(r.ratios['kernel peak extra / (8 B x output)'])} |")
    return "\n".join(rows)


def lowered_table(results: list[Result]) -> str:
    """The lowered model on plain ORT against ORT's builtin gathers and the rewritten model."""
    def f(value, digits=2):
        return "n/a" if value is None else f"{value:.{digits}f}"

    rows = ["| workload | ORT lowered / builtin | ORT lowered / rewritten | builtin ms | rewritten ms | lowered ms |",
            "|---|---|---|---|---|---|"]
    for r in results:
        t = r.times
        rows.append(f"| {r.name} | {f(r.ratios['ort lowered / builtin'])} | {f(r.ratios['ort lowered / rewritten'])} | "
                    f"{f(t['ort builtin'] and t['ort builtin'].median_ms, 3)} | "
                    f"{f(t['ort rewritten'] and t['ort rewritten'].median_ms, 3)} | "
                    f"{f(t['ort lowered'] and t['ort lowered'].median_ms, 3)} |")
    return "\n".join(rows)


def plot(results: list[Result], path: str | Path) -> None:
    """Draw the ratios as a bar chart (needs matplotlib, the ``bench`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    names = [r.name for r in results]
    series = ["kernel / numpy", "ort rewritten / builtin", "ort rewritten / bridge floor"]
    figure, axis = plt.subplots(figsize=(11, 5))
    width = 0.27
    for number, key in enumerate(series):
        values = [r.ratios.get(key) or 0 for r in results]
        axis.bar([i + (number - 1) * width for i in range(len(results))], values, width, label=key)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_yscale("log")
    axis.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    axis.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axis.set_xticks(range(len(results)), names, rotation=25, ha="right", fontsize=8)
    axis.set_ylabel("time ratio (lower is better)")
    axis.set_title("gathermultiaxis bench: ratios measured in one run")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
