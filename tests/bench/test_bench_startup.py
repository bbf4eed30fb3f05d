"""bench/startup.py: the staged creation covers every stage, the child measure's fields, the worse process
counts, the report's ratio lines. No timing assertions (the machine is shared)."""

import math

import pytest

from gathermultiaxis.bench.startup import (STAGES, StartupRow, format_startup, geometric_mean, measure_in_this_process,
                                           own_workload_models, run_startup, staged_creation)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("startup")
    return own_workload_models(str(folder))[0]


def test_staged_creation_times_every_stage(tiny_model):
    from gathermultiaxis.graphs import rewrite_model
    import onnx

    rewritten = tiny_model.replace(".onnx", ".rewritten.onnx")
    onnx.save(rewrite_model(onnx.load(tiny_model))[0], rewritten)
    ms = staged_creation(rewritten)
    assert set(ms) == {*STAGES, "total"}
    assert all(value >= 0 for value in ms.values())
    assert math.isclose(sum(ms[s] for s in STAGES), ms["total"], rel_tol=1e-6, abs_tol=1e-6)


def test_measure_in_this_process_reports_first_median_and_split(tiny_model):
    ort_side = measure_in_this_process(tiny_model, "ort", creations=3)
    assert ort_side["variant"] == "ort" and ort_side["first_ms"] > 0 and ort_side["median_ms"] > 0
    assert "split_ms" not in ort_side
    gma = measure_in_this_process(tiny_model, "gma", creations=3)
    assert set(gma["split_ms"]) == {*STAGES, "total"} and gma["registrations"] >= 0  # none: a plain model


def test_the_worse_process_counts_and_the_report_says_so(tiny_model):
    [row] = run_startup([tiny_model], processes=1, creations=2)
    assert not row.error and row.ratio is not None and row.ratio > 0 and set(row.split_ms) >= set(STAGES)
    two = StartupRow("m", {"ort": 2.0, "gma": 3.0}, {"ort": 10.0, "gma": 40.0},
                     {stage: 0.5 for stage in STAGES}, registrations=24)
    four = StartupRow("n", {"ort": 1.0, "gma": 4.0}, {"ort": 10.0, "gma": 40.0}, {}, registrations=24)
    report = format_startup([two, four, StartupRow("bad", error="gma: boom")])
    assert "| m | 2.0 | 3.0 | 1.50x | 10 / 40 |" in report and "| bad | error: gma: boom |" in report
    assert f"geometric mean {geometric_mean([1.5, 4.0]):.2f}x" in report and "worst 4.00x" in report
    assert geometric_mean([]) is None
