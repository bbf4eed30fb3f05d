"""Session start-up: the default ``gathermultiaxis.InferenceSession`` of a ``rewrite --ort-optimize`` model
against ``onnxruntime.InferenceSession`` of the original, each in fresh processes, and where the time goes.

Process CPU time (``time.process_time``, ORT's pool threads included on both sides): wall time on a shared
machine is noise. Per process, the first creation and the median of the creations after it; per model the
worse of the processes counts. The split times the session's own steps from the outside, called in the
session's order, one staged creation after each real one: the real creations alone give the ratio."""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

VARIANTS = ("ort", "gma")  # ORT's own session on the original; the default session on the rewrite
STAGES = ("load", "lowering", "bind", "options+registration", "ort_session", "rest")
GOALS = {"geometric mean": 1.5, "every model": 3.0}  # gma / ort, printed beside the table, never asserted


def staged_creation(path: str) -> dict[str, float]:
    """One default session made step by step as ``InferenceSession.__init__`` makes it: CPU ms per stage."""
    import onnxruntime as ort

    from ..graphs.lower import lower_single_gathers
    from ..ops.runtime import session
    from ..ops.runtime.bind.bind_steps import holds_gather

    clock, ms = time.process_time, dict[str, float]()
    start = mark = clock()

    def stage(name: str) -> None:
        nonlocal mark
        now = clock()
        ms[name] = ms.get(name, 0.0) + (now - mark) * 1e3
        mark = now

    model, folder = session.load_model(path)
    stage("load")
    if holds_gather(model):  # as the bind step does: a model without GatherMultiaxis is not lowered
        model = lower_single_gathers(model, folder)[0]
    stage("lowering")
    prepared = session.prepare_model(model, folder, builtin_gathers=False)
    stage("bind")
    options = session.own_options(None, library=session.needs_library(prepared.model))
    stage("options+registration")
    shared = session.share_bound_initializers(options, prepared)
    serialized = prepared.model.SerializeToString()
    stage("rest")
    with session.ExternalDataFolder(options, folder, prepared.model, owned=True):
        made = ort.InferenceSession(serialized, options, providers=["CPUExecutionProvider"])
    stage("ort_session")
    ms["total"] = (mark - start) * 1e3
    del made, shared
    return ms


def measure_in_this_process(path: str, variant: str, creations: int = 8, split: bool = True) -> dict:
    """``creations`` sessions of ``path`` in this (fresh) process: the first one's CPU ms, the median of the
    others, and for "gma" with ``split`` the median of each stage (``staged_creation``) and the registrations."""
    import onnxruntime as ort

    if variant == "gma":
        from ..ops.runtime import registration
        from ..ops.runtime.session import InferenceSession

        def make():
            return InferenceSession(path, providers=["CPUExecutionProvider"])
    else:
        def make():
            return ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    times, stages = [], []
    for _ in range(creations):
        start = time.process_time()
        made = make()
        times.append((time.process_time() - start) * 1e3)
        del made
        if variant == "gma" and split:
            stages.append(staged_creation(path))
    result = {"variant": variant, "first_ms": times[0], "median_ms": float(np.median(times[1:])),
              "load_average": os.getloadavg()[0]}
    if stages:
        result["split_ms"] = {name: float(np.median([s[name] for s in stages[1:]])) for name in (*STAGES, "total")}
        result["first_split_ms"] = stages[0]
    if variant == "gma":
        result["registrations"] = registration.definitions()
    return result


@dataclass
class StartupRow:
    model: str
    median_ms: dict[str, float] = field(default_factory=dict)  # per variant: the worse process's median
    first_ms: dict[str, float] = field(default_factory=dict)   # per variant: the worse process's first creation
    split_ms: dict[str, float] = field(default_factory=dict)   # the gma process counted: median per stage
    registrations: int | None = None
    error: str = ""

    @property
    def ratio(self) -> float | None:
        """gma / ort, the worse process of each."""
        if self.error or not {"gma", "ort"} <= self.median_ms.keys():
            return None
        return self.median_ms["gma"] / self.median_ms["ort"]


def rewritten_models(items: list[str], folder: str) -> list[tuple[str, str, str]]:
    """(name, original path, ``rewrite --ort-optimize`` path in ``folder``) of every model of ``items``."""
    import onnx

    from ..graphs import rewrite_model
    from ..harness import session_options
    from .end_to_end import named_model_paths

    models = []
    for number, (path, name) in enumerate(named_model_paths(items)):
        rewritten = os.path.join(folder, f"{number}.onnx")
        onnx.save(rewrite_model(onnx.load(str(path)), ort_optimize=True, session_options=session_options)[0],
                  rewritten)
        models.append((name, str(path), rewritten))
    return models


def _row(name: str, runs: dict[str, list[dict]]) -> StartupRow:
    row = StartupRow(name)
    for variant, results in runs.items():
        failed = [r["error"] for r in results if "error" in r]
        if failed:
            row.error = f"{variant}: {failed[0]}"
            continue
        worse = max(results, key=lambda r: r["median_ms"])
        row.median_ms[variant] = worse["median_ms"]
        row.first_ms[variant] = max(r["first_ms"] for r in results)
        if variant == "gma":
            row.split_ms = worse.get("split_ms", {})
            row.registrations = worse.get("registrations")
    return row


def run_startup(items: list[str], processes: int = 2, creations: int = 8, progress=None) -> list[StartupRow]:
    """Session start-up of every model of ``items`` (files or folders of ``*.onnx``), ``processes`` fresh
    processes per model and variant, taken in turn.

    Args:
        items: model files or folders.
        processes: fresh processes per model and variant (the worse counts).
        creations: sessions per process (the first one apart, the median of the others).
        progress: called with a line before each process, or None.

    Returns:
        One row per model."""
    from .end_to_end import in_fresh_process

    with tempfile.TemporaryDirectory() as folder:
        models = rewritten_models(items, folder)
        runs: dict[str, dict[str, list[dict]]] = {name: {v: [] for v in VARIANTS} for name, _, _ in models}
        for round_number in range(processes):
            for name, original, rewritten in models:
                for variant, path in zip(VARIANTS, (original, rewritten)):
                    if progress:
                        progress(f"{name} {variant} (process {round_number + 1} of {processes})")
                    runs[name][variant].append(in_fresh_process(
                        "bench.startup", "measure_in_this_process", path, variant, creations))
    return [_row(name, runs[name]) for name, _, _ in models]


def geometric_mean(values: list[float]) -> float | None:
    """The geometric mean of ``values``, None for none."""
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def format_startup(rows: list[StartupRow]) -> str:
    """The start-up table, its geometric mean and worst ratio against ``GOALS``, and the split.

    Args:
        rows: what ``run_startup`` returned.

    Returns:
        The report's text."""
    lines = ["| model | ORT own ms | InferenceSession ms | ratio | first session ms: ORT / InferenceSession | "
             + " | ".join(STAGES) + " | registrations |", "|---" * (6 + len(STAGES)) + "|"]
    for row in rows:
        if row.error:
            lines.append(f"| {row.model} | error: {row.error} |")
            continue
        split = " | ".join(f"{row.split_ms[s]:.1f}" if s in row.split_ms else "-" for s in STAGES)
        lines.append(f"| {row.model} | {row.median_ms['ort']:.1f} | {row.median_ms['gma']:.1f} | {row.ratio:.2f}x | "
                     f"{row.first_ms['ort']:.0f} / {row.first_ms['gma']:.0f} | {split} | {row.registrations} |")
    ratios = [row.ratio for row in rows if row.ratio is not None]
    if ratios:
        mean = geometric_mean(ratios)
        lines.append(f"start-up InferenceSession / ORT's own: geometric mean {mean:.2f}x (goal <= "
                     f"{GOALS['geometric mean']}x), worst {max(ratios):.2f}x (goal <= {GOALS['every model']}x) over "
                     f"{len(ratios)} models; process CPU ms, median of the creations after the first, the worse of "
                     "the processes")
    return "\n".join(lines)


def own_workload_models(folder: str) -> list[str]:
    """The small models of ``bench runtime`` (the tiny shape gather, detection), written to ``folder``."""
    import onnx

    from .runtime import detection_workloads, tiny_workload

    rng = np.random.default_rng(0)
    paths = []
    for number, workload in enumerate([tiny_workload(rng), *detection_workloads(rng)]):
        path = Path(folder) / f"{number}_{re.sub('[^a-z0-9]+', '_', workload.name.lower()).strip('_')}.onnx"
        onnx.save(workload.model, str(path))
        paths.append(str(path))
    return paths


def startup_report(items: list[str], processes: int = 2, progress=None) -> tuple[str, list[StartupRow]]:
    """``bench runtime --startup [MODEL|FOLDER ...]``: the report and rows (no ``items``: the bench's own
    small models)."""
    with tempfile.TemporaryDirectory() as folder:
        rows = run_startup(items or own_workload_models(folder), processes, progress=progress)
    return "Session start-up (fresh processes):\n" + format_startup(rows), rows


__all__ = ["GOALS", "STAGES", "VARIANTS", "StartupRow", "format_startup", "geometric_mean", "measure_in_this_process",
           "own_workload_models", "rewritten_models", "run_startup", "staged_creation", "startup_report"]
