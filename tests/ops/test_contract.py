"""ops.contract: the operator's contract stated once. The modes as an enum whose properties say what each
mode means, and one shape rule over known and unknown dims, used by the kernel's geometry and by the ONNX
schema alike."""

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from gathermultiaxis.graphs import register_schema
from gathermultiaxis.ops import GatherGeometry, gather_multiaxis
from gathermultiaxis.ops.contract import (CHECKING_MODE_VALUES, DATA_TYPES, DOMAIN, INDEX_TYPES, MODES, OP_TYPE,
                                          GatherIndexError, GatherShapeError, Mode, OutOfRange, is_gather_multiaxis,
                                          output_dims)

ROOT = Path(__file__).resolve().parents[2]

register_schema()  # onnx's inference then knows GatherMultiaxis


def test_mode_from_any():
    assert [Mode.from_any(m) for m in MODES] == list(Mode)
    assert Mode.from_any(Mode.CLAMP) is Mode.CLAMP and Mode.CLAMP == "clamp" and str(Mode.ZERO) == "zero"
    with pytest.raises(ValueError, match=r"mode must be one of \('error', 'error_nonempty', 'zero', 'clamp'\), got 'wrap'"):
        Mode.from_any("wrap")
    data, indices = np.arange(6).reshape(2, 3), np.array([[5, -4]])
    for mode in Mode:  # the kernel takes a Mode or its string alike
        if mode in (Mode.ZERO, Mode.CLAMP):
            assert np.array_equal(gather_multiaxis(data, indices, [1], mode), gather_multiaxis(data, indices, [1], mode.value))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_one_rule_for_known_and_unknown_dims(data):
    """Where every size is known the rule is GatherGeometry's (result or error); hiding sizes (None) never
    contradicts it: a size it still gives is the known one."""
    rank = data.draw(st.integers(1, 4))
    input_shape = data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    axes = data.draw(st.lists(st.integers(-rank - 1, rank), min_size=1, max_size=rank, unique=True))
    k = len(axes)
    indices_shape = data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    indices_shape[-1] *= data.draw(st.sampled_from([1, k]))
    try:
        expected = list(GatherGeometry.infer(input_shape, indices_shape, axes).output_shape)
    except GatherShapeError:
        with pytest.raises(GatherShapeError):
            output_dims(input_shape, indices_shape, axes)
        return
    assert output_dims(input_shape, indices_shape, axes) == expected
    hidden_in = [None if data.draw(st.booleans()) else d for d in input_shape]
    hidden_idx = [None if data.draw(st.booleans()) else d for d in indices_shape]
    partial = output_dims(hidden_in, hidden_idx, axes)
    assert all(p is None or p == e for p, e in zip(partial, expected))


def test_schema_refuses_an_out_of_range_axis_as_the_kernel_does():
    """The schema's copy of the rule wrapped axis 5 of a rank-2 input to 1 (5 % 2); the kernel refuses it."""
    node = helper.make_node(OP_TYPE, ["x", "i", "axes"], ["y"], domain=DOMAIN, mode="error")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, [2, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("axes", TensorProto.INT64, [1], [5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
    with pytest.raises(GatherShapeError, match="axis 5 is out of range for rank 2"):
        gather_multiaxis(np.zeros((2, 3)), np.zeros((2, 1), np.int64), [5])
    with pytest.raises(onnx.shape_inference.InferenceError, match="axis 5 is out of range for rank 2"):
        onnx.shape_inference.infer_shapes(model, strict_mode=True)


def test_mode_properties_say_what_each_mode_does():
    assert {mode: mode.out_of_range for mode in Mode} == {
        Mode.ERROR: OutOfRange.RAISE, Mode.ERROR_NONEMPTY: OutOfRange.RAISE, Mode.ZERO: OutOfRange.ZERO,
        Mode.CLAMP: OutOfRange.CLAMP}
    assert [mode for mode in Mode if mode.checks_indices] == [Mode.ERROR, Mode.ERROR_NONEMPTY]
    assert [mode for mode in Mode if mode.checks_when_empty] == [Mode.ERROR]
    assert CHECKING_MODE_VALUES == {"error", "error_nonempty"}
    assert all(type(value) is str for value in CHECKING_MODE_VALUES)  # a Mode hashes as its name: values only


@pytest.mark.parametrize("mode", list(Mode))
def test_the_kernel_does_what_the_properties_say(mode):
    data, out_of_range = np.arange(1, 4), np.array([5])
    if mode.checks_indices:
        with pytest.raises(GatherIndexError):
            gather_multiaxis(data, out_of_range, [0], mode)
    else:
        expected = {OutOfRange.ZERO: [0], OutOfRange.CLAMP: [3]}[mode.out_of_range]
        assert gather_multiaxis(data, out_of_range, [0], mode).tolist() == expected
    empty = np.zeros((0, 2), np.int64)
    empty_indices = np.array([[7]]).reshape(1, 1)
    if mode.checks_when_empty:
        with pytest.raises(GatherIndexError):
            gather_multiaxis(empty, empty_indices, [1], mode)
    else:
        assert gather_multiaxis(empty, empty_indices, [1], mode).shape == (0, 1)


def test_is_gather_multiaxis_needs_the_op_type_in_the_ops_domain():
    assert is_gather_multiaxis(helper.make_node(OP_TYPE, ["x", "i", "a"], ["y"], domain=DOMAIN))
    assert not is_gather_multiaxis(helper.make_node(OP_TYPE, ["x", "i", "a"], ["y"]))  # another domain
    assert not is_gather_multiaxis(helper.make_node(OP_TYPE + "Run", ["x", "i", "a", "t"], ["y"], domain=DOMAIN))
    assert not is_gather_multiaxis(helper.make_node("Gather", ["x", "i"], ["y"]))


def test_element_types_are_onnxs_ids():
    assert DATA_TYPES == (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT8, TensorProto.INT16,
                          TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT16,
                          TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL, TensorProto.STRING)
    assert INDEX_TYPES == (TensorProto.INT32, TensorProto.INT64)


def test_the_contract_imports_no_onnx():
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("onnx", "onnxruntime"):
                    raise ImportError(f"{name} is blocked for this test")
        sys.meta_path.insert(0, Block())
        import importlib.util
        spec = importlib.util.spec_from_file_location("contract_alone", sys.argv[1])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print(module.Mode.ZERO.out_of_range.name)
    """)
    run = subprocess.run([sys.executable, "-c", code, str(ROOT / "ops" / "contract.py")], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ZERO", run.stderr


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (the typecheck extra)")
def test_mypy_flags_a_match_on_mode_that_misses_a_member(tmp_path):
    """The exhaustive ``match`` + ``assert_never`` idiom the backends use: a member without an arm is a type
    error, so a new mode points at every backend that does not handle it yet."""
    package = tmp_path / "src" / "gathermultiaxis"
    package.mkdir(parents=True)
    for entry in (ROOT / "scripts").iterdir():  # the package as it imports (docs/source_tree.py's layout)
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "ops").symlink_to(ROOT / "ops")
    (package / "graphs").symlink_to(ROOT / "graphs")
    backend = tmp_path / "backend.py"
    backend.write_text(textwrap.dedent("""
        from typing import assert_never
        from gathermultiaxis.ops.contract import Mode, OutOfRange

        def fill(mode: Mode) -> int:
            match mode.out_of_range:
                case OutOfRange.RAISE:
                    return 0
                case OutOfRange.ZERO:
                    return 1
                case _:
                    assert_never(mode.out_of_range)
    """))
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
                          "--ignore-missing-imports", str(backend)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env={**os.environ, "MYPYPATH": str(tmp_path / "src")})
    assert run.returncode == 1, run.stdout + run.stderr
    assert 'Argument 1 to "assert_never" has incompatible type "Literal[OutOfRange.CLAMP]"' in run.stdout, run.stdout
