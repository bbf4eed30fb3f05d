"""``lower --target webnn`` and ``webnn-check`` (issue 22, item 1): every GatherMultiaxis becomes ops that
map one-to-one onto WebNN, bit-identical on plain ORT (graph optimizations off, as ``check`` compares)
wherever the original does not raise; the lowered nodes are all inside what ORT's WebNN EP takes."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.conformance.cases import default_suite
from gathermultiaxis.cli import main
from gathermultiaxis.conformance.fuzz import fuzz_case
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.graphs.webnn import NotStatic, lower_for_webnn, lowering_findings, webnn_check
from gathermultiaxis.harness import bit_identical, make_session
from gathermultiaxis.ops import Mode, gather_multiaxis
from gathermultiaxis.ops.contract import DOMAIN, OP_TYPE


def compare(model, feeds) -> str:
    """"exact", "raises" (the original refuses the feeds: WebNN cannot raise), or what differs."""
    try:
        want = make_session(model, custom=False).run(None, feeds)
    except Exception:  # noqa: BLE001
        return "raises"
    shapes = {name: value.shape for name, value in feeds.items()}
    rewritten, _ = rewrite_model(model)
    lowered, report = lower_for_webnn(rewritten, shapes)
    assert not any(node.domain == DOMAIN for node in lowered.graph.node)
    got = make_session(lowered, custom=False).run(None, feeds)
    if not all(bit_identical(a, b) for a, b in zip(got, want)):
        return "differs"
    findings = lowering_findings(lowered, report, shapes)
    return "exact" if not findings else f"findings: {findings[:2]}"


def test_onnx_node_tests_and_the_example():
    verdicts = {}
    for case in default_suite():
        for number, data_set in enumerate(case.data_sets or []):
            try:
                verdicts[f"{case.name}#{number}"] = compare(case.model, data_set.feeds)
            except Exception as error:  # noqa: BLE001 - ORT cannot run some node tests at all
                verdicts[f"{case.name}#{number}"] = f"not runnable: {type(error).__name__}"
    bad = {name: v for name, v in verdicts.items() if v not in ("exact", "raises") and not v.startswith("not runnable")}
    assert not bad, bad
    assert sum(v == "exact" for v in verdicts.values()) >= 70


def test_fuzz_cases():
    counts = {}
    for seed in range(150):
        case = fuzz_case(seed)
        for data_set in case.data_sets:
            verdict = compare(case.model, data_set.feeds)
            counts[verdict] = counts.get(verdict, 0) + 1
    assert set(counts) <= {"exact", "raises"}, counts
    assert counts["exact"] >= 100


def _model(node, inputs, initializers=(), opset=17):
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("name, node, data, indices", [
    ("gather_nd batch_dims 1", helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1),
     np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.array([[[2], [0]], [[1], [-1]]])),
    ("broadcasting gather_elements", helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1),
     np.arange(20, dtype=np.float32).reshape(4, 5), np.array([[4, 0], [1, -2]])),
    ("rank-0 gather", helper.make_node("Gather", ["x", "i"], ["y"], axis=0),
     np.arange(5, dtype=np.float32), np.array(3)),
])
def test_what_the_webnn_ops_cannot_take_directly(name, node, data, indices):
    """GatherND with batch_dims, GatherElements with smaller indices, a scalar index: after rewrite and
    the WebNN lowering, every node is inside the EP's subset, and the result is ORT's."""
    model = _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(data.shape)),
                          helper.make_tensor_value_info("i", TensorProto.INT64, list(indices.shape))])
    assert webnn_check(model)  # the original is outside the subset
    feeds = {"x": data, "i": indices}
    assert compare(model, feeds) == "exact"
    rewritten, _ = rewrite_model(model)
    lowered, report = lower_for_webnn(rewritten)
    assert report.left == 0 and webnn_check(lowered) == []


@pytest.mark.parametrize("mode", [Mode.CLAMP, Mode.ZERO, Mode.ERROR])
def test_out_of_range_indices(mode):
    """clamp and zero as the kernel does them; error cannot raise in WebNN and reads as clamp does."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.array([[5, -1, 0, -7]])  # axes [1, 0] folded: (5, -1) and (0, -7)
    node = helper.make_node(OP_TYPE, ["x", "i", "axes"], ["y"], domain=DOMAIN, mode=mode.value)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([1, 0]), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                              ir_version=8)
    lowered, report = lower_for_webnn(model)
    assert report.lowered == 1 and webnn_check(lowered) == []
    got = make_session(lowered, custom=False).run(None, {"x": data, "i": indices})[0]
    expected = gather_multiaxis(data, indices, [1, 0], Mode.CLAMP if mode == Mode.ERROR else mode)
    np.testing.assert_array_equal(got, expected)


def test_symbolic_shapes_need_input_shapes(tmp_path, capsys):
    model = _model(helper.make_node("Gather", ["x", "i"], ["y"], axis=0),
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3]),
                    helper.make_tensor_value_info("i", TensorProto.INT64, ["m"])])
    rewritten, _ = rewrite_model(model)
    with pytest.raises(NotStatic, match="'x', 'i' have symbolic or unknown dims"):
        lower_for_webnn(rewritten)
    path = tmp_path / "r.onnx"
    onnx.save(rewritten, str(path))
    assert main(["lower", str(path), "-o", str(tmp_path / "w.onnx"), "--target", "webnn"]) == 2
    assert "give --input-shapes" in capsys.readouterr().err
    assert main(["lower", str(path), "-o", str(tmp_path / "w.onnx"), "--target", "webnn",
                 "--input-shapes", "x:[5,3]", "i:[2]"]) == 0
    assert main(["webnn-check", str(tmp_path / "w.onnx")]) == 0
    assert "every node is within WebNN's subset" in capsys.readouterr().out
    assert main(["webnn-check", str(path), "--input-shapes", "x:[5,3]", "i:[2]"]) == 1  # the custom op


def test_check_webnn_mode(capsys):
    """``check --webnn``: the runner lowers each case for WebNN with each data set's shapes; a data set the
    original refuses is "not compared" (WebNN cannot raise), never a pass."""
    assert main(["check", "--webnn", "--fuzz", "60", "--allow", "not compared"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    passed, failed, not_compared = (int(summary.split(", ")[i].split()[0]) for i in range(3))
    assert failed == 0 and passed >= 40 and passed + not_compared <= 60
