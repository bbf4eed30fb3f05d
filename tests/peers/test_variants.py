"""Every gather of the seeds as gatherMultiaxis, against the specs' examples and the real frameworks."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from sessions import builtin_session
from openvino_cases import random_gather_case, random_gather_nd_case, random_shape
from support import assert_bit_identical, make_model

from gathermultiaxis.ops import GatherIndexError
from gathermultiaxis.ops import variants as v

VARIANTS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "variants.md"  # the mapping table lives there
CASES = 200


def test_docs_table_is_the_traced_mapping():
    text = VARIANTS_PAGE.read_text()
    start = text.index("| function | data → aligned |")
    table = text[start:text.index("\n\n", start)]
    assert table == v.mapping_table()


def test_each_variant_makes_exactly_one_gather_call():
    for name, call in v.example_calls():
        with v.trace() as steps:
            call()
        assert len(steps) == 1 and steps[0].variant.startswith(name), name


# -- the specs' own examples ------------------------------------------------------------------------

D5 = np.array([1, 2, 3, 4, 5])
D2x5 = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
D2x2x5 = np.arange(1, 21).reshape(2, 2, 5)
D2x1x5x4 = np.arange(1, 41).reshape(2, 1, 5, 4)
GATHER_EXAMPLES = {  # OpenVINO Gather-7 and Gather-8 examples 1-5, Gather-8 examples 6-7
    "1": (D5, [0, 0, 4], 0, 0, [1, 1, 5], (7, 8)),
    "2": (D2x5, [[0, 0, 4], [4, 0, 0]], 1, 1, [[1, 1, 5], [10, 6, 6]], (7, 8)),
    "3": (D2x2x5, [[[0, 0, 4], [4, 0, 0]], [[1, 2, 4], [4, 3, 2]]], 2, 2,
          [[[1, 1, 5], [10, 6, 6]], [[12, 13, 15], [20, 19, 18]]], (7, 8)),
    "4": (D2x1x5x4, [[1, 2, 4], [4, 3, 2]], 2, 1,
          [[[[5, 6, 7, 8], [9, 10, 11, 12], [17, 18, 19, 20]]], [[[37, 38, 39, 40], [33, 34, 35, 36], [29, 30, 31, 32]]]],
          (7, 8)),
    "5-negative-batch-dims": (D2x5, [[0, 0, 4], [4, 0, 0]], 1, -1, [[1, 1, 5], [10, 6, 6]], (7, 8)),
    "6-negative-indices": (D5, [0, -2, -1], 0, 0, [1, 4, 5], (8,)),
    "7-out-of-range": (D5, [3, 10, -20], 0, 0, [4, 0, 0], (8,)),
}


@pytest.mark.parametrize("name", sorted(GATHER_EXAMPLES))
def test_openvino_gather_spec_examples(name):
    data, indices, axis, batch_dims, expected, versions = GATHER_EXAMPLES[name]
    for version in versions:
        output = v.openvino_gather(data, np.array(indices), axis, batch_dims, version)
        np.testing.assert_array_equal(output, expected)


def test_openvino_gather_ir_layer_shapes():
    assert v.openvino_gather(np.zeros((6, 12, 10, 24)), np.zeros((15, 4, 20, 28), np.int64), 1, version=1).shape \
        == (6, 15, 4, 20, 28, 10, 24)  # Gather-1
    assert v.openvino_gather(np.zeros((2, 64, 128)), np.zeros((2, 32, 21), np.int64), 1, 1).shape == (2, 32, 21, 128)


S2x2 = np.array([[1, 2], [3, 4]])
GATHER_ND_EXAMPLES = {  # OpenVINO GatherND-8 examples 1-7
    "1-elements": (S2x2, [[0, 0], [1, 0]], 0, [1, 3]),
    "2-slices": (S2x2, [[1], [0]], 0, [[3, 4], [1, 2]]),
    "3-leading-dims": (S2x2, [[[1]], [[0]]], 0, [[[3, 4]], [[1, 2]]]),
    "4-batch-elements": (S2x2, [[1], [0]], 1, [2, 3]),
    "5-batch-slices": (np.arange(1, 25).reshape(2, 3, 4), [[1], [0]], 1, [[5, 6, 7, 8], [13, 14, 15, 16]]),
    "6-batch2": (np.arange(1, 25).reshape(2, 3, 4), [[[[1]], [[0]], [[2]]], [[[0]], [[2]], [[2]]]], 2,
                 [[[2], [5], [11]], [[13], [19], [23]]]),
    "7-batch3": (np.arange(1, 17).reshape(1, 2, 2, 4), [[[[1], [0]], [[3], [2]]]], 3, [[[2, 5], [12, 15]]]),
}


@pytest.mark.parametrize("name", sorted(GATHER_ND_EXAMPLES))
def test_openvino_gather_nd_spec_examples(name):
    data, indices, batch_dims, expected = GATHER_ND_EXAMPLES[name]
    np.testing.assert_array_equal(v.openvino_gather_nd(data, np.array(indices), batch_dims), expected)


def test_openvino_gather_nd_ir_layer_shapes():
    for data_shape, indices_shape, batch_dims, output_shape in [
            ((1000, 256, 10, 15), (25, 125, 3), 0, (25, 125, 15)),
            ((30, 2, 100, 35), (30, 2, 3, 1), 2, (30, 2, 3, 35)),
            ((1, 64, 64, 320), (1, 64, 64, 1, 1), 3, (1, 64, 64, 1))]:
        data = np.zeros(data_shape, np.float32)
        assert v.openvino_gather_nd(data, np.zeros(indices_shape, np.int64), batch_dims).shape == output_shape


def test_tosa_gather_definition():
    rng = np.random.default_rng(1)
    values, indices = rng.random((2, 5, 3)), rng.integers(0, 5, (2, 4))
    expected = np.array([[values[n, indices[n, w], :] for w in range(4)] for n in range(2)])
    assert_bit_identical(v.tosa_gather(values, indices), expected)


def test_xy_points_on_nchw():
    rng = np.random.default_rng(2)
    images, points = rng.random((2, 3, 6, 7)), np.array([[6, 0], [0, 5], [3, 2]])
    assert_bit_identical(v.gather_xy_nchw(images, points), images[:, :, points[:, 1], points[:, 0]])


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


def test_variants_listed():
    import gathermultiaxis.ops as ops

    assert set(v.VARIANTS) == {name for name, _ in v.example_calls()}
    assert set(v.VARIANTS) <= set(ops.__all__) and all(getattr(ops, name) is v.VARIANTS[name] for name in v.VARIANTS)
    assert re.fullmatch(r"[a-z_]+", "".join(v.VARIANTS))


# -- CoreML index types without coremltools (tests/peers/test_variants_coreml.py checks coremltools itself) --

@pytest.mark.parametrize("index", [np.uint32(2**32 - 1), np.uint32(2**32 - 3), np.uint64(2**32 + 1),
                                   np.uint64(2**64 - 1)])
def test_coreml_variants_never_wrap_wide_unsigned_indices(index):
    """The NumPy facts: narrowing to int32 wraps these to a valid row (-1 is the last, 2**32 + 1 is 1),
    while none is in range for an axis of 3. The CoreML variants used to narrow them so, even with
    validate_indices; now uint32 is refused (coremltools refuses it) and uint64 is range-checked."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert -3 <= int(np.array([index]).astype(np.int32)[0]) < 3  # the wrap the variants used to hit
    calls = {"coreml_gather": lambda i, check: v.coreml_gather(x, i, 1, validate_indices=check),
             "coreml_gather_along_axis": lambda i, check: v.coreml_gather_along_axis(
                 x, np.broadcast_to(i.reshape(1, 1, 1), (2, 3, 1)), 2, validate_indices=check),
             "coreml_gather_nd": lambda i, check: v.coreml_gather_nd(x, i.reshape(1, 1), validate_indices=check)}
    expected = (TypeError, "uint32") if index.dtype == np.uint32 else (GatherIndexError, "out of range")
    for name, call in calls.items():
        for check in (False, True):
            with pytest.raises(expected[0], match=expected[1]):
                call(np.array([index]), check)
