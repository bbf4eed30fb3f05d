"""The session's call path and options (issue 21 items 1-4; issue 18 items 10 and 15): what the session
keeps of the user's options, the hidden token, and that nothing the package installs changes sessions it
did not make. The node forms it runs and float16 outputs: tests/ops/runtime/bind/test_bind_pass.py. Timings live in
`bench --runtime`, not here."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from session_cases import GOOD
from support import gather_multiaxis_model, make_model

import gathermultiaxis
from gathermultiaxis.ops.runtime import registration
from gathermultiaxis.ops.runtime.session import RUN_TOKEN

SPINNING = "session.intra_op.allow_spinning"
MODEL = gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64)


def entry(sess, key):
    return registration.config_entry(sess.get_session_options(), key)


def test_threading_is_left_as_the_user_or_ort_sets_it():
    """No spinning or thread-count entry is added (ORT's defaults measured best, README "No threading
    changes"); the user's own entry reaches the session, and the caller's options are left as they were."""
    sess = gathermultiaxis.InferenceSession(MODEL, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    assert entry(sess, SPINNING) is None
    for value in ("0", "1"):
        options = ort.SessionOptions()
        options.add_session_config_entry(SPINNING, value)
        sess = gathermultiaxis.InferenceSession(MODEL, options, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
        assert entry(sess, SPINNING) == value
        assert registration.config_entry(options, SPINNING) == value
        assert registration.config_entry(gathermultiaxis.session_options(options), SPINNING) == value
    assert registration.config_entry(gathermultiaxis.session_options(ort.SessionOptions()), SPINNING) is None


def test_user_config_entries_and_properties_survive_the_copy():
    options = ort.SessionOptions()
    options.add_session_config_entry("session.disable_prepacking", "1")
    options.add_session_config_entry("session.use_env_allocators", "1")
    options.add_session_config_entry("optimization.disable_specified_optimizers", "ConstantFolding")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.intra_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    sess = gathermultiaxis.InferenceSession(MODEL, options, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    assert entry(sess, "session.disable_prepacking") == "1"
    assert entry(sess, "session.use_env_allocators") == "1"
    assert entry(sess, "optimization.disable_specified_optimizers") == "ConstantFolding"
    used = sess.get_session_options()
    assert used.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert used.intra_op_num_threads == 1 and used.execution_mode == ort.ExecutionMode.ORT_PARALLEL
    np.testing.assert_array_equal(sess.run(None, GOOD)[0], [[2, 0], [5, 3]])


def test_config_keys_are_ones_ort_knows():
    """Every key the copy carries is one ORT accepts (a typo would silently carry nothing)."""
    from gathermultiaxis.ops.runtime.session import CONFIG_KEYS

    assert SPINNING in CONFIG_KEYS and len(set(CONFIG_KEYS)) == len(CONFIG_KEYS)
    assert all(key.count(".") >= 1 and key == key.strip() for key in CONFIG_KEYS)


def test_optimized_model_filepath_is_refused(tmp_path):
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    with pytest.raises(ValueError, match="cannot save its optimized model"):
        gathermultiaxis.InferenceSession(MODEL, options, run_builtin_gathers=False)
    assert not (tmp_path / "optimized.onnx").exists()


def test_token_name_cannot_collide_and_stays_hidden():
    colliding = onnx.ModelProto()
    colliding.CopyFrom(MODEL)
    node = colliding.graph.node[0]
    node.input[0] = RUN_TOKEN  # the user's own input has the token's usual name
    colliding.graph.input[0].name = RUN_TOKEN
    sess = gathermultiaxis.InferenceSession(colliding, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    names = [value.name for value in sess.get_inputs()]
    assert names == [RUN_TOKEN, "indices", "axes"] and len(sess._inputs_meta) == 3
    feeds = {RUN_TOKEN: GOOD["input"], "indices": GOOD["indices"], "axes": GOOD["axes"]}
    np.testing.assert_array_equal(sess.run(None, feeds)[0], [[2, 0], [5, 3]])
    plain = gathermultiaxis.InferenceSession(MODEL, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    with pytest.raises(ValueError) as missing:
        plain.run(None, {"input": GOOD["input"], "axes": GOOD["axes"]})
    assert "indices" in str(missing.value) and "run_token" not in str(missing.value)


def test_nothing_changes_sessions_the_package_did_not_make():
    """session_options() gives run wrappers only to sessions created with its options (they become
    instances of a subclass with wrapped run methods): a builtin-only session keeps onnxruntime's own
    class and methods (no per-run cost)."""
    from onnxruntime.capi.onnxruntime_inference_collection import Session

    value = helper.make_tensor_value_info
    builtin_model = make_model([helper.make_node("Identity", ["x"], ["y"])], [value("x", TensorProto.FLOAT, [2])],
                               [value("y", TensorProto.FLOAT, [2])])
    options = gathermultiaxis.session_options()
    builtin = ort.InferenceSession(builtin_model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert "run" not in vars(builtin) and type(builtin) is ort.InferenceSession and type(builtin).run is Session.run
    assert all(getattr(Session, name).__module__ == Session.__module__ for name in ("run", "run_with_ort_values"))
    ours = ort.InferenceSession(MODEL.SerializeToString(), options, providers=["CPUExecutionProvider"])
    assert type(ours) is not ort.InferenceSession and type(ours).run is not Session.run
    with pytest.raises(gathermultiaxis.GatherIndexError, match="index 7 at"):
        ours.run(None, {**GOOD, "indices": np.array([[7, 0]])})
    package = gathermultiaxis.InferenceSession(MODEL, options, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    assert type(package) is gathermultiaxis.InferenceSession  # the package's own session raises by run token


def test_run_tokens_are_lent_and_an_error_stays_with_its_run():
    """run() feeds a token array it reuses (ORT takes an array it has seen before faster): an error is
    raised by the run that caused it and never by the next run, which holds the same token again."""
    from gathermultiaxis.ops.runtime.run_errors import RUN_ERRORS

    sess = gathermultiaxis.InferenceSession(MODEL, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    np.testing.assert_array_equal(sess.run(None, GOOD)[0], [[2, 0], [5, 3]])
    lent = RUN_ERRORS.lend_token()
    RUN_ERRORS.give_back(lent)
    assert not lent[1].flags.writeable and int(lent[1]) == lent[0]
    for _ in range(3):
        with pytest.raises(gathermultiaxis.GatherIndexError, match="index 7 at"):
            sess.run(None, {**GOOD, "indices": np.array([[7, 0]])})
        np.testing.assert_array_equal(sess.run(None, GOOD)[0], [[2, 0], [5, 3]])
    again = RUN_ERRORS.lend_token()
    RUN_ERRORS.give_back(again)
    assert again[0] == lent[0]  # one run at a time: one token, lent over and over
    first, second = RUN_ERRORS.lend_token(), RUN_ERRORS.lend_token()
    assert first[0] != second[0]  # two runs at once never share one
    RUN_ERRORS.give_back(first)
    RUN_ERRORS.give_back(second)


def test_fixed_axes_one_dimensional_shortcut_keeps_errors_and_strings():
    """The fixed-axes node's 1-D take shortcut (attributes parsed once per node): negative indices count from
    the end, an out-of-range index still names its position, and string data takes the general way."""
    from gathermultiaxis.graphs import rewrite_model
    from gathermultiaxis.ops.runtime.session import prepare_model

    value = helper.make_tensor_value_info
    for elem_type, data in ((TensorProto.INT64, np.array([5, 6, 7], np.int64)),
                            (TensorProto.STRING, np.array(["a", "b", "c"], dtype=object))):
        model = make_model([helper.make_node("Gather", ["data", "i"], ["out"], axis=0)],
                           [value("data", elem_type, [3]), value("i", TensorProto.INT64, [2])],
                           [value("out", elem_type, [2])])
        rewritten = rewrite_model(model)[0]
        sess = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
        assert any(node.op_type == "GatherMultiaxisRunFixedAxes" for node in
                   prepare_model(rewritten).model.graph.node)
        np.testing.assert_array_equal(sess.run(None, {"data": data, "i": np.array([2, -3])})[0], data[[2, 0]])
        with pytest.raises(gathermultiaxis.GatherIndexError, match=r"index 3 at indices\[1\]"):
            sess.run(None, {"data": data, "i": np.array([0, 3])})


def test_count_crossings_counts_a_runs_bridge_calls_and_puts_the_hook_back():
    """bench end-to-end's crossings column: the calls one run makes, as the graph count says; afterwards the
    package's own hook answers again."""
    sess = gathermultiaxis.InferenceSession(MODEL, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    result, crossings = registration.count_crossings(lambda: sess.run(None, GOOD))
    np.testing.assert_array_equal(result[0], [[2, 0], [5, 3]])
    assert crossings == sess.bridge_crossings == 1
    assert registration.count_crossings(lambda: None)[1] == 0
    assert registration.bridge_info()["own_hook"]
    np.testing.assert_array_equal(sess.run(None, GOOD)[0], [[2, 0], [5, 3]])


def rewritten_gather():
    """A rewritten 1-D int64 Gather (constant axes: a fixed-axes node in the session)."""
    from gathermultiaxis.graphs import rewrite_model

    value = helper.make_tensor_value_info
    model = make_model([helper.make_node("Gather", ["data", "i"], ["out"], axis=0)],
                       [value("data", TensorProto.INT64, [3]), value("i", TensorProto.INT64, [2])],
                       [value("out", TensorProto.INT64, [2])])
    return rewrite_model(model)[0]


FEEDS = {"data": np.array([5, 6, 7], np.int64), "i": np.array([2, -3], np.int64)}


def test_call_path_steps_are_passed_to_register_and_give_the_same_results():
    """``register(call_path=CallPath(...))`` switches a shortcut off (bench runtime's breakdown); the results
    stay bit for bit the same, and ``register()`` puts every step back."""
    from gathermultiaxis.ops.runtime.registration import CallPath

    sess = gathermultiaxis.InferenceSession(rewritten_gather(), providers=["CPUExecutionProvider"],
                                            run_builtin_gathers=False)
    try:
        for call_path in (CallPath(take_1d=False), CallPath(take_bound=False), CallPath(False, False)):
            registration.register(call_path=call_path)
            assert registration.active_call_path() == call_path
            np.testing.assert_array_equal(sess.run(None, FEEDS)[0], [7, 5])
            with pytest.raises(gathermultiaxis.GatherIndexError, match=r"index 3 at indices\[1\]"):
                sess.run(None, {**FEEDS, "i": np.array([0, 3], np.int64)})
    finally:
        registration.register()
    assert registration.active_call_path() == CallPath()


def test_bind_options_switch_node_forms_off_with_the_same_results():
    """``InferenceSession(..., bind_options=BindOptions(...))``: each node form of the bind step can be left
    out; the in-memory model differs, the outputs do not."""
    from gathermultiaxis.ops.runtime.bind import BindOptions
    from gathermultiaxis.ops.runtime.session import prepare_model

    rewritten = rewritten_gather()
    for options in (None, BindOptions(fixed_axes=False), BindOptions(absorb_alignment=False),
                    BindOptions(float16_output=False), BindOptions(group_shared_indices=False)):
        sess = gathermultiaxis.InferenceSession(rewritten, providers=["CPUExecutionProvider"],
                                                run_builtin_gathers=False, bind_options=options)
        np.testing.assert_array_equal(sess.run(None, FEEDS)[0], [7, 5])
    op_types = {options: [node.op_type for node in prepare_model(onnx.load_from_string(rewritten.SerializeToString()),
                                                                 options=options).model.graph.node]
                for options in (BindOptions(), BindOptions(fixed_axes=False))}
    assert "GatherMultiaxisRunFixedAxes" in op_types[BindOptions()]
    assert "GatherMultiaxisRun" in op_types[BindOptions(fixed_axes=False)]
