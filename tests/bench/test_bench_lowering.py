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
    assert "Summary against issue 27's goals" in out and "goal <= 1.1:" in out and "    forms    " in out
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
