"""conformance.fuzz: a seed alone decides its case; cases are valid models with matching feeds; a
reproducer folder holds the case's model and feeds."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from gathermultiaxis.conformance.fuzz import ELEMENT_TYPES, OPSETS, fuzz_case, save_reproducer, with_float_boundary
from gathermultiaxis.harness import single_gather_model, tensor_type_of


def test_a_seed_replays_its_case():
    a, b = fuzz_case(7), fuzz_case(7)
    assert a.model.SerializeToString() == b.model.SerializeToString() and a.name == b.name
    for name, value in a.data_sets[0].feeds.items():
        assert np.array_equal(value, b.data_sets[0].feeds[name], equal_nan=value.dtype.kind == "f")


@pytest.mark.parametrize("seed", range(12))
def test_cases_are_valid_models_with_matching_feeds(seed):
    case = fuzz_case(seed)
    (data_set,) = case.data_sets
    assert data_set.raising_compares
    assert [i.name for i in case.model.graph.input] == list(data_set.feeds) == ["data", "indices"]
    gathers = [n for n in case.model.graph.node if n.op_type in OPSETS]
    assert len(gathers) == 1
    opset = case.model.opset_import[0].version
    assert opset in OPSETS[gathers[0].op_type]
    for value in case.model.graph.input:
        feed = data_set.feeds[value.name]
        assert len(value.type.tensor_type.shape.dim) == feed.ndim
        assert value.type.tensor_type.elem_type in ELEMENT_TYPES
        assert value.type.tensor_type.elem_type == tensor_type_of(feed)


def test_float_boundary_feeds_bfloat16_as_float32():
    ort = pytest.importorskip("onnxruntime", reason="the model runs in onnxruntime")
    model = single_gather_model("Gather", TensorProto.BFLOAT16, TensorProto.INT64, [3], [2], axis=0)
    model = with_float_boundary(model, "data", "output")
    assert [n.op_type for n in model.graph.node] == ["Cast", "Gather", "Cast"]
    data = np.array([1.5, -2.0, 3.25], np.float32)  # exact in bfloat16
    out = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"data": data, "indices": np.array([2, 0], np.int64)})[0]
    np.testing.assert_array_equal(out, np.array([3.25, 1.5], np.float32))


def test_save_reproducer_writes_model_and_feeds(tmp_path):
    case = fuzz_case(3)
    folder = save_reproducer(case, tmp_path, 3)
    assert folder == tmp_path / "seed-3"
    assert onnx.load(str(folder / "model.onnx")).SerializeToString() == case.model.SerializeToString()
    for number, (name, value) in enumerate(case.data_sets[0].feeds.items()):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((folder / "test_data_set_0" / f"input_{number}.pb").read_bytes())
        assert tensor.name == name
        back = numpy_helper.to_array(tensor)
        assert back.shape == value.shape
        assert np.array_equal(back.astype(value.dtype), value, equal_nan=value.dtype.kind == "f")
