"""GatherMultiaxis inside ONNX Runtime sessions: bit-identical to the kernel for every registered type."""

import subprocess
import sys
import threading
from functools import lru_cache

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from onnx import TensorProto, helper
from support import assert_bit_identical, gather_cases, gather_multiaxis_model

from gathermultiaxis import GatherIndexError, InferenceSession, gather_multiaxis, session_options
from gathermultiaxis.ops import DATA_TYPES, INDEX_TYPES, bridge_info, register
from gathermultiaxis.ops.runtime.run_ops import group_signatures


def numpy_dtype(elem_type):
    return np.dtype(object) if elem_type == TensorProto.STRING else helper.tensor_dtype_to_np_dtype(elem_type)


@lru_cache(maxsize=None)
def session(elem_type, index_type, mode, entry="options"):
    """``entry``: "options" (ORT's session with session_options()) or "session" (gathermultiaxis.InferenceSession)."""
    model = gather_multiaxis_model(elem_type, index_type, mode)
    if entry == "session":
        return InferenceSession(model, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    return ort.InferenceSession(model.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])


def run(case, elem_type):
    index_type = helper.np_dtype_to_tensor_dtype(case.indices.dtype)
    feeds = {"input": case.as_dtype(numpy_dtype(elem_type)), "indices": case.indices,
             "axes": np.array(case.axes, dtype=np.int64)}
    return session(elem_type, index_type, case.mode).run(None, feeds)[0], feeds


def test_registered_types():
    assert len(DATA_TYPES) == 12 and len(INDEX_TYPES) == 2
    # plain, Run, RunFixedAxes, Recorded and Bound op types; Bound with float16 output; RunFixedAxesToFloat16
    # and RunToFloat16; BoundGroup: 2 to 4 outputs of float and int64 (12 signatures), for both index types
    assert len(group_signatures()) == 12
    assert bridge_info()["registrations"] == 5 * 24 + 2 + 2 + 2 + 12 * 2


@settings(max_examples=300, deadline=None)
@given(case=gather_cases())
def test_ort_matches_kernel_for_every_registered_type(case):
    for elem_type in DATA_TYPES:
        try:
            expected = gather_multiaxis(case.as_dtype(numpy_dtype(elem_type)), case.indices, case.axes, case.mode)
        except GatherIndexError as error:
            with pytest.raises(GatherIndexError) as raised:
                run(case, elem_type)
            assert str(raised.value) == f"GatherMultiaxis: {error}"
            continue
        actual, _ = run(case, elem_type)
        assert_bit_identical(actual, expected)


def test_session_options_is_idempotent_and_accepts_existing_options():
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    assert session_options(options) is options
    assert session_options(options) is options  # a second registration would break session creation
    model = gather_multiaxis_model(TensorProto.INT32, TensorProto.INT32)
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    output = sess.run(None, {"input": np.arange(4, dtype=np.int32), "indices": np.array([3, 0], np.int32),
                             "axes": np.array([0])})[0]
    np.testing.assert_array_equal(output, [3, 0])


@pytest.mark.parametrize("entry", ["session", "options"])
@pytest.mark.parametrize("handback", [True, False], ids=["array-handback", "list-fallback"])
def test_output_paths_agree(handback, entry):
    """The array handback and the bridge's default list path give the same bytes, strings included."""
    assert bridge_info()["handback_supported"], "the installed bridge no longer passes arrays through"
    try:
        register(handback=handback)
        assert bridge_info()["handback_active"] is handback
        rng = np.random.default_rng(0)
        data = rng.standard_normal((64, 32)).astype(np.float32)
        indices = rng.integers(-64, 64, (16, 1))
        for elem_type, values in [(TensorProto.FLOAT, data), (TensorProto.STRING, data.astype(str).astype(object)),
                                  (TensorProto.BOOL, data > 0), (TensorProto.UINT16, (data * 100).astype(np.uint16))]:
            sess = session(elem_type, TensorProto.INT64, "error", entry)
            output = sess.run(None, {"input": values, "indices": indices, "axes": np.array([0])})[0]
            assert_bit_identical(output, values[indices[:, 0]])
    finally:
        register()


@pytest.mark.parametrize("entry", ["session", "options"])
def test_threads_share_a_session(entry):
    sess = session(TensorProto.DOUBLE, TensorProto.INT64, "error", entry)
    data = np.arange(1000, dtype=np.float64).reshape(100, 10)
    failures = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            bad = rng.integers(0, 5) == 0
            indices = rng.integers(0, 100 if not bad else 200, (7, 1))
            indices[0, 0] = 150 if bad else indices[0, 0]
            try:
                output = sess.run(None, {"input": data, "indices": indices, "axes": np.array([0])})[0]
                if bad or not np.array_equal(output, data[indices[:, 0]]):
                    failures.append((seed, "wrong result"))
            except GatherIndexError as error:
                if not bad or "index 150 at indices[0, 0]" not in str(error):
                    failures.append((seed, str(error)))

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def form_session(case, elem_type, form):
    """The session's node form ``form`` over ``case``: "run" (axes an input), "fixed" (axes constant), "bound"
    (data and axes constant)."""
    from onnx import numpy_helper

    model = gather_multiaxis_model(elem_type, helper.np_dtype_to_tensor_dtype(case.indices.dtype), case.mode)
    constants = {"axes": np.array(case.axes, dtype=np.int64)} if form != "run" else {}
    if form == "bound":
        constants["input"] = case.as_dtype(numpy_dtype(elem_type))
    model.graph.initializer.extend(numpy_helper.from_array(value, name) for name, value in constants.items())
    kept = [value for value in model.graph.input if value.name not in constants]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    return InferenceSession(model, providers=["CPUExecutionProvider"], run_builtin_gathers=False), {
        name: value for name, value in {"input": case.as_dtype(numpy_dtype(elem_type)), "indices": case.indices,
                                        "axes": np.array(case.axes, dtype=np.int64)}.items() if name not in constants}


@settings(max_examples=30, deadline=None)
@given(case=gather_cases())
def test_the_fast_plan_changes_no_output_and_no_error(case):
    """Every session form, with the fast plan and without it (``CallPath(fast_plan=False)``): the same bytes,
    or the same error naming the same index; strings and bool included."""
    from gathermultiaxis.ops.runtime.registration import CallPath

    elem_type = (TensorProto.FLOAT, TensorProto.STRING, TensorProto.BOOL, TensorProto.INT64)[case.indices.size % 4]
    try:
        for form in ("run", "fixed", "bound"):
            sess, feeds = form_session(case, elem_type, form)
            outcomes = []
            for call_path in (CallPath(), CallPath(fast_plan=False)):
                register(call_path=call_path)
                try:
                    outcomes.append(sess.run(None, feeds)[0])
                except Exception as error:  # noqa: BLE001 - compared below
                    outcomes.append(f"{type(error).__name__}: {error}")
            if isinstance(outcomes[1], str):
                assert outcomes[0] == outcomes[1], form
            else:
                assert_bit_identical(outcomes[0], outcomes[1])
    finally:
        register()


@pytest.mark.parametrize("form", ["run", "fixed", "bound"])
def test_each_form_plans_once_and_reuses_the_plan(form):
    from gathermultiaxis.ops.fast_plan import FAST_PLANS
    from support import GatherCase

    case = GatherCase(np.arange(24).reshape(2, 3, 4), np.array([[[2], [-1]]]), [1], "error")
    sess, feeds = form_session(case, TensorProto.FLOAT, form)
    FAST_PLANS.clear()
    for _ in range(3):
        assert_bit_identical(sess.run(None, feeds)[0], case.as_dtype(np.float32)[:, [2, 2], :])
    assert len(FAST_PLANS) == 1 and FAST_PLANS((1,), "error", (2, 3, 4), (1, 2, 1)) is not None


_BUILTIN_ONLY_THEN_KERNEL = """
import numpy as np
from onnx import TensorProto, helper
import gathermultiaxis
from gathermultiaxis.graphs import rewrite_model
from gathermultiaxis.ops.runtime import registration
graph = helper.make_graph([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("i", TensorProto.INT64, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
model = rewrite_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))[0]
feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.array([2, 0, 1, 2])}
builtin = gathermultiaxis.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
print(registration.definitions())
kernel = gathermultiaxis.InferenceSession(model.SerializeToString(), run_builtin_gathers=False).run(None, feeds)[0]
print(registration.definitions(), builtin.tobytes() == kernel.tobytes())
"""


def test_a_session_whose_gathers_all_run_as_builtins_defines_no_pyop():
    """In a fresh process: the builtin-only session defines nothing; a kernel session then defines the ops."""
    run = subprocess.run([sys.executable, "-c", _BUILTIN_ONLY_THEN_KERNEL], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    first, after = run.stdout.split("\n")[:2]
    assert first == "0"
    count, same = after.split()
    assert int(count) > 0 and same == "True"
