"""``bench --runtime`` rows as a smoke test: each entry point agrees with builtin (checked inside
``measure``) and every timing and ratio is reported. No timing assertions (the machine is shared);
the GPT-2 rows (150 MB tables) run only from the command line."""

import numpy as np

from gathermultiaxis.bench.runtime import ENTRIES, detection_workloads, tiny_workload, format_runtime_report, measure


def test_runtime_rows_report_every_entry():
    rng = np.random.default_rng(0)
    results = [measure(workload, repeats=3) for workload in [tiny_workload(rng), *detection_workloads(rng)]]
    for result in results:
        assert set(result.medians_ms) == set(ENTRIES) and all(v > 0 for v in result.medians_ms.values())
        assert result.ratios["InferenceSession / builtin"] > 0
    report = format_runtime_report(results)
    assert "| tiny shape gather (per-call overhead) |" in report and "odd repeats" in report
