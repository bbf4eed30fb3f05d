"""``bench --runtime`` rows as a smoke test: each entry point agrees with builtin (checked inside
``measure``) and every timing and ratio is reported. No timing assertions (the machine is shared);
the GPT-2 rows (150 MB tables) run only from the command line."""

import numpy as np

from gathermultiaxis.runtime_bench import ENTRIES, _detection, _tiny, format_runtime_report, measure


def test_runtime_rows_report_every_entry():
    rng = np.random.default_rng(0)
    results = [measure(workload, repeats=3) for workload in [_tiny(rng), *_detection(rng)]]
    for result in results:
        assert set(result.medians_ms) == set(ENTRIES) and all(v > 0 for v in result.medians_ms.values())
        assert result.ratios["InferenceSession / builtin"] > 0
    report = format_runtime_report(results)
    assert "| tiny shape gather (per-call overhead) |" in report and "odd repeats" in report


def test_end_to_end_rows(tmp_path, capsys):
    """bench --end-to-end: whole models, bit-identical, timed (no timing assertions)."""
    from gathermultiaxis.cli import main
    from gathermultiaxis.examples import EXAMPLE_PATH

    report = tmp_path / "e2e.json"
    assert main(["bench", "--end-to-end", str(EXAMPLE_PATH), "--repeats", "3", "--json", str(report)]) == 0
    import json

    rows = json.loads(report.read_text())
    assert [(r["model"], r["shape"], r["rewritten_gathers"], r["bit_identical"]) for r in rows] == [
        ("gathers.onnx", "[1, 16]", 6, True), ("gathers.onnx", "[8, 32]", 6, True)]
    assert all(r["builtin_ms"] > 0 and r["rewritten_ms"] > 0 for r in rows)
    assert "| gathers.onnx | [8, 32] | 6 | yes |" in capsys.readouterr().out
