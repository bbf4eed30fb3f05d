"""The runtime's private onnxruntime / onnxruntime-extensions APIs (ops/runtime/internals.py).

Every name is checked on the installed versions; a missing one (simulated by deleting it, in this process
and in a fresh one that then imports the package) gives one PrivateAPIError naming it and the tested
versions, never an AttributeError from deep inside, a crash or a wrong result."""

import subprocess
import sys
import textwrap

import pytest

from gathermultiaxis.graphs.ranks import symbolic_inference
from gathermultiaxis.ops.private_api import TESTED_VERSIONS, PrivateAPIError
from gathermultiaxis.ops.runtime import internals


@pytest.fixture
def fresh_lookups():
    """Each test looks the groups up again (they are cached per process), and leaves them fresh."""
    groups = (internals.session_internals, internals.pyop_internals, symbolic_inference.symbolic_shape_inference,
              symbolic_inference.symbolic_shape_infer_module)
    for group in groups:
        group.cache_clear()
    yield
    for group in groups:
        group.cache_clear()


def test_every_private_name_is_there_on_the_installed_versions(fresh_lookups):
    internals.probe_all()
    found = internals.session_internals()
    import onnxruntime as ort

    assert issubclass(ort.InferenceSession, found.session_class)
    assert callable(internals.pyop_internals().generic_invoker)


@pytest.mark.parametrize("module, owner, name", [
    ("onnxruntime_extensions._ocos", None, "_on_pyop_invocation"),
    ("onnxruntime_extensions", "PyCustomOpDef", "install_hooker"),
    ("onnxruntime.capi.onnxruntime_inference_collection", "Session", "_validate_input"),
    ("onnxruntime.capi.onnxruntime_inference_collection", "InferenceSession", "_create_inference_session"),
    ("onnxruntime.tools.symbolic_shape_infer", "SymbolicShapeInference", "_infer_impl"),  # probe_all looks it up too
])
def test_a_missing_private_name_is_one_clear_error(fresh_lookups, monkeypatch, module, owner, name):
    import importlib

    target = importlib.import_module(module)
    if owner is not None:
        target = getattr(target, owner)
    monkeypatch.delattr(target, name)
    with pytest.raises(PrivateAPIError) as raised:
        internals.probe_all()
    message = str(raised.value)
    assert name in message and TESTED_VERSIONS in message
    assert "onnxruntime " in message  # the installed versions are named


def test_a_session_state_attribute_ort_stopped_setting_is_one_clear_error():
    class Renamed:  # a session object of a release that keeps its C session under another name
        _inputs_meta = _outputs_meta = _providers = []

    with pytest.raises(PrivateAPIError, match="InferenceSession._sess"):
        internals.session_state(Renamed())


def test_the_package_refuses_to_start_on_a_bridge_without_its_invoker(tmp_path):
    """In a fresh process: the private invoker gone before gathermultiaxis is imported (as a future
    onnxruntime-extensions might ship it); creating a session fails with the adapter's error."""
    script = textwrap.dedent("""
        import onnxruntime_extensions._ocos as ocos
        del ocos._on_pyop_invocation
        try:
            import gathermultiaxis
            gathermultiaxis.session_options()
        except ImportError as error:
            print(type(error).__name__, error)
            raise SystemExit(3)
        print("no error")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr[-2000:])
    assert done.stdout.startswith("PrivateAPIError") and "_on_pyop_invocation" in done.stdout
    assert TESTED_VERSIONS in done.stdout

