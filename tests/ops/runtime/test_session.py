"""gathermultiaxis.InferenceSession and session_options() on the cases that used to end the process or
hand an error to the wrong run. Each case runs in a child process (session_cases.py), so a crash
fails one test instead of the run."""

import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto
from support import gather_multiaxis_model

import gathermultiaxis
from gathermultiaxis.ops.runtime.registration import bound_table, bound_table_keys
from gathermultiaxis.ops.runtime.session import RUN_TOKEN

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: session_cases.py and support.py

# What the session_options() path cannot do (README, "The operator in ONNX Runtime"): its nodes carry no
# run token and its data always crosses the bridge. run_async and parallel runs there are checked not to
# end the process (errors reach some run, not always theirs); strings it cannot carry are refused.
OPTIONS_PATH_LIMITS = {
    "binding": "binding constant tables is a step of gathermultiaxis.InferenceSession",
    "scan_varying": "a Scan body output of changing shape written by the PyOp ends the process (docs/running.md); "
                    "the session routes it through a copy in its in-memory model, a model file is the user's",
}
CASES = ["run_async", "iobinding", "parallel", "scan", "scan_varying", "strings", "uint64", "extensions_before", "extensions_after",
         "extensions_before_passes", "binding", "ortvaluevector", "async_dropped", "own_hook"]


@pytest.mark.parametrize("entry", ["session", "default", "options"])
@pytest.mark.parametrize("case", CASES)
def test_case_in_child_process(case, entry):
    """``session``: every node on the kernel; ``default``: InferenceSession as users create it (nodes one
    standard gather computes run builtin); ``options``: ORT's session with session_options()."""
    if entry == "options" and case in OPTIONS_PATH_LIMITS:
        pytest.skip(OPTIONS_PATH_LIMITS[case])
    child = subprocess.run([sys.executable, os.path.join(HERE, "session_cases.py"), case, entry], cwd=HERE,
                           capture_output=True, text=True, timeout=600)
    assert child.returncode == 0 and child.stdout.strip().endswith("OK"), (
        f"exit code {child.returncode}\n{child.stdout[-2000:]}\n{child.stderr[-4000:]}")


def test_import_patches_nothing():
    """Import and register() change nothing in onnxruntime; session_options() wraps only
    InferenceSession.__init__ (guard_onnxruntime_sessions), never the run methods of the Session class, and
    only sessions created with its options get run wrappers."""
    code = ("import onnxruntime.capi.onnxruntime_inference_collection as c; before = dict(vars(c.Session)); "
            "init = c.InferenceSession.__init__; "
            "import gathermultiaxis, numpy; from gathermultiaxis.ops import register; register(); "
            "assert c.InferenceSession.__init__ is init, 'patched on import'; gathermultiaxis.session_options(); "
            "assert dict(vars(c.Session)) == before, 'Session methods patched'; "
            "assert c.InferenceSession.__init__ is not init; print('OK')")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0 and "OK" in child.stdout, child.stderr


def test_hidden_token_and_drop_in_methods(tmp_path):
    model = gather_multiaxis_model(TensorProto.INT32, TensorProto.INT64)
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "gathermultiaxis_profile")
    sess = gathermultiaxis.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    assert [i.name for i in sess.get_inputs()] == ["input", "indices", "axes"]
    assert RUN_TOKEN not in [i.name for i in sess.get_inputs()]
    assert [o.name for o in sess.get_outputs()] == ["output"]
    assert sess.get_providers() == ["CPUExecutionProvider"]
    output = sess.run(["output"], {"input": np.arange(4, dtype=np.int32), "indices": np.array([3, 0]),
                                   "axes": np.array([0])})[0]
    np.testing.assert_array_equal(output, [3, 0])
    profile = sess.end_profiling()
    assert os.path.exists(profile)
    os.remove(profile)


def test_bound_tables_are_released_with_the_session():
    from gathermultiaxis.graphs import rewrite_model
    from session_cases import embedding_model, table_tensor

    before = bound_table_keys()
    rewritten, _ = rewrite_model(embedding_model(table_tensor(TensorProto.FLOAT, [10, 4], np.random.default_rng(1)),
                                                 [2]))
    sess = gathermultiaxis.InferenceSession(rewritten, run_builtin_gathers=False)
    assert sess.bound_tables == 1 and len(bound_table_keys() - before) == 1
    [key] = bound_table_keys() - before
    assert bound_table(key) is not None  # what the op finds under the node's key
    del sess
    assert bound_table_keys() == before and bound_table(key) is None


def test_options_from_session_options_are_used_as_they_are():
    """Config entries cannot be copied, so options prepared with session_options() are used directly."""
    options = gathermultiaxis.session_options(ort.SessionOptions())
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = gathermultiaxis.InferenceSession(gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64), options,
                                            providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    assert sess.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    feeds = {"input": np.arange(6, dtype=np.float32).reshape(2, 3), "indices": np.array([[2, 0]]),
             "axes": np.array([1])}
    np.testing.assert_array_equal(sess.run(None, feeds)[0], [[2, 0], [5, 3]])
    with pytest.raises(gathermultiaxis.GatherIndexError, match="index 3 at"):
        sess.run(None, {**feeds, "indices": np.array([[3, 0]])})
