"""gathermultiaxis.InferenceSession's default: the nodes one standard gather computes run as that gather on
ORT's builtin kernel (``run_builtin_gathers``), the others on the GatherMultiaxis kernel. Compared with the
original model on plain ORT and with the kernel-only session, bit for bit, errors included."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import assert_bit_identical, make_model, reversal_model

import gathermultiaxis
from gathermultiaxis.conformance.cases import default_suite
from gathermultiaxis.conformance.check_case import check_case
from gathermultiaxis.conformance.check_results import CheckMode
from gathermultiaxis.conformance.fuzz import fuzz_case
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.ops import DOMAIN

CONTRIB = helper.make_opsetid(DOMAIN, 1)


def sessions(rewritten):
    """The default session and the kernel-only one, with ORT's default options as users create them."""
    return (gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"]),
            gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"], run_builtin_gathers=False))


def plain(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def outcome(session, feeds):
    try:
        return session.run(None, feeds)
    except Exception as error:  # noqa: BLE001 - ORT's and the op's own error types
        return error


def embedding_model(elem_type=TensorProto.FLOAT):
    table = np.arange(40, dtype=helper.tensor_dtype_to_np_dtype(elem_type)).reshape(10, 4)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["embedded"], axis=0, name="embedding"),
             helper.make_node("GatherElements", ["x", "positions"], ["taken"], axis=1, name="torch.gather")]
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "length"]),
              helper.make_tensor_value_info("x", elem_type, [3, 5]),
              helper.make_tensor_value_info("positions", TensorProto.INT64, [3, 2])]
    outputs = [helper.make_tensor_value_info("embedded", elem_type, None),
               helper.make_tensor_value_info("taken", elem_type, None)]
    return make_model(nodes, inputs, outputs, [numpy_helper.from_array(table, "table")], opset=18)


def embedding_feeds(seed, elem_type=TensorProto.FLOAT):
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(-10, 10, (2, 7)),
            "x": rng.standard_normal((3, 5)).astype(helper.tensor_dtype_to_np_dtype(elem_type)),
            "positions": rng.integers(-5, 5, (3, 2))}


@pytest.mark.parametrize("elem_type", [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64])
def test_rewritten_gathers_run_builtin_and_match_the_original(elem_type):
    model = embedding_model(elem_type)
    rewritten, _ = rewrite_model(model)
    default, kernel = sessions(rewritten)
    assert (default.builtin_gathers, default.bridge_crossings) == (2, 0)
    assert (kernel.builtin_gathers, kernel.bridge_crossings) == (0, 2)
    for seed in range(3):
        feeds = embedding_feeds(seed, elem_type)
        want = plain(model).run(None, feeds)
        for session in (default, kernel):
            for got, expected in zip(session.run(None, feeds), want):
                assert_bit_identical(got, expected)


def test_an_out_of_range_index_raises_what_the_original_raises():
    """The default session raises ORT's own error for that gather, word for word the original's (the node
    keeps its name); the kernel-only session raises the op's GatherIndexError."""
    model = embedding_model()
    rewritten, _ = rewrite_model(model)
    default, kernel = sessions(rewritten)
    feeds = embedding_feeds(0)
    feeds["ids"][1, 3] = 10
    original = outcome(plain(model), feeds)
    assert isinstance(original, Exception) and "embedding" in str(original)
    got = outcome(default, feeds)
    assert type(got) is type(original) and str(got) == str(original)
    assert isinstance(outcome(kernel, feeds), gathermultiaxis.GatherIndexError)


def multiaxis_model(axes, indices_shape):
    node = helper.make_node("GatherMultiaxis", ["x", "i", "axes"], ["y"], domain=DOMAIN, mode="error", name="gma")
    return make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, list(indices_shape))],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [numpy_helper.from_array(np.array(axes, np.int64), "axes")], opset=18, extra_opsets=[CONTRIB])


@pytest.mark.parametrize("axes, indices_shape, builtin", [([1], (1, 2, 1), 1), ([0, 2], (2, 4, 2), 0)],
                         ids=["one gather", "axes apart: the kernel"])
def test_nodes_no_single_gather_computes_stay_on_the_kernel(axes, indices_shape, builtin):
    model = multiaxis_model(axes, indices_shape)
    default, kernel = sessions(model)
    assert (default.builtin_gathers, default.bridge_crossings) == (builtin, 1 - builtin)
    rng = np.random.default_rng(1)
    sizes = np.array([(3, 4, 5)[a] for a in axes])
    for out_of_range in (False, True):
        indices = rng.integers(-sizes, sizes, (int(np.prod(indices_shape)) // len(axes), len(axes)))
        if out_of_range:
            indices[0, 0] = sizes[0] + 1
        feeds = {"x": rng.standard_normal((3, 4, 5)).astype(np.float32),
                 "i": indices.reshape(indices_shape).astype(np.int64)}
        got, want = outcome(default, feeds), outcome(kernel, feeds)
        assert isinstance(want, Exception) == out_of_range
        if out_of_range:
            assert isinstance(got, Exception)  # ORT's Gather error for the one gather, the kernel's otherwise
            assert builtin or isinstance(got, gathermultiaxis.GatherIndexError)
        else:
            assert_bit_identical(got[0], want[0])


def test_a_reversal_through_range_stays_right():
    """ORT's GatherToSliceFusion gets Gather(x, Range(T-1, -1, -1)) wrong under its default options: the
    session's single gathers are the lowering's, which never hand ORT that pattern (graphs/lower/form_plans.py),
    so the session gives the right answer with builtin gathers only."""
    model, x = reversal_model(), np.arange(12, dtype=np.float32).reshape(3, 4)
    assert plain(model).run(None, {"x": x})[0].shape == (0, 4)  # ORT's bug, still there
    default, _ = sessions(rewrite_model(model)[0])
    assert (default.builtin_gathers, default.bridge_crossings) == (2, 0)
    assert_bit_identical(default.run(None, {"x": x})[0], x[::-1])


def test_check_session_mode_passes_the_default_suite_and_fuzz_cases():
    """``check --session`` (the rewrite in the default session, ORT's default options on both sides) on the
    ONNX node tests and 300 fuzz cases: only ORT's known string-Gather bug may show as "builtin wrong"."""
    verdicts: dict[str, int] = {}
    for case in [*default_suite(), *(fuzz_case(seed) for seed in range(300))]:
        result = check_case(case, mode=CheckMode.SESSION)
        verdicts[result.verdict] = verdicts.get(result.verdict, 0) + 1
        assert result.verdict in ("passed", "not runnable", "builtin wrong"), (result.name, result.detail)
        assert result.verdict != "builtin wrong" or "STRING" in result.name, (result.name, result.detail)
    print(f"check --session, default suite + fuzz seeds 0..299: {verdicts}")
    assert verdicts["passed"] >= 350


def test_a_failing_lowering_leaves_every_node_on_the_kernel(monkeypatch):
    """The single-gather step is a speed-up: if it fails (a bug of ours), the session says so in a
    RuntimeWarning and runs every node on the kernel, still bit-exact."""
    from gathermultiaxis.graphs import lower

    def broken(model, folder=None):
        raise AssertionError("a bug in the lowering")

    monkeypatch.setattr(lower, "lower_single_gathers", broken)
    model = embedding_model()
    with pytest.warns(RuntimeWarning, match="every GatherMultiaxis node runs on the kernel.*a bug in the lowering"):
        session = gathermultiaxis.InferenceSession(rewrite_model(model)[0], providers=["CPUExecutionProvider"])
    assert (session.builtin_gathers, session.bridge_crossings) == (0, 2)
    feeds = embedding_feeds(4)
    for got, expected in zip(session.run(None, feeds), plain(model).run(None, feeds)):
        assert_bit_identical(got, expected)


def test_external_indices_outside_the_model_folder_are_refused(tmp_path):
    """Constant indices the lowering would read from external data: only from the model's folder, and a
    location outside it is refused with ORT's exception type, as for the kernel-only session."""
    import onnx
    from onnx.external_data_helper import set_external_data

    indices = numpy_helper.from_array(np.array([[3, 1]], np.int64), "ids")
    model = make_model([helper.make_node("Gather", ["x", "ids"], ["y"], axis=1)],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [indices], opset=18)
    rewritten, _ = rewrite_model(model)
    [ids] = [t for t in rewritten.graph.initializer if t.name == "ids"]
    (tmp_path / "outside.bin").write_bytes(ids.raw_data or np.array([[3, 1]], np.int64).tobytes())
    set_external_data(ids, location="../outside.bin")
    ids.ClearField("raw_data")
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save(rewritten, folder / "m.onnx")
    for builtin in (True, False):
        with pytest.raises(Exception, match="outside.bin") as caught:
            gathermultiaxis.InferenceSession(str(folder / "m.onnx"), providers=["CPUExecutionProvider"],
                                             run_builtin_gathers=builtin)
        assert type(caught.value).__name__ == "Fail", caught.value
