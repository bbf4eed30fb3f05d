"""``gathermultiaxis bench runtime``: the models a user meets, through both entry points.

The copy floor is the least a PyOp can do (the gathers in NumPy plus one copy out); odd and even repeats'
ratios show whether the repeats are enough."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper

from ..ops.alignment import GATHER_ELEMENTS, GATHER_ND
from ..graphs import rewrite_model
from ..harness import IR_VERSION, bit_identical, make_session
from .timing import interleaved

OPSET = 17
ENTRIES = ("builtin", "InferenceSession", "InferenceSession, kernel", "session_options", "copy floor")
KERNEL = "InferenceSession, kernel"  # the entry that runs every node on the kernel (the custom-op path itself)


@dataclass
class RuntimeWorkload:
    name: str
    model: ModelProto
    feeds: dict
    floor: Callable[[], object]  # the gathers in NumPy plus one copy of each output
    target: str = ""             # the target for InferenceSession / builtin, if any


@dataclass
class RuntimeResult:
    name: str
    medians_ms: dict[str, float] = field(default_factory=dict)
    spread_ms: dict[str, tuple[float, float]] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)
    halves: dict[str, tuple[float, float]] = field(default_factory=dict)  # ratio on odd / even repeats
    target: str = ""


def _model(nodes, inputs, outputs, initializers=()) -> ModelProto:
    graph = helper.make_graph(nodes, "runtime_bench", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def _embedding(name, table: np.ndarray, ids: np.ndarray, target: str) -> RuntimeWorkload:
    value = helper.make_tensor_value_info
    model = _model([helper.make_node("Gather", ["table", "ids"], ["out"], axis=0)],
                   [value("ids", TensorProto.INT64, list(ids.shape))],
                   [value("out", helper.np_dtype_to_tensor_dtype(table.dtype), None)],
                   [numpy_helper.from_array(table, "table")])
    return RuntimeWorkload(name, model, {"ids": ids}, lambda: np.array(np.take(table, ids, axis=0), copy=True), target)


def _int8_embedding(rng) -> RuntimeWorkload:
    table = rng.integers(-128, 128, (30522, 384), dtype=np.int8)
    ids = rng.integers(0, table.shape[0], (1, 128))
    value = helper.make_tensor_value_info
    nodes = [helper.make_node("Gather", ["table", "ids"], ["q"], axis=0),
             helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["out"])]
    model = _model(nodes, [value("ids", TensorProto.INT64, [1, 128])], [value("out", TensorProto.FLOAT, None)],
                   [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array(0.02, np.float32), "scale"),
                    numpy_helper.from_array(np.array(3, np.int8), "zero")])
    return RuntimeWorkload("int8 [30522, 384] + DequantizeLinear, ids [1, 128]", model, {"ids": ids},
                           lambda: np.array(np.take(table, ids, axis=0), copy=True))


def detection_workloads(rng) -> list[RuntimeWorkload]:
    """YOLO-style post-processing of [1, 25200, 85] predictions: TopK 100 + GatherElements, and NonZero + GatherND."""
    x = rng.random((1, 25200, 85), dtype=np.float32)
    value = helper.make_tensor_value_info
    ints = (lambda name, values: numpy_helper.from_array(np.array(values, np.int64), name))
    score_nodes = [helper.make_node("Slice", ["x", "four", "five", "two"], ["score3"]),
                   helper.make_node("Squeeze", ["score3", "two"], ["scores"])]
    common = [ints("four", [4]), ints("five", [5]), ints("two", [2])]
    topk = _model(score_nodes + [
        helper.make_node("TopK", ["scores", "k"], ["top", "idx"], axis=1),
        helper.make_node("Unsqueeze", ["idx", "two"], ["idx3"]),
        helper.make_node("Expand", ["idx3", "expand_shape"], ["idx85"]),
        helper.make_node(GATHER_ELEMENTS, ["x", "idx85"], ["boxes"], axis=1)],
        [value("x", TensorProto.FLOAT, [1, 25200, 85])], [value("boxes", TensorProto.FLOAT, None)],
        common + [ints("k", [100]), ints("expand_shape", [1, 100, 85])])
    order = np.argsort(-x[0, :, 4], kind="stable")[:100]

    def topk_floor():
        index = np.broadcast_to(order[None, :, None], (1, 100, 85))
        return np.array(np.take_along_axis(x, index, axis=1), copy=True)

    nonzero = _model(score_nodes + [
        helper.make_node("Greater", ["scores", "threshold"], ["keep"]),
        helper.make_node("NonZero", ["keep"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["coords"], perm=[1, 0]),
        helper.make_node(GATHER_ND, ["x", "coords"], ["kept"])],
        [value("x", TensorProto.FLOAT, [1, 25200, 85])], [value("kept", TensorProto.FLOAT, None)],
        common + [numpy_helper.from_array(np.array(0.9, np.float32), "threshold")])
    coords = np.argwhere(x[..., 4] > 0.9)
    return [RuntimeWorkload(f"detection [1, 25200, 85]: TopK 100 + {GATHER_ELEMENTS}", topk, {"x": x}, topk_floor),
            RuntimeWorkload(f"detection [1, 25200, 85]: NonZero + {GATHER_ND}", nonzero, {"x": x},
                            lambda: np.array(x[coords[:, 0], coords[:, 1]], copy=True))]


def tiny_workload(rng) -> RuntimeWorkload:
    """Shape then Gather of one element: the per-call overhead."""
    x = rng.standard_normal((2, 3)).astype(np.float32)
    value = helper.make_tensor_value_info
    model = _model([helper.make_node("Shape", ["x"], ["shape"]),
                    helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0)],
                   [value("x", TensorProto.FLOAT, [None, 3])], [value("batch", TensorProto.INT64, [])],
                   [numpy_helper.from_array(np.array(0, np.int64), "zero")])
    shape = np.array(x.shape, dtype=np.int64)
    return RuntimeWorkload("tiny shape gather (per-call overhead)", model, {"x": x},
                           lambda: np.array(np.take(shape, 0), copy=True), "<= builtin + 5 us")


def runtime_workloads(seed: int = 0) -> list[RuntimeWorkload]:
    """The models a user meets, in the report's order: GPT-2 embeddings (float32, float16, int8), detection,
    the tiny shape gather."""
    rng = np.random.default_rng(seed)
    gpt2 = rng.standard_normal((50257, 768)).astype(np.float32)
    half = gpt2.astype(np.float16)
    short, long = rng.integers(0, 50257, (1, 128)), rng.integers(0, 50257, (8, 512))
    return [
        _embedding("GPT-2 embedding float32 [50257, 768], ids [1, 128]", gpt2, short, "<= 3x builtin"),
        _embedding("GPT-2 embedding float32 [50257, 768], ids [8, 512]", gpt2, long, "<= 1.5x builtin"),
        _embedding("GPT-2 embedding float16 [50257, 768], ids [1, 128]", half, short, "<= 3x builtin"),
        _embedding("GPT-2 embedding float16 [50257, 768], ids [8, 512]", half, long, ""),
        _int8_embedding(rng),
        *detection_workloads(rng),
        tiny_workload(rng),
    ]


def _sessions(workload: RuntimeWorkload):
    import onnxruntime as ort

    from ..ops import session_options

    rewritten = rewrite_model(workload.model)[0]
    builtin = make_session(workload.model, custom=False, as_users_do=True)
    package = make_session(rewritten, custom=True, as_users_do=True)
    kernel = make_session(rewritten, custom=True, as_users_do=True, run_builtin_gathers=False)
    plain = ort.InferenceSession(rewritten.SerializeToString(), session_options(ort.SessionOptions()),
                                 providers=["CPUExecutionProvider"])
    return builtin, package, kernel, plain


def measure(workload: RuntimeWorkload, repeats: int) -> RuntimeResult:
    """Time one workload on every entry point and the copy floor, interleaved (``repeats`` samples each): medians,
    10th-90th percentile spreads, ratios to builtin and each ratio on the odd and even samples. Raises
    AssertionError when a rewritten run's output is not bit-identical to builtin's."""
    builtin, package, kernel, plain = _sessions(workload)
    expected = builtin.run(None, workload.feeds)
    for sess in (package, kernel, plain):
        if not all(bit_identical(a, e) for a, e in zip(sess.run(None, workload.feeds), expected)):
            raise AssertionError(f"{workload.name}: the rewritten model's output differs from the builtin one")
    calls = {"builtin": lambda: builtin.run(None, workload.feeds),
             "InferenceSession": lambda: package.run(None, workload.feeds),
             KERNEL: lambda: kernel.run(None, workload.feeds),
             "session_options": lambda: plain.run(None, workload.feeds),
             "copy floor": workload.floor}
    samples = interleaved(calls, repeats, warmups=2)
    result = RuntimeResult(workload.name, target=workload.target)
    for name, values in samples.items():
        result.medians_ms[name] = float(np.median(values))
        result.spread_ms[name] = (float(np.percentile(values, 10)), float(np.percentile(values, 90)))
    for name in ENTRIES[1:]:
        result.ratios[f"{name} / builtin"] = result.medians_ms[name] / result.medians_ms["builtin"]
        halves = [float(np.median(samples[name][h::2]) / np.median(samples["builtin"][h::2])) for h in (0, 1)]
        result.halves[f"{name} / builtin"] = (halves[0], halves[1])
    for name in ("InferenceSession", KERNEL):
        result.ratios[f"{name} - builtin (us)"] = (result.medians_ms[name] - result.medians_ms["builtin"]) * 1e3
    return result


def run_runtime_bench(repeats: int = 41, progress=None) -> list[RuntimeResult]:
    """One ``measure`` per workload of ``runtime_workloads``; ``progress(name)`` is called before each."""
    results = []
    for workload in runtime_workloads():
        if progress:
            progress(workload.name)
        results.append(measure(workload, repeats))
    return results


def format_runtime_report(results: list[RuntimeResult]) -> str:
    """The report ``bench runtime`` prints for ``run_runtime_bench``'s results."""
    lines = []
    for r in results:
        lines.append(r.name + (f"  (target: InferenceSession {r.target})" if r.target else ""))
        for name in ENTRIES:
            low, high = r.spread_ms[name]
            lines.append(f"  {name:<26}{r.medians_ms[name]:10.4f} ms  [p10-p90 {low:.4f}-{high:.4f}]")
        for name, (odd, even) in r.halves.items():
            lines.append(f"  {name:<36}{r.ratios[name]:8.2f}  (odd repeats {odd:.2f}, even repeats {even:.2f})")
        for name in ("InferenceSession", KERNEL):
            lines.append(f"  {name} - builtin: {r.ratios[f'{name} - builtin (us)']:.1f} us")
    lines += ["", "| workload | builtin ms | " + " | ".join(f"{name} / builtin" for name in ENTRIES[1:]) + " | target |",
              "|---" * (len(ENTRIES) + 2) + "|"]
    for r in results:
        lines.append(f"| {r.name} | {r.medians_ms['builtin']:.4f} | "
                     + " | ".join(f"{r.ratios[f'{name} / builtin']:.2f}" for name in ENTRIES[1:])
                     + f" | {r.target or '-'} |")
    return "\n".join(lines)


# The steps of the call path and how to switch each one off (register's CallPath and hook, the session's BindOptions).
CALL_PATH_STEPS = ("own invocation hook", "1-D take shortcut", "bound take shortcut", "axes as an attribute",
                   "alignment absorbed", "float16 output")
_BIND_STEPS = {"axes as an attribute": "fixed_axes", "alignment absorbed": "absorb_alignment",
               "float16 output": "float16_output"}


def _call_path_workloads(rng) -> list[RuntimeWorkload]:
    table = rng.standard_normal((1000, 64)).astype(np.float32)
    ids = rng.integers(0, 1000, (1, 8))
    return [tiny_workload(rng), _embedding("bound embedding float32 [1000, 64], ids [1, 8]", table, ids, ""),
            _embedding("bound embedding float16 [1000, 64], ids [1, 8]", table.astype(np.float16), ids, "")]


def _register_without(step: str | None) -> None:
    """Register the op types with every runtime step of the call path, or all but ``step``."""
    from ..ops.runtime.registration import CallPath, register

    off = {"1-D take shortcut": "take_1d", "bound take shortcut": "take_bound"}.get(step or "")
    register(hook=step != "own invocation hook", call_path=CallPath(**({off: False} if off else {})))


def _session_without(model: ModelProto, step: str):
    """A kernel-only session whose bind step leaves out the node form ``step``."""
    from ..ops.runtime.bind import BindOptions
    from ..ops.runtime.session import InferenceSession

    return InferenceSession(model, providers=["CPUExecutionProvider"], run_builtin_gathers=False,
                            bind_options=BindOptions(**{_BIND_STEPS[step]: False}))


def call_path_breakdown(repeats: int = 21, calls: int = 300) -> list[dict]:
    """Calling-thread CPU us per run of tiny models, per call-path variant (each step switched off in turn):
    rows of ``workload``, ``variant``, ``median_us``, ``p10_us``, ``p90_us``."""
    rows = []
    _register_without(None)
    for workload in _call_path_workloads(np.random.default_rng(0)):
        rewritten = rewrite_model(workload.model)[0]
        variants = {"builtin": make_session(workload.model, custom=False, as_users_do=True)}
        variants["default session"] = make_session(rewritten, custom=True, as_users_do=True)
        variants["all steps"] = make_session(rewritten, custom=True, as_users_do=True, run_builtin_gathers=False)
        for step in _BIND_STEPS:
            variants[f"without {step}"] = _session_without(rewritten, step)
        runtime_steps = {f"without {step}": step
                         for step in ("own invocation hook", "1-D take shortcut", "bound take shortcut")}
        for name in runtime_steps:
            variants[name] = variants["all steps"]
        expected = variants["builtin"].run(None, workload.feeds)
        @contextlib.contextmanager
        def switched_off(name, feeds=workload.feeds, expected=expected, workload_name=workload.name):
            """The variant's runtime step off while its sample is taken, and its output checked first."""
            step = runtime_steps.get(name)
            if step:
                _register_without(step)
            try:
                got = variants[name].run(None, feeds)
                if not all(bit_identical(a, e) for a, e in zip(got, expected)):
                    raise AssertionError(f"{workload_name}, {name}: output differs from builtin")
                yield
            finally:
                if step:
                    _register_without(None)

        runs = {name: (lambda sess=sess: sess.run(None, workload.feeds)) for name, sess in variants.items()}
        samples = interleaved(runs, repeats, warmups=0, clock=time.thread_time, scale=1e6, per_sample=calls,
                              around=switched_off)
        for name, values in samples.items():
            rows.append({"workload": workload.name, "variant": name, "median_us": float(np.median(values)),
                         "p10_us": float(np.percentile(values, 10)), "p90_us": float(np.percentile(values, 90))})
    return rows


def format_call_path_breakdown(rows: list[dict]) -> str:
    """``call_path_breakdown``'s rows as a Markdown table, each variant also minus builtin."""
    lines = ["| workload | variant | calling-thread CPU us per run | p10-p90 | minus builtin |", "|---|---|---|---|---|"]
    builtin = {row["workload"]: row["median_us"] for row in rows if row["variant"] == "builtin"}
    for row in rows:
        lines.append(f"| {row['workload']} | {row['variant']} | {row['median_us']:.1f} | "
                     f"{row['p10_us']:.1f}-{row['p90_us']:.1f} | {row['median_us'] - builtin[row['workload']]:+.1f} |")
    return "\n".join(lines)


def per_call_breakdown(repeats: int = 21, calls: int = 300) -> dict[str, float]:
    """Median calling-thread CPU us per run of the tiny shape gather, by variant (``call_path_breakdown``)."""
    return {row["variant"]: row["median_us"] for row in call_path_breakdown(repeats, calls)
            if row["workload"].startswith("tiny")}


# ---------------------------------------------------------------- one crossing per kernel form

FORM_VARIANTS = ("builtin", "fast plan", "without fast plan")


def _one_gather(op_type: str, data: np.ndarray, indices: np.ndarray, constant: bool = False, **attributes):
    """One standard gather of ``data`` (an input, or an initializer when ``constant``) at ``indices`` (an input)."""
    value = helper.make_tensor_value_info
    elem = helper.np_dtype_to_tensor_dtype(data.dtype)
    inputs = [value("i", TensorProto.INT64, list(indices.shape))]
    if not constant:
        inputs.insert(0, value("x", elem, list(data.shape)))
    model = _model([helper.make_node(op_type, ["x", "i"], ["out"], **attributes)], inputs,
                   [value("out", elem, None)], [numpy_helper.from_array(data, "x")] if constant else [])
    return model, ({"i": indices} if constant else {"x": data, "i": indices})


def _run_time_gather(data: np.ndarray, indices: np.ndarray):
    """A Gather whose ranks no inference finds (Reshape to a shape input): the rewrite aligns at run time."""
    value = helper.make_tensor_value_info
    nodes = [helper.make_node("Reshape", ["flat", "shape"], ["x"]),
             helper.make_node("Gather", ["x", "i"], ["out"], axis=1)]
    model = _model(nodes, [value("flat", TensorProto.FLOAT, [data.size]), value("shape", TensorProto.INT64, [None]),
                           value("i", TensorProto.INT64, None)], [value("out", TensorProto.FLOAT, None)])
    return model, {"flat": data.reshape(-1), "shape": np.array(data.shape, np.int64), "i": indices}


def _group_gathers(rng):
    """Two Gathers of constant float32 and int64 tables at the same indices (a tree ensemble's step)."""
    value = helper.make_tensor_value_info
    nodes = [helper.make_node("Gather", ["values", "i"], ["a"], axis=0),
             helper.make_node("Gather", ["features", "i"], ["b"], axis=0)]
    tables = [numpy_helper.from_array(rng.standard_normal(255).astype(np.float32), "values"),
              numpy_helper.from_array(rng.integers(0, 16, 255), "features")]
    model = _model(nodes, [value("i", TensorProto.INT64, [1, 32])],
                   [value("a", TensorProto.FLOAT, None), value("b", TensorProto.INT64, None)], tables)
    return model, {"i": rng.integers(0, 255, (1, 32))}


# The same model twice: the recorded form (one node that aligns per call), and the Run op with its ~25 ORT shape
# nodes (the recorded form switched off: what a node whose record the graph does not prove runs).
RUN_TIME_ALIGNED = "Gather, aligned at run time (recorded)"
RUN_TIME_ALIGNED_RUN_OP = "Gather, aligned at run time (Run op)"


def form_models(seed: int = 0) -> dict[str, tuple[ModelProto, dict]]:
    """(original model, feeds) by node form of the kernel path: small models over x [2, 16, 32], one bridge
    crossing a run each."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 16, 32)).astype(np.float32)
    return {
        "Gather (fixed axes)": _one_gather("Gather", x, rng.integers(0, 16, (5,)), axis=1),
        f"{GATHER_ELEMENTS} (fixed axes)": _one_gather(GATHER_ELEMENTS, x, rng.integers(0, 32, (2, 16, 4)), axis=2),
        f"{GATHER_ND} (fixed axes)": _one_gather(GATHER_ND, x, rng.integers(0, 2, (6, 2))),
        RUN_TIME_ALIGNED: _run_time_gather(x, rng.integers(0, 16, (5,))),
        RUN_TIME_ALIGNED_RUN_OP: _run_time_gather(x, rng.integers(0, 16, (5,))),
        "1-D shape arithmetic": (tiny_workload(rng).model, {"x": rng.standard_normal((2, 3)).astype(np.float32)}),
        "bound, embedding take": _one_gather("Gather", rng.standard_normal((1000, 64)).astype(np.float32),
                                             rng.integers(0, 1000, (1, 8)), constant=True, axis=0),
        f"bound, {GATHER_ELEMENTS}": _one_gather(GATHER_ELEMENTS, x, rng.integers(0, 32, (2, 16, 4)), constant=True, axis=2),
        "bound group of 2 tables": _group_gathers(rng),
        "plain op (session_options())": _one_gather("Gather", x, rng.integers(0, 16, (5,)), axis=1),
    }


def _form_sessions(form: str, model: ModelProto):
    """Builtin on the original, and the form's session on the rewrite: one intra-op thread each (ORT computes
    on the calling thread, so its CPU time is the run's cost)."""
    import onnxruntime as ort

    from ..ops import session_options
    from ..ops.runtime.session import InferenceSession

    def options():
        made = ort.SessionOptions()
        made.intra_op_num_threads, made.log_severity_level = 1, 3
        return made

    rewritten = rewrite_model(model)[0]
    builtin = ort.InferenceSession(model.SerializeToString(), options(), providers=["CPUExecutionProvider"])
    if form.startswith("plain op"):
        return builtin, ort.InferenceSession(rewritten.SerializeToString(), session_options(options()),
                                             providers=["CPUExecutionProvider"])
    from ..ops.runtime.bind import BindOptions

    bind_options = BindOptions(recorded_form=form != RUN_TIME_ALIGNED_RUN_OP)
    return builtin, InferenceSession(rewritten, options(), providers=["CPUExecutionProvider"], run_builtin_gathers=False,
                                     bind_options=bind_options)


def form_breakdown(repeats: int = 31, calls: int = 200, seed: int = 0) -> list[dict]:
    """Calling-thread CPU us per run of each ``form_models`` model: builtin, and the kernel path with and without
    the fast plan (``CallPath.fast_plan``), interleaved, outputs checked against builtin first. Rows: ``form``,
    ``crossings`` and per variant ``median_us``, ``p10_us``, ``p90_us``."""
    from ..ops.runtime.registration import CallPath, count_crossings, register

    rows = []
    paths = {"fast plan": CallPath(), "without fast plan": CallPath(fast_plan=False)}
    try:
        for form, (model, feeds) in form_models(seed).items():
            builtin, kernel = _form_sessions(form, model)
            expected = builtin.run(None, feeds)
            for path in paths.values():
                register(call_path=path)
                if not all(bit_identical(a, e) for a, e in zip(kernel.run(None, feeds), expected)):
                    raise AssertionError(f"{form}: the kernel path's output differs from builtin")
            register()
            crossings = count_crossings(lambda: kernel.run(None, feeds))[1]
            runs = {"builtin": lambda: builtin.run(None, feeds),
                    **{name: lambda: kernel.run(None, feeds) for name in paths}}
            samples = interleaved(runs, repeats, warmups=3, clock=time.thread_time, scale=1e6, per_sample=calls,
                                  around=lambda name: _call_path(paths.get(name)))
            row: dict = {"form": form, "crossings": crossings}
            for name, values in samples.items():
                row[name] = {"median_us": float(np.median(values)), "p10_us": float(np.percentile(values, 10)),
                             "p90_us": float(np.percentile(values, 90))}
            rows.append(row)
    finally:
        register()
    return rows


@contextlib.contextmanager
def _call_path(path):
    """``path`` registered while a sample is taken (None: leave the registration as it is)."""
    from ..ops.runtime.registration import register

    if path is not None:
        register(call_path=path)
    yield


def format_form_breakdown(rows: list[dict]) -> str:
    """``form_breakdown``'s rows as a Markdown table: us per run over builtin, with and without the fast plan."""
    lines = ["| form (one crossing a run) | builtin us | fast plan: us over builtin | without: us over builtin "
             "| fast plan p10-p90 | crossings |", "|---|---|---|---|---|---|"]
    for row in rows:
        base = row["builtin"]["median_us"]
        over = {name: row[name]["median_us"] - base for name in FORM_VARIANTS[1:]}
        fast = row["fast plan"]
        lines.append(f"| {row['form']} | {base:.1f} | {over['fast plan']:+.1f} | {over['without fast plan']:+.1f} | "
                     f"{fast['p10_us'] - base:+.1f}-{fast['p90_us'] - base:+.1f} | {row['crossings']} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- resident memory

def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _rss_child(path: str, runs: int) -> dict:
    """In a fresh process: RSS before the session, after creating it, after 10 runs and after ``runs``."""
    import gc

    import onnxruntime  # noqa: F401 - imported before the baseline, as the session needs it

    from ..ops import InferenceSession

    ids = np.random.default_rng(0).integers(0, 1000, (8, 512))
    gc.collect()
    baseline = _resident_bytes()
    sess = InferenceSession(path, providers=["CPUExecutionProvider"], run_builtin_gathers=False)  # the bound table
    gc.collect()
    created = _resident_bytes()
    for _ in range(10):
        sess.run(None, {"ids": ids})
    warm = _resident_bytes()
    for _ in range(runs - 10):
        sess.run(None, {"ids": ids})
    return {"baseline": baseline, "created": created, "after_10_runs": warm, f"after_{runs}_runs": _resident_bytes(),
            "bound_tables": sess.bound_tables}


def rss_over_bound_table(table_mb: int = 150, runs: int = 1000, external: bool = False) -> dict:
    """Resident memory of an InferenceSession over a bound float32 table of ``table_mb`` MB (inline, or
    ``external`` data memory-mapped by ORT) in a child process making ``runs`` [8, 512] runs: RSS in bytes at
    each step, ``table_bytes``, ``session_over_table`` and ``growth_10_to_end``."""
    rows = table_mb * 10**6 // (768 * 4)
    table = np.random.default_rng(0).standard_normal((rows, 768)).astype(np.float32)
    model = _embedding("rss", table, np.zeros((8, 512), np.int64), "").model
    rewritten = rewrite_model(model)[0]
    del model
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        onnx.save(rewritten, path, save_as_external_data=external, location="table.bin")
        del rewritten
        code = (f"import json, sys; from gathermultiaxis.bench.runtime import _rss_child; "
                f"print(json.dumps(_rss_child({path!r}, {runs})))")
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(child.stdout.strip().splitlines()[-1])
    result["table_bytes"] = int(table.nbytes)
    result["session_over_table"] = (result["created"] - result["baseline"]) / table.nbytes
    result["growth_10_to_end"] = result[f"after_{runs}_runs"] - result["after_10_runs"]
    return result


def format_rss(result: dict, external: bool) -> str:
    """One line of the report for ``rss_over_bound_table``'s result."""
    mib = (lambda b: f"{b / 2**20:.1f} MiB")
    runs = next(k for k in result if k.startswith("after_") and k != "after_10_runs")
    return (f"RSS over a bound {mib(result['table_bytes'])} table ({'external data, memory-mapped' if external else 'inline'}):"
            f" session creation added {mib(result['created'] - result['baseline'])} "
            f"({result['session_over_table']:.2f}x the table); {runs.replace('_', ' ')}: "
            f"{mib(result[runs] - result['baseline'])} over the baseline, "
            f"{result['growth_10_to_end'] / 2**20:+.1f} MiB after the first 10 runs")
