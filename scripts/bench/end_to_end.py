"""``gathermultiaxis bench end-to-end MODEL|FOLDER ...``: whole models as users run them.

The columns (``COLUMNS``) use ORT's default session options, each timed in its own fresh process
(``measure_in_this_process`` says why). The goals (``GOALS``) are printed, not asserted."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .timing import interleaved

COLUMNS = ("builtin", "rewrite --ort-optimize", "rewrite", "kernel only", "lowered")
SESSION_COLUMNS = COLUMNS[1:4]  # the columns run in gathermultiaxis.InferenceSession
TIMED = COLUMNS[1:]  # each timed against "builtin"
GOAL_KEY = "rewritten / builtin"  # per model the worse of the two rewrites in the default session
# The goals for rewritten / builtin, printed beside the table (a shared machine cannot assert them).
GOALS = {"geometric mean": 1.4, "every model": 2.5}


@dataclass
class ModelRow:
    model: str
    shape: str                    # "inputs.npz", or the (batch, sequence) given to symbolic dims
    rewritten_gathers: int        # by ``rewrite --ort-optimize``
    bit_identical: bool           # every session column against the original, every process
    lowered_bit_identical: bool | None  # None: lowering left a GatherMultiaxis (or failed)
    median_ms: dict[str, float] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)  # "COLUMN / builtin" and GOAL_KEY: the worse round's
    spread: dict[str, tuple[float, float]] = field(default_factory=dict)  # per-round ratio min, max
    processes: int = 0
    us_per_crossing: float | None = None  # kernel only: (its median - builtin's) / its crossings a run
    sessions: dict[str, dict] = field(default_factory=dict)  # per session column: builtin_gathers, crossings
    # (PyOp bridge calls in one run), bound_tables (constant tables bound: no bridge copy per call) and
    # reasons (``crossing_reasons``: why each bridge node is left, by reason)
    notes: list[str] = field(default_factory=list)


def named_model_paths(items: list[str]) -> list[tuple[Path, str]]:
    """Model files and their rows' names: a file by its name, a folder's files (sorted) by their relative path."""
    named: list[tuple[Path, str]] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            named.extend((model, model.relative_to(path).as_posix()) for model in sorted(path.rglob("*.onnx")))
        else:
            named.append((path, path.name))
    return named


def model_paths(items: list[str]) -> list[Path]:
    """The model files of ``named_model_paths``."""
    return [path for path, _ in named_model_paths(items)]


def model_feeds(path: Path, model, batch: int, sequence: int) -> tuple[dict, str]:
    """The model's feeds and their source: its inputs file, else generated with (batch, sequence) dims."""
    from ..conformance.cases import inputs_beside
    from ..conformance.input_generation import generated_inputs

    saved = inputs_beside(path)
    if saved is not None:
        with np.load(saved, allow_pickle=False) as arrays:
            return {name: arrays[name] for name in arrays.files}, saved.name

    shapes = {value.name: tuple(d.dim_value if d.HasField("dim_value") else (batch if j == 0 else sequence)
                                for j, d in enumerate(value.type.tensor_type.shape.dim))
              for value in model.graph.input}
    return generated_inputs(model, 0, sequence, shapes), f"[{batch}, {sequence}]"


def _column_model(path: str, batch: int, sequence: int, column: str):
    """The original, the model one column runs (only its rewrite or lowering is made), feeds and reports."""
    import onnx

    from ..graphs import lower_model, rewrite_model
    from ..harness import session_options

    original = model = onnx.load(path)
    feeds, shape = model_feeds(Path(path), original, batch, sequence)
    report = lowering = None
    if column == "rewrite":
        model, report = rewrite_model(original)
    elif column == "lowered":
        static, report = rewrite_model(original, ort_optimize=True, runtime_alignment=False,
                                       session_options=session_options)
        model, lowering = lower_model(static)
    elif column != "builtin":  # "rewrite --ort-optimize" and "kernel only" run the same rewrite
        model, report = rewrite_model(original, ort_optimize=True, session_options=session_options)
    return original, model, feeds, shape, report, lowering


def _session(column: str, model):
    """ORT's default options, as users run models (the package's session for the session columns)."""
    from ..harness import make_session

    return make_session(model, custom=column in SESSION_COLUMNS, as_users_do=True,
                        run_builtin_gathers=column != "kernel only")


KERNEL_ONLY_ASKED = "kernel only asked"
NO_BUILTIN_FORM = "no builtin form"
BOUND_TABLE = "bound table"
BOUND_GROUP = "group of bound tables"


def crossing_reasons(model, column: str) -> dict[str, int]:
    """Why each bridge node of the column's in-memory model is left: reason -> nodes (a node in a Loop body
    crosses once an iteration). ``model``: the rewritten model, not changed."""
    from ..graphs.ir.walk import model_nodes
    from ..graphs.lower import KEPT_FOR_KERNEL, lower_single_gathers
    from ..ops.runtime.run_ops import BOUND_OP_PREFIX, GROUP_OP_PREFIX, is_bridge_node
    from ..ops.runtime.session import prepare_model

    builtin = column != "kernel only"
    kept: dict[str, str] = {}
    if builtin:  # the session lowers the same way: the reasons of the nodes it keeps
        _, lowering = lower_single_gathers(_copy(model), None)
        kept = {o.node: o.reason.removeprefix(KEPT_FOR_KERNEL).lstrip(": ") for o in lowering.left_outcomes()}
    reasons: dict[str, int] = {}
    for node in model_nodes(prepare_model(_copy(model), None, builtin_gathers=builtin).model):
        if not is_bridge_node(node):
            continue
        if node.op_type.startswith(GROUP_OP_PREFIX):
            reason = BOUND_GROUP
        elif node.op_type.startswith(BOUND_OP_PREFIX):
            reason = BOUND_TABLE
        elif not builtin:
            reason = KERNEL_ONLY_ASKED
        else:
            reason = f"{NO_BUILTIN_FORM}: {kept[node.name]}" if kept.get(node.name) else NO_BUILTIN_FORM
        reasons[reason] = reasons.get(reason, 0) + 1
    return dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0])))


def _copy(model):
    import onnx

    copied = onnx.ModelProto()
    copied.CopyFrom(model)
    return copied


def measure_in_this_process(path: str, repeats: int, batch: int = 1, sequence: int = 16,
                            column: str = "builtin") -> dict:
    """One column of one model in this (child) process: samples in ms. One session per process: ORT's
    intra-op threads spin for tens of ms after a run (a 40 ms BERT timed after another ran 1.7x slower)."""
    from ..harness import bit_identical

    original, model, feeds, shape, report, lowering = _column_model(path, batch, sequence, column)
    same = None
    compared = column != "builtin" and not (lowering is not None and lowering.left)
    if compared:
        reference = _session("builtin", original)
        want = reference.run(None, feeds)
        del reference
    sess = _session(column, model)
    if compared:
        same = all(bit_identical(a, b) for a, b in zip(sess.run(None, feeds), want))
    facts = None
    if column in SESSION_COLUMNS:  # counted on a run of its own, before the timing (the count hook costs)
        from ..ops.runtime.registration import count_crossings

        facts = {"builtin_gathers": sess.builtin_gathers, "crossings": count_crossings(lambda: sess.run(None, feeds))[1],
                 "bound_tables": sess.bound_tables, "reasons": crossing_reasons(model, column)}
    samples = interleaved({column: lambda: sess.run(None, feeds)}, repeats)[column]
    return {"shape": shape, "rewritten_gathers": None if report is None else report.rewritten, "column": column,
            "bit_identical": same, "lowering_left": None if lowering is None else lowering.left, "samples": samples,
            "session": facts}


def _child_environment() -> dict[str, str]:
    from .bigmodel import child_environment

    return child_environment()


def in_fresh_process(module: str, function: str, *arguments) -> dict:
    """``gathermultiaxis.<module>.<function>(*arguments)``'s JSON in a fresh process; else ``{"error": ...}``."""
    code = (f"import json; from gathermultiaxis.{module} import {function}; "
            f"print(json.dumps({function}({', '.join(map(repr, arguments))})))")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_child_environment())
    if child.returncode != 0:
        return {"error": (child.stderr.strip().splitlines() or [f"exit status {child.returncode}"])[-1]}
    return json.loads(child.stdout.strip().splitlines()[-1])


def _measure_in_child(path: Path, repeats: int, batch: int, sequence: int, column: str) -> dict:
    return {"column": column, **in_fresh_process("bench.end_to_end", "measure_in_this_process", str(path), repeats,
                                                 batch, sequence, column)}


def busy_loops(count: int) -> list[subprocess.Popen]:
    """``count`` spinning processes, the i-th pinned to core i (modulo the cores)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    loops = []
    for i in range(count):
        pin = f"import os; os.sched_setaffinity(0, {{{cores[i % len(cores)]}}})\n" if hasattr(os, "sched_setaffinity") else ""
        loops.append(subprocess.Popen([sys.executable, "-c", pin + "while True:\n    pass"]))
    return loops


def run(items: list[str], repeats: int = 201, processes: int = 2, batch: int = 1, sequence: int = 16,
        progress=None, load: int = 0) -> list[ModelRow]:
    """Measure every model of ``items`` in interleaved rounds of fresh processes (one column each).

    Args:
        items: model files or folders of them.
        repeats: timed runs per process.
        processes: rounds (fresh processes per model and column).
        batch: the batch size of generated inputs.
        sequence: the sequence length of generated inputs.
        progress: called with a line of text before each model's round, or None.
        load: how many busy-loop processes to run beside.

    Returns:
        One ``ModelRow`` per model, in the order of ``model_paths(items)``.
    """
    names: dict[Path, str] = {}
    for path, name in named_model_paths(items):
        names.setdefault(path, name)  # a model given twice is measured once
    paths = list(names)
    measured: dict[Path, list[dict[str, dict]]] = {path: [] for path in paths}
    loops = busy_loops(load)
    try:
        for round_number in range(processes):
            for path in paths:
                if progress:
                    progress(f"{path} (round {round_number + 1} of {processes})")
                measured[path].append({column: _measure_in_child(path, repeats, batch, sequence, column)
                                       for column in COLUMNS})
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    return [_row(names[path], rounds) for path, rounds in measured.items()]


def _row(name: str, rounds: list[dict[str, dict]]) -> ModelRow:
    runs = [run for one_round in rounds for run in one_round.values()]
    good = [one_round for one_round in rounds if not any("error" in r for r in one_round.values())]
    first = good[0]["rewrite --ort-optimize"] if good else {}
    lowering_left = bool(good) and any(one_round["lowered"]["lowering_left"] for one_round in good)
    row = ModelRow(name, first.get("shape", "-"), first.get("rewritten_gathers", 0),
                   bool(good) and all(r[column]["bit_identical"] for r in good for column in SESSION_COLUMNS),
                   None if not good or lowering_left else all(r["lowered"]["bit_identical"] for r in good),
                   processes=len(good))
    row.notes = [f"a process ({r['column']}) failed: {r['error']}" for r in runs if "error" in r]
    if not good:
        return row
    row.sessions = {column: good[0][column]["session"] for column in SESSION_COLUMNS}
    if lowering_left:
        row.notes.append(f"lowering left {good[0]['lowered']['lowering_left']} GatherMultiaxis node(s)")
    for name in COLUMNS:
        row.median_ms[name] = float(np.median([s for r in good for s in r[name]["samples"]]))
    for name in TIMED:
        key = f"{name} / builtin"
        _, low, high = round_ratios([r[name]["samples"] for r in good], [r["builtin"]["samples"] for r in good])
        row.ratios[key], row.spread[key] = high, (low, high)  # the worse round counts
    crossings = (row.sessions.get("kernel only") or {}).get("crossings")
    if crossings:
        row.us_per_crossing = (row.median_ms["kernel only"] - row.median_ms["builtin"]) * 1e3 / crossings
    worse = max(("rewrite --ort-optimize / builtin", "rewrite / builtin"), key=lambda key: row.ratios[key])
    row.ratios[GOAL_KEY], row.spread[GOAL_KEY] = row.ratios[worse], row.spread[worse]
    return row


def round_ratios(samples: list[list[float]], baseline: list[list[float]]) -> tuple[float, float, float]:
    """The ratio of medians of each round: their median, lowest and highest."""
    per_round = [float(np.median(a) / np.median(b)) for a, b in zip(samples, baseline)]
    return float(np.median(per_round)), min(per_round), max(per_round)


def geometric_mean(rows: list[ModelRow], key: str) -> float | None:
    """The geometric mean of one ratio over the rows that have it."""
    values = [row.ratios[key] for row in rows if key in row.ratios]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def format_rows(rows: list[ModelRow]) -> str:
    """The report: a Markdown table (one row per model, then the geometric means), the notes and the goal lines."""
    def ratio(row: ModelRow, key: str) -> str:
        if key not in row.ratios:
            return "n/a"
        low, high = row.spread[key]
        return f"{row.ratios[key]:.2f} [{low:.2f}-{high:.2f}]"

    def same(value: bool | None) -> str:
        return "n/a" if value is None else ("yes" if value else "NO")

    def session(row: ModelRow, column: str) -> str:
        facts = row.sessions.get(column)
        return "n/a" if facts is None else (f"{facts['builtin_gathers']} / {facts['crossings']} / "
                                            f"{facts['bound_tables']}")

    ratio_keys = [GOAL_KEY] + [f"{name} / builtin" for name in TIMED]
    headers = ["model", "inputs", "gathers rewritten", "session (--ort-optimize): builtin gathers / bridge crossings "
               "/ bound tables", "session (plain rewrite)", "kernel only", "kernel only: us a crossing",
               "bit-identical (sessions / lowered)",
               "builtin ms", *ratio_keys]
    lines = ["| " + " | ".join(headers) + " |", "|---" * len(headers) + "|"]
    for row in rows:
        lines.append(f"| {row.model} | {row.shape} | {row.rewritten_gathers} | "
                     + " | ".join(session(row, column) for column in SESSION_COLUMNS)
                     + (" | n/a" if row.us_per_crossing is None else f" | {row.us_per_crossing:.1f}")
                     + f" | {same(row.bit_identical)} / {same(row.lowered_bit_identical)} | "
                     + (f"{row.median_ms['builtin']:.3f}" if "builtin" in row.median_ms else "n/a") + " | "
                     + " | ".join(ratio(row, key) for key in ratio_keys) + " |")
    means = [geometric_mean(rows, key) for key in ratio_keys]
    lines.append("| " + " | ".join(["geometric mean"] + [""] * (len(headers) - 1 - len(means))
                                   + ["n/a" if m is None else f"{m:.2f}" for m in means]) + " |")
    lines.append(f"(ratios: the worse round's, [per-round min-max]; {GOAL_KEY}: per model the worse of the two "
                 "rewrites, run as users run them)")
    notes = [f"{row.model}: {note}" for row in rows for note in row.notes]
    return "\n".join(lines + reason_lines(rows) + [f"note: {note}" for note in notes] + goal_lines(rows))


def reason_lines(rows: list[ModelRow]) -> list[str]:
    """Per model and session column with bridge crossings: the crossings a run and why its bridge nodes are left."""
    lines = []
    for row in rows:
        for column in SESSION_COLUMNS:
            facts = row.sessions.get(column) or {}
            if facts.get("crossings") and facts.get("reasons") is not None:
                why = ", ".join(f"{count} {reason}" for reason, count in facts["reasons"].items())
                lines.append(f"crossings left: {row.model}, {column}: {facts['crossings']} a run; bridge nodes: {why}")
    return lines


def goal_lines(rows: list[ModelRow]) -> list[str]:
    """The goals for ``GOAL_KEY`` (``GOALS``) against this run, each ratio the worse round's."""
    key = GOAL_KEY
    timed = [row for row in rows if key in row.ratios]
    if not timed:
        return ["goals: nothing timed"]
    rounds = min(row.processes for row in timed)
    mean, worst = geometric_mean(timed, key), max(timed, key=lambda row: row.ratios[key])
    assert mean is not None  # every timed row has the ratio
    met = (lambda ok: "met" if ok else "NOT met")
    return [f"goal: geometric mean of rewritten / builtin <= {GOALS['geometric mean']}x: {mean:.2f}x, "
            f"{met(mean <= GOALS['geometric mean'])}",
            f"goal: no model over {GOALS['every model']}x: worst {worst.model} {worst.ratios[key]:.2f}x, "
            f"{met(worst.ratios[key] <= GOALS['every model'])}",
            f"(each model's ratio is the worse of its {rounds}+ fresh-process rounds"
            + ("; fewer than 2 rounds: not the goals' measure)" if rounds < 2 else ")")]


def versions_line(load: int | None = None) -> str:
    """The machine and versions; with ``load`` (end-to-end), the busy-loop processes that ran beside."""
    import platform

    import onnx
    import onnxruntime

    return (f"{platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}, onnx {onnx.__version__}, "
            f"onnxruntime {onnxruntime.__version__}"
            + ("" if load is None else f"; under load: {load} busy-loop processes, pinned one per core"
               if load else "; no deliberate load"))
