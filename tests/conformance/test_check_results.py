"""The check's records: modes, results, the text table (importable without ONNX Runtime)."""

import subprocess
import sys
from pathlib import Path

from gathermultiaxis.conformance.check_results import MODE_FLAGS, CheckMode, CheckResult, FuzzSeed, format_table


def test_the_table_has_no_timings():
    """check's table and report hold no times: one cold run of cases checked side by side is no speed
    measurement (``bench end-to-end`` is); docs/conformance.md explains the columns left."""
    from dataclasses import fields

    table = format_table([CheckResult("m.onnx", "passed", rewritten=2, expected="exact")])
    assert table.splitlines()[0].split() == ["model", "rewritten", "left", "verdict", "expected"]
    assert table.splitlines()[1].split() == ["m.onnx", "2", "0", "passed", "exact"]
    assert not [f.name for f in fields(CheckResult) if f.name.endswith("_ms")]
    columns = (Path(__file__).resolve().parents[2] / "docs" / "conformance.md").read_text()
    assert all(f"| {column} |" in columns for column in ("model", "rewritten", "left", "verdict", "expected"))


def test_the_table_lists_details_and_left_gathers_of_cases_that_did_not_pass():
    results = [CheckResult("a", "passed", rewritten=1, left_reasons=["Gather 'g': inside a contrib op"]),
               CheckResult("long name", "failed", rewritten=3, detail="output 0 differs")]
    assert format_table(results).splitlines() == [
        "model      rewritten left  verdict       expected",
        "a                  1    0  passed        -",
        "             left Gather 'g': inside a contrib op",
        "long name          3    0  failed        -",
        "             output 0 differs"]


def test_modes_flags_and_fuzz_seeds():
    assert CheckMode.GATHERS is CheckMode.DEFAULT and CheckMode("session").optimized
    assert CheckMode.ORT_OPTIMIZED.ort_optimize_rewrite and not CheckMode.LOWERED.optimized
    assert set(MODE_FLAGS) == set(CheckMode) - {CheckMode.MUTATIONS}
    assert FuzzSeed(7).name == "fuzz seed 7"


def test_reading_the_records_loads_neither_onnx_nor_onnxruntime():
    code = ("import sys, gathermultiaxis.conformance.check_results; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'onnxruntime')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
