"""The variants against the real frameworks (the specs' examples: tests/ops/variants/)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from sessions import builtin_session
from openvino_cases import random_gather_case, random_gather_nd_case, random_shape
from support import assert_bit_identical, make_model

from gathermultiaxis.ops import variants as v

CASES = 200


# -- random cases against the real implementations ------------------------------------------------

def run_openvino_cases(op, version, count=CASES):
    """Run ``count`` random cases in child processes; a child killed by a crash is restarted after the
    crashing case. Returns (identical, differing, crashed) lists of case descriptions."""
    pytest.importorskip("openvino", reason="openvino is not installed (pip install -e '.[peers]')")
    identical, differing, crashed = [], [], []
    start = 0
    while start < count:
        child = subprocess.run([sys.executable, str(Path(__file__).with_name("openvino_cases.py")), op, str(version),
                                str(version), str(start), str(count - start)], capture_output=True, text=True,
                               cwd=Path(__file__).parent, timeout=600)
        current = None
        for line in child.stdout.splitlines():
            word, number, *rest = line.split(" ", 2)
            if word == "case":
                current = (int(number), rest[0] if rest else "")
            elif word == "same":
                identical.append(current[1])
                current = None
            elif word == "differs":
                differing.append(rest[0] if rest else number)
                current = None
        if child.returncode == 0:
            break
        assert current is not None, f"the OpenVINO child failed before any case: {child.stderr[-2000:]}"
        crashed.append(f"{current[1]} (exit status {child.returncode})")
        start = current[0] + 1
    return identical, differing, crashed


@pytest.mark.parametrize("op, version", [("gather", 1), ("gather", 7), ("gather", 8), ("gather_nd", 5), ("gather_nd", 8)])
def test_openvino_random(op, version, report_line):
    """OpenVINO 2026.4's CPU Gather-7/8 with batch_dims >= 1 over a batch of size 1 crashes or returns
    garbage (nondeterministically); those cases ("[batch of 1]") are run and counted apart. Every
    other case must be bit-identical."""
    identical, differing, crashed = run_openvino_cases(op, version)
    name = f"OpenVINO {'Gather' if op == 'gather' else 'GatherND'}-{version}"
    broken = [case for case in differing + crashed if "[batch of 1]" in case]
    line = f"{name}: {len(identical)} of {CASES} random cases bit-identical"
    if broken:
        line += f"; OpenVINO's batch-of-1 bug: {len(crashed)} crashed it, {len(differing)} came back wrong"
    report_line(line)
    assert [case for case in differing + crashed if case not in broken] == []
    assert len(identical) + len(differing) + len(crashed) == CASES and len(identical) >= CASES * 0.9


def test_openvino_batch_of_1_bug_is_real():
    """OpenVINO 2026.4's CPU plugin crashes, or returns wrong values, on Gather-8 with batch_dims=1 over
    data [1, 1, 4] and indices [1, 1] at axis 2 (a batch of size 1). When this test fails, OpenVINO
    fixed it: drop the batch-of-1 allowance in test_openvino_random."""
    pytest.importorskip("openvino", reason="openvino is not installed (pip install -e '.[peers]')")
    code = ("import numpy as np, openvino as ov, openvino.opset8 as o\n"
            "d = o.parameter([1, 1, 4], ov.Type.f32); i = o.parameter([1, 1], ov.Type.i64)\n"
            "m = ov.Model([o.gather(d, i, o.constant(np.int64(2)), 1)], [d, i])\n"
            "c = ov.Core().compile_model(m, 'CPU')\n"
            "data = np.arange(4, dtype=np.float32).reshape(1, 1, 4)\n"
            "print(sum(c([data, np.array([[3]])])[0].reshape(-1).tolist() != [3.0] for _ in range(20)))\n")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert child.returncode < 0 or int(child.stdout) > 0, "OpenVINO got the batch-of-1 case right"


def along_axis_indices(rng, data, axis, size, negative):
    """Indices for take_along_axis-style calls: ``size`` along ``axis``, elsewhere the data's size or
    (broadcast) 1."""
    shape = [size if d == axis else (1 if rng.random() < 0.3 else n) for d, n in enumerate(data.shape)]
    return rng.integers(-data.shape[axis] if negative else 0, data.shape[axis], shape)


def test_numpy_random(report_line):
    rng = np.random.default_rng(3)
    for _ in range(CASES):
        data, indices, axis, _ = random_gather_case(rng, negative=True)
        assert_bit_identical(v.numpy_take(data, indices, axis), np.take(data, indices, axis))
        assert_bit_identical(v.numpy_take(data, indices), np.take(data, indices))
        along = along_axis_indices(rng, data, axis, 3, negative=True)
        assert_bit_identical(v.numpy_take_along_axis(data, along, axis), np.take_along_axis(data, along, axis))
        flat = rng.integers(-data.size, data.size, 5)
        assert_bit_identical(v.numpy_take_along_axis(data, flat, None), np.take_along_axis(data, flat, None))
    report_line(f"NumPy take / take_along_axis: {CASES} random cases x 4 calls bit-identical")


def test_torch_random(report_line):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[peers]')")
    rng = np.random.default_rng(4)
    for _ in range(CASES):
        data, indices, axis, _ = random_gather_case(rng, negative=False)
        t = torch.from_numpy(data)
        index_shape = [int(rng.integers(1, s + 1)) if d != axis else 3 for d, s in enumerate(data.shape)]
        index = rng.integers(0, data.shape[axis], index_shape)
        assert_bit_identical(v.torch_gather(data, axis, index), torch.gather(t, axis, torch.from_numpy(index)).numpy())
        flat = rng.integers(-data.size, data.size, random_shape(rng, 2))
        assert_bit_identical(v.torch_take(data, flat), torch.take(t, torch.from_numpy(flat)).numpy())
        along = along_axis_indices(rng, data, axis, 2, negative=False)
        assert_bit_identical(v.torch_take_along_dim(data, along, axis),
                             torch.take_along_dim(t, torch.from_numpy(along), axis).numpy())
        flat_along = rng.integers(0, data.size, 4)
        assert_bit_identical(v.torch_take_along_dim(data, flat_along),
                             torch.take_along_dim(t, torch.from_numpy(flat_along)).numpy())
        selection = rng.integers(0, data.shape[axis], int(rng.integers(0, 4)))
        assert_bit_identical(v.torch_index_select(data, axis, selection),
                             torch.index_select(t, axis, torch.from_numpy(selection)).numpy())
    report_line(f"PyTorch gather / take / take_along_dim / index_select: {CASES} random cases x 5 calls bit-identical")


def test_tensorflow_random(report_line):
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed (pip install -e '.[peers]')")
    rng = np.random.default_rng(5)
    for _ in range(CASES):
        data, indices, axis, batch_dims = random_gather_case(rng, negative=False)
        assert_bit_identical(v.tf_gather(data, indices, axis, batch_dims),
                             tf.gather(data, indices, axis=axis, batch_dims=batch_dims).numpy())
        data, indices, batch_dims = random_gather_nd_case(rng)
        indices = np.abs(indices) % np.array(data.shape[batch_dims:batch_dims + indices.shape[-1]])
        assert_bit_identical(v.tf_gather_nd(data, indices, batch_dims),
                             tf.gather_nd(data, indices, batch_dims=batch_dims).numpy())
    report_line(f"TensorFlow gather / gather_nd: {CASES} random cases x 2 calls bit-identical")


def onnx_builtin(op_type, data, indices, **attributes):
    node = helper.make_node(op_type, ["data", "indices"], ["output"], **attributes)
    model = make_model([node], [helper.make_tensor_value_info("data", TensorProto.FLOAT, list(data.shape)),
                                helper.make_tensor_value_info("indices", TensorProto.INT64, list(indices.shape))],
                       [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)], opset=13)
    return builtin_session(model).run(None, {"data": data, "indices": indices})[0]


def test_onnx_variants_against_ort_builtin(report_line):
    rng = np.random.default_rng(6)
    for _ in range(CASES):
        data, indices, axis, _ = random_gather_case(rng, negative=True)
        assert_bit_identical(v.onnx_gather(data, indices, axis), onnx_builtin("Gather", data, indices, axis=axis))
        elements = rng.integers(-data.shape[axis], data.shape[axis],
                                [int(rng.integers(1, s + 1)) if d != axis else 2 for d, s in enumerate(data.shape)])
        assert_bit_identical(v.onnx_gather_elements(data, elements, axis),
                             onnx_builtin("GatherElements", data, elements, axis=axis))
        data, indices, batch_dims = random_gather_nd_case(rng)
        assert_bit_identical(v.onnx_gather_nd(data, indices, batch_dims),
                             onnx_builtin("GatherND", data, indices, batch_dims=batch_dims))
    report_line(f"ONNX Gather / GatherElements / GatherND variants vs ORT builtin: {CASES} random cases x 3 calls")
