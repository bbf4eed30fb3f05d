"""bench.bigmodel: the models the big-model benchmarks build compute what they say they do; the big graph's
rewrite against another installation's."""

import sys

import numpy as np
import onnx
import pytest

from gathermultiaxis.bench.bigmodel import (WIDTH, Measured, build_big_graph, build_big_model, format_big_graph,
                                            measure_big_graph)


def test_big_graph_is_a_chain_of_column_reversals_plus_one():
    ort = pytest.importorskip("onnxruntime", reason="the chain runs in onnxruntime")
    model = build_big_graph(3)
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["Gather", "Add"] * 3
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    expected = x
    for _ in range(3):
        expected = expected[:, ::-1] + 1
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], expected)


def test_big_model_reads_its_external_table(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="the model runs in onnxruntime")
    path = build_big_model(tmp_path, 1e-4)  # a small table: 24 rows
    rows = int(1e-4 * 1e9) // (WIDTH * 4)
    assert (tmp_path / "big.onnx.weights").stat().st_size == rows * WIDTH * 4
    ids = np.array([0, 3, rows - 1, 1], np.int64)
    out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"ids": ids})[0]
    # rows 0, 3 and the last hold arange(WIDTH) + row, the others zeros; the projection keeps the first 8
    # columns and the bias adds arange(8)
    marked = {0: 0, 3: 3, rows - 1: -1}
    expected = np.stack([(np.arange(8) + marked[i] if i in marked else np.zeros(8)) + np.arange(8) for i in ids])
    np.testing.assert_array_equal(out, expected.astype(np.float32))


def test_measured_medians():
    measured = Measured(seconds=[3.0, 1.0, 2.0], peak_rss_mib=[10.0, 30.0, 20.0], cpu_seconds=[0.5, 0.7, 0.1])
    assert (measured.median_seconds, measured.median_peak_rss_mib, measured.median_cpu_seconds) == (2.0, 20.0, 0.5)


def test_big_graph_against_another_python_compares_the_output_bytes(tmp_path):
    run = measure_big_graph(5, repeats=1, folder=tmp_path, against=sys.executable)
    assert run.output_loads and run.same_output and len(run.output_sha256) == 64
    assert run.against is not None and run.against.cpu_seconds[0] > 0
    assert run.rewrite_over_load_infer_save["cpu_seconds"] > 0 and run.against_over_load_infer_save is not None
    report = format_big_graph(run)
    assert "| gathermultiaxis rewrite (--against) |" in report and "same output bytes in every round: yes" in report
    assert "| onnx.load + infer_shapes + save |" in report
