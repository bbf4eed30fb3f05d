"""The rewriter on many nodes: the per-graph name sets give what the graph scans gave, NameScope gives
the names counting from 0 gives, and ``rewrite`` skips the second ORT load only when it would check the
very model the first one loaded, and otherwise loads only the part that changed (graphs.load_check)."""

import numpy as np
import onnx
from sessions import builtin_session, custom_session
from support import assert_bit_identical

from gathermultiaxis import cli
from gathermultiaxis.cli import model_io as cli_model_io
from gathermultiaxis.bench.bigmodel import build_big_graph
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.graphs.ir.builder import NameScope


def test_a_chain_of_gathers_gets_one_value_info_per_replaced_output():
    model = build_big_graph(30)
    model.graph.value_info.append(onnx.helper.make_tensor_value_info("gathered3", onnx.TensorProto.FLOAT, ["n", 8]))
    rewritten, report = rewrite_model(model)
    assert report.rewritten == 30 and report.left == 0
    declared = [value.name for value in rewritten.graph.value_info]
    assert len(declared) == len(set(declared))  # gathered3 declared once: by the model, not again
    assert {f"gathered{i}" for i in range(30)} <= set(declared)
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    assert_bit_identical(custom_session(rewritten).run(None, {"x": x}), builtin_session(model).run(None, {"x": x}))


def test_name_scope_hands_out_what_counting_from_zero_would():
    taken = {"a", "a_1", "a_3", "b_1"}
    scope = NameScope(set(taken))
    names = [scope.fresh(base) for base in ("a", "a", "b", "a", "b", "a_1", "a")]
    assert names == ["a_2", "a_4", "b", "a_5", "b_2", "a_1_1", "a_6"]


def test_rewrite_loads_the_output_in_ort_only_when_it_differs_from_the_input(tmp_path, monkeypatch):
    checked = []

    def loads_in_ort(path, part=None):
        checked.append((path.name, None if part is None else len(part.graph.node)))

    monkeypatch.setattr(cli_model_io, "loads_in_ort", loads_in_ort)
    changed, unchanged = build_big_graph(2), build_big_graph(2)
    for node in unchanged.graph.node:  # no gather left: nothing to rewrite
        if node.op_type == "Gather":
            node.op_type = "Identity"
            del node.input[1:]
            del node.attribute[:]
    onnx.save(changed, tmp_path / "changed.onnx")
    onnx.save(unchanged, tmp_path / "unchanged.onnx")
    for name in ("changed", "unchanged"):
        assert cli.main(["rewrite", str(tmp_path / f"{name}.onnx"), "-o", str(tmp_path / f"{name}.out.onnx")]) == 0
    # ... and then only what changed: one Gather's replacement (the other is its repeat) and its reader
    per_gather = (len(rewrite_model(changed)[0].graph.node) - len(changed.graph.node)) // 2 + 1
    assert checked == [("changed.out.onnx", per_gather + 1)]
    assert onnx.load(tmp_path / "unchanged.out.onnx") == onnx.load(tmp_path / "unchanged.onnx")
