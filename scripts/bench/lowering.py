"""``gathermultiaxis bench lowering [MODEL|FOLDER...]``: what the portable form costs.

Each model is rewritten and lowered with the user's defaults, compared bit for bit (ORT optimizations on
and off) and timed on plain onnxruntime as ``end_to_end`` does; on a busy shared machine the ratios are
noise (the same graph on both sides gave 0.72 to 2.06). Nothing asserts a timing.
"""

from __future__ import annotations

import collections
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper
from ..ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND

COLUMNS = ("original", "lowered")

# The lowering's goals (the figures are compared with them in the summary, never asserted).
GEOMEAN_GOAL = 1.05       # geometric mean of the models' time ratios
MODEL_GOAL = 1.25         # no model's time ratio over this
NODES_GOAL = 1.15         # no model's node ratio over this
KERNEL_GOAL = 1.1         # each kernel's time ratio against its builtin


@dataclass
class Subject:
    """One row's models: ``original`` and the form to lower (default: ``rewrite_model(original)``)."""
    name: str
    kind: str                       # "model" or "kernel"
    original: ModelProto
    feeds: dict
    inputs: str                     # where the inputs come from
    baseline: str = "original"      # what the lowered model is timed against
    multiaxis: ModelProto | None = None


@dataclass
class LoweringRow:
    name: str
    kind: str
    baseline: str
    inputs: str
    gathers_rewritten: int = 0      # GatherMultiaxis nodes the lowering was given
    gathers_left_by_rewrite: int = 0
    all_lowered: bool = False
    not_lowered: list[str] = field(default_factory=list)  # "node: reason" of each GatherMultiaxis left
    forms: dict[str, int] = field(default_factory=dict)   # lowered nodes by the form the lowering chose
    general: list[str] = field(default_factory=list)      # "node: reason" of each node in the general form
    bit_identical: bool | None = None              # under ORT's default session options (as timed)
    bit_identical_unoptimized: bool | None = None  # graph optimizations off
    nodes: dict[str, int] = field(default_factory=dict)        # without Constant nodes
    node_ratio: float | None = None
    op_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    median_ms: dict[str, float] = field(default_factory=dict)
    ratio: float | None = None                     # lowered / original: median over rounds of the ratio of medians
    spread: tuple[float, float] | None = None      # lowest, highest ratio of one round
    processes: int = 0
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- counting

def op_counts(model: ModelProto) -> dict[str, int]:
    """Nodes by op type (``domain::type`` outside the default domain), Constant nodes not counted.

    Args:
        model: the model.

    Returns:
        The count by op type.
    """
    from ..graphs.ir.walk import model_nodes

    counts = collections.Counter(node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
                                 for node in model_nodes(model)
                                 if not (node.op_type == "Constant" and node.domain in ("", "ai.onnx")))
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


# ---------------------------------------------------------------- kernels

OPSET = 18


def _model(nodes, inputs: dict[str, np.ndarray], output: str, output_type: int, initializers=(),
           custom: bool = False) -> ModelProto:
    from ..harness import IR_VERSION, tensor_type_of
    from ..ops.contract import DOMAIN

    graph = helper.make_graph(
        nodes, "kernel", [helper.make_tensor_value_info(name, tensor_type_of(array), list(array.shape))
                          for name, array in inputs.items()],
        [helper.make_tensor_value_info(output, output_type, None)], list(initializers))
    opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(DOMAIN, 1)] if custom else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def _ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def kernels(seed: int = 0) -> list[Subject]:
    """The benchmark kernels, each a one-gather model (with negative indices, which every builtin accepts).

    Args:
        seed: NumPy's random seed.

    Returns:
        One subject per kernel.
    """
    from ..ops.contract import DOMAIN, OP_TYPE, Mode

    rng = np.random.default_rng(seed)
    subjects = []
    node = helper.make_node

    table = rng.standard_normal((8192, 256)).astype(np.float32)
    ids = rng.integers(-8192, 8192, (8, 128))
    subjects.append(Subject(
        "embedding: Gather axis 0, table [8192, 256] (initializer), ids [8, 128]", "kernel",
        _model([node(GATHER, ["table", "ids"], ["out"], axis=0)], {"ids": ids}, "out", TensorProto.FLOAT,
               [numpy_helper.from_array(table, "table")]), {"ids": ids}, "built in code", "builtin Gather"))

    rows = rng.standard_normal((64, 1024)).astype(np.float32)
    picks = rng.integers(-1024, 1024, (64, 1024))
    subjects.append(Subject(
        f"{GATHER_ELEMENTS} last axis, [64, 1024]", "kernel",
        _model([node(GATHER_ELEMENTS, ["data", "indices"], ["out"], axis=-1)], {"data": rows, "indices": picks},
               "out", TensorProto.FLOAT), {"data": rows, "indices": picks}, "built in code", f"builtin {GATHER_ELEMENTS}"))

    volume = rng.standard_normal((64, 64, 64)).astype(np.float32)
    triples = rng.integers(-64, 64, (16384, 3))
    subjects.append(Subject(
        f"{GATHER_ND} full coordinates, data [64, 64, 64], indices [16384, 3]", "kernel",
        _model([node(GATHER_ND, ["data", "indices"], ["out"])], {"data": volume, "indices": triples}, "out",
               TensorProto.FLOAT), {"data": volume, "indices": triples}, "built in code", f"builtin {GATHER_ND}"))

    batched = rng.standard_normal((8, 512, 64)).astype(np.float32)
    slices = rng.integers(-512, 512, (8, 256, 1))
    subjects.append(Subject(
        f"{GATHER_ND} batch_dims=1, data [8, 512, 64], indices [8, 256, 1]", "kernel",
        _model([node(GATHER_ND, ["data", "indices"], ["out"], batch_dims=1)], {"data": batched, "indices": slices},
               "out", TensorProto.FLOAT), {"data": batched, "indices": slices}, "built in code",
        f"builtin {GATHER_ND} batch_dims=1"))

    # (y, x) or (x, y) points of each NHWC image: indices [N, P, 1, 2], output [N, P, 1, C]
    images = rng.standard_normal((4, 64, 64, 16)).astype(np.float32)
    points = np.stack([rng.integers(-64, 64, (4, 1024, 1)), rng.integers(-64, 64, (4, 1024, 1))], axis=-1)
    feeds: dict[str, np.ndarray] = {"images": images, "points": points}
    for axes, order in (([1, 2], "(y, x)"), ([2, 1], "(x, y)")):
        multiaxis = _model([node(OP_TYPE, ["images", "points", "axes"], ["out"], domain=DOMAIN, mode=Mode.ERROR.value)], feeds,
                           "out", TensorProto.FLOAT, [_ints("axes", axes)], custom=True)
        if axes == [1, 2]:  # the coordinates are GatherND's own, in axis order: one node
            hand = [node(GATHER_ND, ["images", "points"], ["out"], batch_dims=1)]
            baseline = f"hand-written: {GATHER_ND} batch_dims=1 (1 node)"
            constants = []
        else:  # the components swapped into axis order (a Gather of [1, 0] on the last axis), then GatherND
            hand = [node("Gather", ["points", "swap"], ["yx"], axis=-1),
                    node(GATHER_ND, ["images", "yx"], ["out"], batch_dims=1)]
            baseline = f"hand-written: Gather [1, 0] on the coordinates' axis + {GATHER_ND} batch_dims=1 (2 nodes)"
            constants = [_ints("swap", [1, 0])]
        subjects.append(Subject(
            f"multiaxis {order} on NHWC [4, 64, 64, 16], axes {axes}, points [4, 1024, 1, 2]", "kernel",
            _model(hand, feeds, "out", TensorProto.FLOAT, constants), feeds, "built in code", baseline, multiaxis))
    return subjects


def model_subjects(paths: list[Path], batch: int = 1, sequence: int = 16) -> list[Subject | LoweringRow]:
    """A Subject per model file; a LoweringRow with the reason for a file that cannot be read or fed.

    Args:
        paths: model files (inputs from ``NAME.inputs.npz`` beside each, else generated).
        batch: the size of a symbolic batch dim in generated inputs.
        sequence: the size of other symbolic dims in generated inputs.

    Returns:
        One item per path, in order.
    """
    from .end_to_end import model_feeds

    subjects: list[Subject | LoweringRow] = []
    for path in paths:
        try:
            model = onnx.load(str(path))
            feeds, shape = model_feeds(path, model, batch, sequence)
        except Exception as error:  # noqa: BLE001 - one unreadable model: the others still run
            subjects.append(LoweringRow(path.name, "model", "original", "-", notes=[f"cannot read or feed it: {error}"]))
            continue
        subjects.append(Subject(path.name, "model", model, feeds, shape))
    return subjects


# ---------------------------------------------------------------- one row, untimed part

def prepare(subject: Subject, stem: Path) -> LoweringRow:
    """Rewrite, lower, count and compare ``subject``; write the files the timed children read.

    Args:
        subject: a model or kernel with its inputs.
        stem: the path prefix of the written files.

    Returns:
        The row's untimed part: node and op counts, forms, bit-exactness (optimizations on and off).
    """
    from ..graphs import lower_model, rewrite_model
    from ..graphs.lower import GENERAL
    from ..graphs.ir.walk import model_nodes
    from ..harness import difference, make_session
    from ..ops.contract import DOMAIN, OP_TYPE, is_gather_multiaxis

    row = LoweringRow(subject.name, subject.kind, subject.baseline, subject.inputs)
    if subject.multiaxis is None:
        multiaxis, rewrite_report = rewrite_model(subject.original)
        row.gathers_left_by_rewrite = rewrite_report.left
        if rewrite_report.left:
            row.notes.append(f"the rewrite left {rewrite_report.left} gather(s) as they were")
    else:
        multiaxis = subject.multiaxis
    row.gathers_rewritten = sum(map(is_gather_multiaxis, model_nodes(multiaxis)))
    lowered, lower_report = lower_model(multiaxis)
    row.not_lowered = [f"{o.node} ({o.graph}): {o.reason}" for o in lower_report.left_outcomes()]
    row.forms = lower_report.forms()
    row.general = [f"{o.node} ({o.graph}): {o.reason}" for o in lower_report.outcomes
                   if o.lowered and o.form == GENERAL]
    left = op_counts(lowered).get(f"{DOMAIN}::{OP_TYPE}", 0)
    row.all_lowered = not row.not_lowered and not left
    row.op_counts = {"original": op_counts(subject.original), "lowered": op_counts(lowered)}
    row.nodes = {column: sum(counts.values()) for column, counts in row.op_counts.items()}
    row.node_ratio = row.nodes["lowered"] / row.nodes["original"] if row.nodes["original"] else None
    if not row.all_lowered:
        row.notes.append("not every GatherMultiaxis was lowered: plain ORT cannot run it, so it is not timed")
        return row
    sessions: list | None  # None once used: the sessions' threads gone before any child is timed
    for optimized, attribute in ((True, "bit_identical"), (False, "bit_identical_unoptimized")):
        try:
            # optimized: InferenceSession(model) with no options, as the timed children make it
            sessions = [make_session(model, custom=False, as_users_do=True) if optimized else
                        make_session(model, custom=False) for model in (subject.original, lowered)]
            expected, actual = (sess.run(None, subject.feeds) for sess in sessions)
        except Exception as error:  # noqa: BLE001 - e.g. ORT refusing one of the two models
            row.notes.append(f"could not run ({'default options' if optimized else 'optimizations off'}): "
                             f"{' '.join(str(error).split())[:300]}")
            return row
        finally:
            sessions = None  # the sessions' threads gone before any child is timed
        differences = [difference(a, e) for a, e in zip(actual, expected)]
        setattr(row, attribute, len(actual) == len(expected) and not any(differences))
        row.notes += [f"output {i} differs ({'default options' if optimized else 'optimizations off'}): {d}"
                      for i, d in enumerate(differences) if d]
    onnx.save_model(subject.original, f"{stem}.original.onnx")
    onnx.save_model(lowered, f"{stem}.lowered.onnx")
    np.savez(f"{stem}.inputs.npz", **subject.feeds)
    return row


# ---------------------------------------------------------------- timed part (in the children)

def time_in_this_process(model_path: str, feeds_path: str, repeats: int) -> dict:
    """A fresh process's task: ``{"samples": [ms, ...]}`` of the model on plain ORT, after a warm-up."""
    from ..harness import make_session
    from .timing import interleaved

    with np.load(feeds_path, allow_pickle=False) as arrays:
        feeds = {name: arrays[name] for name in arrays.files}
    sess = make_session(onnx.load(model_path), custom=False, as_users_do=True)
    return {"samples": interleaved({"run": lambda: sess.run(None, feeds)}, repeats)["run"]}


def run(items: list[str], with_kernels: bool = True, repeats: int = 41, processes: int = 2, batch: int = 1,
        sequence: int = 16, progress: Callable[[str], None] | None = None) -> list[LoweringRow]:
    """Every model of ``items`` and, with ``with_kernels``, the kernels: untimed part, then timed rounds.

    Args:
        items: model files or folders.
        with_kernels: also the kernels of ``kernels()``.
        repeats: timed runs per process.
        processes: rounds of fresh processes per model and column.
        batch: the size of a symbolic batch dim in generated inputs.
        sequence: the size of other symbolic dims in generated inputs.
        progress: called with a line per step, or None.

    Returns:
        One row per model and kernel, with the median time ratio and its per-round spread.
    """
    from .end_to_end import in_fresh_process, model_paths, round_ratios

    subjects = model_subjects(model_paths(items), batch, sequence) + (kernels() if with_kernels else [])
    rows: list[LoweringRow] = []
    with tempfile.TemporaryDirectory(prefix="lowering-bench-") as folder:
        timed: list[tuple[LoweringRow, str]] = []
        for number, subject in enumerate(subjects):
            stem = Path(folder) / f"{number:03d}"
            if isinstance(subject, LoweringRow):
                rows.append(subject)
                continue
            if progress:
                progress(f"{subject.name}: rewrite, lower, compare")
            try:
                row = prepare(subject, stem)
            except Exception as error:  # noqa: BLE001 - a pass crashing on one model: reported, the others run
                row = LoweringRow(subject.name, subject.kind, subject.baseline, subject.inputs,
                                  notes=[f"rewrite or lower failed: {type(error).__name__}: {error}"])
            rows.append(row)
            if row.bit_identical is not None:
                timed.append((row, str(stem)))
        rounds: list[list[dict[str, dict]]] = [[] for _ in timed]
        for round_number in range(processes):
            for (row, stem_name), measured in zip(timed, rounds):
                if progress:
                    progress(f"{row.name} (round {round_number + 1} of {processes})")
                # the columns' order alternates from round to round, so that what the machine does just
                # before or after a process (another agent's burst, the previous child's exit) does not
                # always fall on the same column
                order = COLUMNS if round_number % 2 == 0 else COLUMNS[::-1]
                measured.append({column: in_fresh_process("bench.lowering", "time_in_this_process",
                                                          f"{stem_name}.{column}.onnx", f"{stem_name}.inputs.npz", repeats)
                                 for column in order})
    for (row, _), measured in zip(timed, rounds):
        row.notes += [f"a process ({column}) failed: {r[column]['error']}" for r in measured for column in COLUMNS
                      if "error" in r[column]]
        good = [r for r in measured if not any("error" in r[column] for column in COLUMNS)]
        row.processes = len(good)
        if not good:
            continue
        for column in COLUMNS:
            row.median_ms[column] = float(np.median([s for r in good for s in r[column]["samples"]]))
        row.ratio, low, high = round_ratios([r["lowered"]["samples"] for r in good],
                                            [r["original"]["samples"] for r in good])
        row.spread = (low, high)
    return rows


# ---------------------------------------------------------------- on other runtimes

WEB_BLOCK = 5  # runs per page call on ``web``: each call makes a fresh session, so the forms alternate in blocks


@dataclass
class RuntimeRow:
    """One model (or kernel) on one runtime: the original against its lowered (or WebNN) form."""
    name: str
    runtime: str
    form: str                                      # "lowered" or "webnn"
    inputs: str
    version: str = ""
    same_outputs: bool | None = None               # bit for bit on R; None: not timed, or R's own nondeterminism
    median_ms: dict[str, float] = field(default_factory=dict)
    ratio: float | None = None                     # form / original: median over rounds of the ratio of medians
    spread: tuple[float, float] | None = None      # lowest, highest ratio of one round
    processes: int = 0
    notes: list[str] = field(default_factory=list)


def write_forms(subject: Subject, stem: Path, webnn: bool) -> str | None:
    """Write ``STEM.{original,lowered}.onnx`` and ``STEM.inputs.npz``; or return why not."""
    from ..graphs import lower_model, rewrite_model
    from ..graphs.webnn import lower_for_webnn
    from ..ops.contract import DOMAIN, OP_TYPE

    multiaxis = subject.multiaxis if subject.multiaxis is not None else rewrite_model(subject.original)[0]
    if webnn:
        shapes = {name: np.asarray(value).shape for name, value in subject.feeds.items()}
        lowered = lower_for_webnn(multiaxis, shapes)[0]
    else:
        lowered = lower_model(multiaxis)[0]
    left = op_counts(lowered).get(f"{DOMAIN}::{OP_TYPE}", 0)
    if left:
        return f"{left} GatherMultiaxis node(s) not lowered: not timed"
    onnx.save_model(subject.original, f"{stem}.original.onnx")
    onnx.save_model(lowered, f"{stem}.lowered.onnx")
    np.savez(f"{stem}.inputs.npz", **subject.feeds)
    return None


def _timer(target, model: ModelProto, feeds: dict) -> tuple[Callable[[int], list[float]], list[np.ndarray]]:
    """Load ``model`` and run it once (untimed); ``timed(n)`` gives ``n`` more runs' ms (on ``web`` timed in
    the page, a fresh session per call whose first run is untimed), and the first run's outputs."""
    from ..conformance.runtimes import WebRuntime
    from .timing import interleaved

    if isinstance(target, WebRuntime):
        model_bytes = model.SerializeToString()

        def timed_in_page(count: int) -> list[float]:
            target.run(model_bytes, feeds, repeat=count)
            return [seconds * 1e3 for seconds in target.times]

        return timed_in_page, target.run(model_bytes, feeds)
    loaded = target.load(model)
    outputs = loaded.run(feeds)
    return (lambda count: interleaved({"run": lambda: loaded.run(feeds)}, count, warmups=0)["run"]), outputs


def _first_difference(actual: list, expected: list) -> str:
    from ..harness import difference

    found = [difference(a, e) for a, e in zip(actual, expected)] + (
        [] if len(actual) == len(expected) else ["another number of outputs"])
    return next((f"output {i}: {d}" for i, d in enumerate(found) if d), "")


def time_on_runtime(runtime_name: str, stem: str, repeats: int, first: str) -> dict:
    """A fresh process's task: both forms of ``stem`` on one runtime, compared, then timed alternately."""
    from ..conformance.runtimes import WebRuntime, runtime

    with np.load(f"{stem}.inputs.npz", allow_pickle=False) as arrays:
        feeds = {name: arrays[name] for name in arrays.files}
    target = runtime(runtime_name)
    order = [first] + [column for column in COLUMNS if column != first]
    timers, outputs = {}, {}
    try:
        for column in order:
            timers[column], outputs[column] = _timer(target, onnx.load(f"{stem}.{column}.onnx"), feeds)
        differs = _first_difference(outputs["lowered"], outputs["original"])
        if differs:  # the runtime's own nondeterminism, not the lowering's, when two compilations differ
            again = _first_difference(_timer(target, onnx.load(f"{stem}.original.onnx"), feeds)[1], outputs["original"])
            differs = f"{runtime_name}'s own: two compilations of the original differ, {again}" if again else differs
        block = WEB_BLOCK if isinstance(target, WebRuntime) else 1
        samples: dict[str, list[float]] = {column: [] for column in order}
        while len(samples[first]) < repeats:
            for column in order:
                samples[column] += timers[column](min(block, repeats - len(samples[column])))
        return {"samples": samples, "difference": differs, "version": target.version()}
    finally:
        if isinstance(target, WebRuntime):
            target.close()


def run_on_runtimes(items: list[str], runtimes: list[str], webnn: bool = False, with_kernels: bool = False,
                    repeats: int = 41, processes: int = 2, batch: int = 1, sequence: int = 16,
                    progress: Callable[[str], None] | None = None) -> list[RuntimeRow]:
    """The lowered form against the original on each of ``runtimes``, in rounds as ``run``'s; a row each."""
    from .end_to_end import in_fresh_process, model_paths, round_ratios

    form = "webnn" if webnn else "lowered"
    subjects = model_subjects(model_paths(items), batch, sequence) + (kernels() if with_kernels else [])
    rows = {(subject.name, name): RuntimeRow(subject.name, name, form, subject.inputs)
            for subject in subjects for name in runtimes}
    with tempfile.TemporaryDirectory(prefix="lowering-bench-") as folder:
        stems: dict[str, str] = {}
        for number, subject in enumerate(subjects):
            reason = "; ".join(subject.notes) if isinstance(subject, LoweringRow) else None
            if isinstance(subject, Subject):
                if progress:
                    progress(f"{subject.name}: rewrite, lower ({form})")
                try:
                    reason = write_forms(subject, Path(folder) / f"{number:03d}", webnn)
                except Exception as error:  # noqa: BLE001 - a pass crashing on one model: reported, the others run
                    reason = f"rewrite or lower failed: {type(error).__name__}: {error}"
            if reason:
                for name in runtimes:
                    rows[subject.name, name].notes.append(reason)
            else:
                stems[subject.name] = str(Path(folder) / f"{number:03d}")
        measured: dict[tuple[str, str], list[dict]] = {key: [] for key in rows}
        for round_number in range(processes):
            first = COLUMNS[round_number % 2]
            for name in runtimes:
                for model, stem in stems.items():
                    if progress:
                        progress(f"{model} on {name} (round {round_number + 1} of {processes})")
                    measured[model, name].append(in_fresh_process("bench.lowering", "time_on_runtime", name, stem,
                                                                  repeats, first))
    for key, row in rows.items():
        row.notes += sorted({f"a process failed: {result['error']}" for result in measured[key] if "error" in result})
        good = [result for result in measured[key] if "error" not in result]
        row.processes = len(good)
        if not good:
            continue
        row.version = good[0]["version"]
        own = [r for r in good if r["difference"].startswith(f"{row.runtime}'s own")]
        row.same_outputs = None if own else not any(result["difference"] for result in good)
        row.notes += sorted({f"outputs differ on {row.runtime}: {r['difference']}" for r in good if r["difference"]})
        for column in COLUMNS:
            row.median_ms[column] = float(np.median([s for result in good for s in result["samples"][column]]))
        row.ratio, low, high = round_ratios([r["samples"]["lowered"] for r in good],
                                            [r["samples"]["original"] for r in good])
        row.spread = (low, high)
    return [rows[subject.name, name] for name in runtimes for subject in subjects]


def runtime_summary(rows: list[RuntimeRow]) -> dict[str, dict]:
    """By runtime: ``{"timed", "rows", "geometric mean", "worst", "worst model", "all same outputs", "version"}``
    of ``run_on_runtimes``' rows."""
    result: dict[str, dict] = {}
    for name in dict.fromkeys(row.runtime for row in rows):
        mine = [row for row in rows if row.runtime == name]
        timed = [row for row in mine if row.ratio is not None]
        worst = max(timed, key=lambda row: row.ratio or 0.0, default=None)
        result[name] = {"timed": len(timed), "rows": len(mine),
                        "geometric mean": geometric_mean([row.ratio for row in timed if row.ratio is not None]),
                        "worst": worst.ratio if worst else None, "worst model": worst.name if worst else None,
                        "all same outputs": all(row.same_outputs is not False for row in timed),
                        "version": next((row.version for row in timed), "")}
    return result


def format_runtime_report(rows: list[RuntimeRow]) -> str:
    """The report of ``bench lowering --runtime``."""
    form = rows[0].form if rows else "lowered"
    words = {None: "n/a", True: "yes", False: "NO"}
    lines = [f"| runtime | model | original ms | {form} ms | {form} / original [per-round min-max] | rounds "
             "| same outputs |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        ratio = "n/a" if row.ratio is None or row.spread is None else \
            f"{row.ratio:.2f} [{row.spread[0]:.2f}-{row.spread[1]:.2f}]"
        same = words[row.same_outputs] if row.same_outputs is not None or not row.processes else \
            f"{row.runtime} nondeterministic"
        lines.append(f"| {row.runtime} | {row.name} | {_decimals(row.median_ms.get('original'), 3)} | "
                     f"{_decimals(row.median_ms.get('lowered'), 3)} | {ratio} | {row.processes} | {same} |")
    lines += ["", f"Per runtime ({form} / original):"]
    for name, entry in runtime_summary(rows).items():
        worst = f" ({entry['worst model']})" if entry["worst model"] else ""
        lines.append(f"  {name:<9} {entry['version'] or 'n/a'}: {entry['timed']} of {entry['rows']} timed; "
                     f"geometric mean {_decimals(entry['geometric mean'])}, worst {_decimals(entry['worst'])}{worst}; "
                     f"outputs the same: {'yes' if entry['all same outputs'] else 'NO'}")
    notes = [f"{row.runtime} {row.name}: {note}" for row in rows for note in row.notes]
    return "\n".join(lines + ([""] + [f"note: {note}" for note in notes] if notes else []))


# ---------------------------------------------------------------- report

def geometric_mean(values: list[float]) -> float | None:
    """The geometric mean of positive ``values``, or None for none."""
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _decimals(value: float | None, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, or "n/a"."""
    return "n/a" if value is None else f"{value:.{digits}f}"


def _goal(value: float | None, goal: float) -> str:
    return "n/a" if value is None else ("met" if value <= goal else "not met")


def summary(rows: list[LoweringRow]) -> dict:
    """The figures of the lowering's goals (models' time ratios and node ratios, kernels' time ratios).

    Args:
        rows: what ``run`` returned.

    Returns:
        The figures by name, each with ``value``, ``goal`` and ``verdict``; the kernels' under ``kernels``.
    """
    models = [row for row in rows if row.kind == "model"]
    ratios = [row.ratio for row in models if row.ratio is not None]
    node_ratios = [row.node_ratio for row in models if row.node_ratio is not None]
    geomean, worst = geometric_mean(ratios), max(ratios, default=None)
    worst_nodes = max(node_ratios, default=None)
    result: dict[str, Any] = {
        "models timed": len(ratios), "models": len(models),
        "time geometric mean": {"value": geomean, "goal": GEOMEAN_GOAL, "verdict": _goal(geomean, GEOMEAN_GOAL)},
        "time max": {"value": worst, "goal": MODEL_GOAL, "verdict": _goal(worst, MODEL_GOAL),
                     "model": next((row.name for row in models if row.ratio == worst), None)},
        "nodes max": {"value": worst_nodes, "goal": NODES_GOAL, "verdict": _goal(worst_nodes, NODES_GOAL),
                      "model": next((row.name for row in models if row.node_ratio == worst_nodes), None)},
        "all lowered": all(row.all_lowered for row in rows),
        "all bit-identical": all(row.bit_identical and row.bit_identical_unoptimized for row in rows if row.all_lowered),
        "kernels": {},
    }
    for row in rows:
        if row.kind == "kernel":
            builtin = row.baseline.startswith("builtin")
            result["kernels"][row.name] = {"value": row.ratio, "against": row.baseline,
                                           "goal": KERNEL_GOAL if builtin else None,
                                           "verdict": _goal(row.ratio, KERNEL_GOAL) if builtin else
                                           "no builtin: the cost against the hand-written form"}
    return result


def format_report(rows: list[LoweringRow]) -> str:
    """The report ``bench lowering`` prints: Markdown tables of the rows and the summary.

    Args:
        rows: what ``run`` returned.

    Returns:
        The report's text.
    """

    def same(row: LoweringRow) -> str:
        words = {None: "n/a", True: "yes", False: "NO"}
        return f"{words[row.bit_identical]} / {words[row.bit_identical_unoptimized]}"

    def ratio(row: LoweringRow) -> str:
        if row.ratio is None:
            return "n/a"
        assert row.spread is not None  # set together with the ratio
        return f"{row.ratio:.2f} [{row.spread[0]:.2f}-{row.spread[1]:.2f}]"

    lines = ["| model | against | GatherMultiaxis | all lowered | bit-identical (default options / optimizations off) "
             "| nodes original | nodes lowered | node ratio | original ms | lowered ms | lowered / original [per-round min-max] |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        ms = (lambda column: _decimals(row.median_ms.get(column), 3))
        lines.append(f"| {row.name} | {row.baseline} | {row.gathers_rewritten} | {'yes' if row.all_lowered else 'NO'} | "
                     f"{same(row)} | {row.nodes.get('original', 'n/a')} | {row.nodes.get('lowered', 'n/a')} | "
                     f"{_decimals(row.node_ratio)} | {ms('original')} | {ms('lowered')} | {ratio(row)} |")
    lines += ["", "Op types (Constant nodes not counted), and the form the lowering chose for each GatherMultiaxis:"]
    for row in rows:
        if row.op_counts:
            lines.append(f"  {row.name}")
            for column in COLUMNS:
                lines.append(f"    {column:<9}" + ", ".join(f"{op} {n}" for op, n in row.op_counts[column].items()))
            if row.forms:
                lines.append("    forms    " + ", ".join(f"{form} {n}" for form, n in row.forms.items()))
    notes = [f"{row.name}: {note}" for row in rows for note in row.notes]
    notes += [f"{row.name}: left {reason}" for row in rows for reason in row.not_lowered]
    notes += [f"{row.name}: general form for {reason}" for row in rows for reason in row.general]
    if notes:
        lines += [""] + [f"note: {note}" for note in notes]
    figures = summary(rows)
    lines += ["", f"Summary against the lowering's goals ({figures['models timed']} of {figures['models']} models timed; "
                  "ratios are lowered / original):"]

    def line(label: str, entry: dict, bound: str) -> str:
        where = f" ({entry['model']})" if entry.get("model") else ""
        return f"  {label:<28}{_decimals(entry['value']):>6}{where}   goal {bound} {entry['goal']}: {entry['verdict']}"

    lines.append(line("time, geometric mean", figures["time geometric mean"], "<="))
    lines.append(line("time, worst model", figures["time max"], "<="))
    lines.append(line("nodes, worst model", figures["nodes max"], "<="))
    for name, entry in figures["kernels"].items():
        if entry["goal"] is None:
            lines.append(f"  kernel {name}: {_decimals(entry['value'])} against {entry['against']} ({entry['verdict']})")
        else:
            lines.append(f"  kernel {name}: {_decimals(entry['value'])} against {entry['against']}   goal <= "
                         f"{entry['goal']}: {entry['verdict']}")
    lines.append(f"  every GatherMultiaxis lowered: {'yes' if figures['all lowered'] else 'NO'}; "
                 f"every lowered model bit-identical: {'yes' if figures['all bit-identical'] else 'NO'}")
    return "\n".join(lines)


def as_json(rows: list[LoweringRow]) -> dict:
    """The ``--json`` report.

    Args:
        rows: what ``run`` returned.

    Returns:
        The machine and versions, the CPU count, every row and the summary.
    """
    from .end_to_end import versions_line

    return {"machine": versions_line(), "cpu_count": os.cpu_count(), "rows": [asdict(row) for row in rows],
            "summary": summary(rows)}


__all__ = ["LoweringRow", "RuntimeRow", "Subject", "as_json", "format_report", "format_runtime_report", "kernels",
           "op_counts", "run", "run_on_runtimes", "runtime_summary", "summary", "time_in_this_process", "time_on_runtime",
           "write_forms"]
