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


def test_form_breakdown_has_one_row_per_kernel_form():
    """Each form model runs the node form it is named after, one crossing a run, bit-identical to builtin with
    and without the fast plan (checked inside ``form_breakdown``); every variant is timed."""
    import onnx

    from gathermultiaxis.bench.runtime import (FORM_VARIANTS, RUN_TIME_ALIGNED, RUN_TIME_ALIGNED_RUN_OP, form_breakdown,
                                               form_models, format_form_breakdown)
    from gathermultiaxis.ops.runtime.bind import BindOptions
    from gathermultiaxis.graphs import rewrite_model
    from gathermultiaxis.ops.runtime.session import prepare_model

    expected = {"Gather (fixed axes)": "GatherMultiaxisRunFixedAxes", "GatherElements (fixed axes)": "GatherMultiaxisRunFixedAxes",
                "GatherND (fixed axes)": "GatherMultiaxisRunFixedAxes", RUN_TIME_ALIGNED: "GatherMultiaxisRecorded",
                RUN_TIME_ALIGNED_RUN_OP: "GatherMultiaxisRun",
                "1-D shape arithmetic": "GatherMultiaxisRunFixedAxes", "bound, embedding take": "GatherMultiaxisBoundFloat",
                "bound, GatherElements": "GatherMultiaxisBoundFloat", "bound group of 2 tables": "GatherMultiaxisBoundGroupFloatInt64",
                "plain op (session_options())": "GatherMultiaxis"}
    for form, (model, _) in form_models().items():
        rewritten = rewrite_model(model)[0]
        if form.startswith("plain op"):
            nodes = rewritten.graph.node
        else:
            options = BindOptions(recorded_form=form != RUN_TIME_ALIGNED_RUN_OP)
            nodes = prepare_model(onnx.load_from_string(rewritten.SerializeToString()), options=options).model.graph.node
        assert expected[form] in [node.op_type for node in nodes], (form, [node.op_type for node in nodes])
    rows = form_breakdown(repeats=2, calls=2)
    assert [row["form"] for row in rows] == list(expected)
    assert all(row["crossings"] == 1 and all(row[name]["median_us"] > 0 for name in FORM_VARIANTS) for row in rows)
    table = format_form_breakdown(rows)
    assert table.count("\n") == len(rows) + 1 and "| GatherND (fixed axes) |" in table
