"""``gathermultiaxis bench lowering`` as a smoke test on its kernels and on the bundled example: the
report's structure and its bit-exactness columns. No timing assertions (the machine is shared; speed
targets live in the benchmark's own summary, from full runs on a quiet machine)."""

import json

import pytest
from onnx import TensorProto, helper

from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH
from gathermultiaxis.graphs import lower_model
from gathermultiaxis.bench.lowering import KERNEL_GOAL, kernels, op_counts, prepare
from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE

KERNELS = [subject.name for subject in kernels()]


def test_kernels_report(tmp_path, capsys):
    report = tmp_path / "lowering.json"
    assert main(["bench", "lowering", "--repeats", "2", "--processes", "1", "--json", str(report)]) == 0
    payload = json.loads(report.read_text())
    rows = payload["rows"]
    assert [row["name"] for row in rows] == KERNELS and len(KERNELS) == 6
    for row in rows:
        assert row["kind"] == "kernel" and row["gathers_rewritten"] == 1, row["name"]
        assert row["all_lowered"] and row["not_lowered"] == [], row["name"]
        # the lowered kernel computes exactly what its builtin (or hand-written) form computes
        assert row["bit_identical"] is True and row["bit_identical_unoptimized"] is True, row["notes"]
        assert row["processes"] == 1 and set(row["median_ms"]) == {"original", "lowered"}
        assert min(row["median_ms"].values()) > 0 and row["ratio"] > 0
        assert row["spread"] == [row["ratio"], row["ratio"]]  # one round
        assert row["nodes"]["original"] == sum(row["op_counts"]["original"].values())
        assert row["nodes"]["lowered"] == sum(row["op_counts"]["lowered"].values())
        assert row["node_ratio"] == row["nodes"]["lowered"] / row["nodes"]["original"]
        assert f"{DOMAIN}::{OP_TYPE}" not in row["op_counts"]["lowered"]
        assert sum(row["forms"].values()) == 1 and len(row["general"]) == row["forms"].get("general", 0)
    baselines = {row["name"]: row["baseline"] for row in rows}
    assert sum(b.startswith("builtin") for b in baselines.values()) == 4
    assert sum(b.startswith("hand-written") for b in baselines.values()) == 2
    kernel_summary = payload["summary"]["kernels"]
    assert list(kernel_summary) == KERNELS
    for name, entry in kernel_summary.items():
        builtin = baselines[name].startswith("builtin")
        assert entry["goal"] == (KERNEL_GOAL if builtin else None)
        assert entry["verdict"] in (("met", "not met") if builtin else
                                    ("no builtin: the cost against the hand-written form",))
    assert payload["summary"]["all lowered"] and payload["summary"]["all bit-identical"]
    assert payload["summary"]["models"] == 0 and payload["summary"]["time geometric mean"]["value"] is None
    out = capsys.readouterr().out
    assert "| model | against | GatherMultiaxis | all lowered |" in out
    assert "Summary against the lowering's goals" in out and "goal <= 1.1:" in out and "    forms    " in out
    assert all(name in out for name in KERNELS)


def test_a_model_row_and_its_summary(tmp_path, capsys):
    report = tmp_path / "lowering.json"
    assert main(["bench", "lowering", str(EXAMPLE_PATH), "--no-kernels", "--repeats", "1", "--processes", "2",
                 "--json", str(report)]) == 0
    payload = json.loads(report.read_text())
    [row] = payload["rows"]
    assert row["processes"] == 2 and row["spread"][0] <= row["ratio"] <= row["spread"][1]
    assert (row["name"], row["kind"], row["inputs"], row["gathers_rewritten"]) == ("gathers.onnx", "model", "[1, 16]", 8)
    assert row["all_lowered"] and row["bit_identical"] and row["bit_identical_unoptimized"]
    # every gather of the example (two of them in an If's branches) was rewritten, and then lowered
    assert sum(row["op_counts"]["original"].get(op, 0) for op in ("Gather", "GatherElements", "GatherND")) == 8
    summary = payload["summary"]
    assert summary["models timed"] == summary["models"] == 1 and summary["kernels"] == {}
    assert summary["time geometric mean"]["value"] == pytest.approx(row["ratio"])
    assert summary["time max"]["model"] == summary["nodes max"]["model"] == "gathers.onnx"
    assert summary["nodes max"]["verdict"] == ("met" if row["node_ratio"] <= 1.15 else "not met")
    assert "time, geometric mean" in capsys.readouterr().out


def test_refuses_nothing_to_measure_and_missing_files(tmp_path, capsys):
    assert main(["bench", "lowering", "--no-kernels"]) == 2
    assert "nothing to measure" in capsys.readouterr().err
    assert main(["bench", "lowering", str(tmp_path / "absent.onnx")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert main(["bench", "lowering", str(tmp_path)]) == 2
    assert "no .onnx file" in capsys.readouterr().err


def test_a_difference_is_reported_not_hidden(tmp_path, monkeypatch):
    """A lowering that changed the outputs is reported as not bit-identical (the column can fail)."""
    import gathermultiaxis.graphs as graphs

    def wrong_lowering(model):
        lowered, report = lower_model(model)
        add_one = helper.make_node("Add", ["output_before", "one"], [lowered.graph.output[0].name])
        for node in lowered.graph.node:
            node.output[:] = ["output_before" if name == lowered.graph.output[0].name else name for name in node.output]
        lowered.graph.node.append(add_one)
        lowered.graph.initializer.append(helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]))
        return lowered, report

    monkeypatch.setattr(graphs, "lower_model", wrong_lowering)
    embedding = kernels()[0]
    row = prepare(embedding, tmp_path / "k")
    assert row.all_lowered and row.bit_identical is False and row.bit_identical_unoptimized is False
    assert any("differs" in note for note in row.notes)


def test_op_counts_leave_out_constants_and_name_custom_domains():
    nodes = [helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.INT64, [1], [0])),
             helper.make_node(OP_TYPE, ["x", "c", "c"], ["y"], domain=DOMAIN, mode="error"),
             helper.make_node("Gather", ["y", "c"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    counts = op_counts(helper.make_model(graph))
    assert counts == {f"{DOMAIN}::{OP_TYPE}": 1, "Gather": 1}


def runtime_param(name: str):
    """A pytest param for runtime ``name`` that skips, saying why, when it cannot run here."""
    from gathermultiaxis.conformance.runtimes import RuntimeUnavailable, check_available

    try:
        check_available(name)
        reason = ""
    except RuntimeUnavailable as error:
        reason = str(error)
    return pytest.param(name, marks=pytest.mark.skipif(bool(reason), reason=reason))


@pytest.mark.parametrize("form", ["lowered", "webnn"])
@pytest.mark.parametrize("name", [runtime_param(name) for name in ("ort", "openvino", "tract")])
def test_runtime_mode_table(name, form, tmp_path, capsys):
    """``bench lowering --runtime R`` on the bundled example, 3 repeats in 2 rounds of fresh processes: the
    table's structure, outputs the same on R, ratios positive and finite (no timing asserted)."""
    import math

    report = tmp_path / "runtime.json"
    assert main(["bench", "lowering", str(EXAMPLE_PATH), "--no-kernels", "--runtime", name, "--repeats", "3",
                 "--processes", "2", "--json", str(report)] + (["--webnn"] if form == "webnn" else [])) == 0
    payload = json.loads(report.read_text())
    [row] = payload["rows"]
    assert (row["name"], row["runtime"], row["form"], row["processes"]) == ("gathers.onnx", name, form, 2), row["notes"]
    assert row["same_outputs"] is True and row["notes"] == [] and row["version"]
    assert set(row["median_ms"]) == {"original", "lowered"}
    low, high = row["spread"]
    for value in (*row["median_ms"].values(), row["ratio"], low, high):
        assert math.isfinite(value) and value > 0
    assert low <= row["ratio"] <= high
    entry = payload["summary"][name]
    assert (entry["timed"], entry["rows"], entry["worst model"]) == (1, 1, "gathers.onnx")
    assert entry["geometric mean"] == pytest.approx(row["ratio"]) and entry["worst"] == row["ratio"]
    out = capsys.readouterr().out
    assert f"| runtime | model | original ms | {form} ms | {form} / original [per-round min-max] | rounds " in out
    assert f"| {name} | gathers.onnx | " in out and f"  {name:<9} {row['version']}: 1 of 1 timed;" in out


def test_runtime_mode_misuse_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    """--webnn without --runtime, and a runtime that cannot run here, are refused before anything runs."""
    assert main(["bench", "lowering", str(EXAMPLE_PATH), "--webnn"]) == 2
    assert capsys.readouterr().err.strip().endswith("lowering: --webnn goes with --runtime")
    monkeypatch.setenv("GATHERMULTIAXIS_WEB_NODE_MODULES", str(tmp_path / "nowhere"))
    assert main(["bench", "lowering", str(EXAMPLE_PATH), "--runtime", "web"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--runtime web: the web runtime needs" in err
