"""graphs.ir.tensors: the one tensor reader (inline or external, copied or memory-mapped, bfloat16 as raw bits,
lenient strings) and element type names."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

from gathermultiaxis.graphs.ir.tensors import read_tensor, type_name
from gathermultiaxis.graphs.modelfile import ExternalDataError


def _external(tmp_path, *tensors):
    """The tensors saved with their data in m.data beside m.onnx, loaded back with the data left there."""
    graph = helper.make_graph([], "g", [], [helper.make_tensor_value_info(t.name, t.data_type, None) for t in tensors],
                              list(tensors))
    model = helper.make_model(graph)
    convert_model_to_external_data(model, location="m.data", size_threshold=0)
    onnx.save_model(model, tmp_path / "m.onnx")
    return {t.name: t for t in onnx.load(tmp_path / "m.onnx", load_external_data=False).graph.initializer}


def test_inline_values():
    table = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = numpy_helper.from_array(table, "t")
    for mmap in (False, True):
        read = read_tensor(tensor, None, mmap=mmap)
        assert read.dtype == np.float32 and np.array_equal(read, table)
    assert read_tensor(helper.make_tensor("n", TensorProto.INT32, [2], [7, 8]), None, mmap=True).tolist() == [7, 8]


def test_external_values_are_read_from_the_models_folder_only(tmp_path):
    table = np.arange(12, dtype=np.int64).reshape(3, 4)
    tensor = _external(tmp_path, numpy_helper.from_array(table, "t"))["t"]
    copied = read_tensor(tensor, tmp_path)
    assert not isinstance(copied, np.memmap) and np.array_equal(copied, table)
    mapped = read_tensor(tensor, tmp_path, mmap=True)
    assert isinstance(mapped, np.memmap) and not mapped.flags.writeable and np.array_equal(mapped, table)
    with pytest.raises(ExternalDataError, match="the model's folder is not known"):
        read_tensor(tensor, None)
    with pytest.raises(ExternalDataError):
        read_tensor(tensor, tmp_path / "elsewhere")


def test_bfloat16_as_raw_bits_and_float16_as_float16(tmp_path):
    bits = np.array([0x3F80, 0xC000, 0x7FC1], np.uint16)  # 1.0, -2.0, a NaN with a payload
    raw = helper.make_tensor("b", TensorProto.BFLOAT16, [3], bits.tobytes(), raw=True)
    unpacked = TensorProto(name="u", data_type=TensorProto.BFLOAT16, dims=[3], int32_data=[int(b) for b in bits])
    half = numpy_helper.from_array(np.array([1.5, -0.0, 65504], np.float16), "h")
    for tensor in (raw, unpacked):
        assert read_tensor(tensor, None, raw_16bit=True).tolist() == bits.tolist()
    assert read_tensor(half, None, raw_16bit=True).dtype == np.float16
    external = _external(tmp_path, helper.make_tensor("b", TensorProto.BFLOAT16, [3], bits.tobytes(), raw=True))["b"]
    for mmap in (False, True):
        read = read_tensor(external, tmp_path, mmap=mmap, raw_16bit=True)
        assert read.dtype == np.uint16 and read.tolist() == bits.tolist()


def test_lenient_strings_keep_bytes_that_are_not_utf8():
    tensor = helper.make_tensor("s", TensorProto.STRING, [2], [b"ok", b"\xff\xfe"])
    assert read_tensor(tensor, None, lenient_strings=True).tolist() == ["ok", b"\xff\xfe"]
    with pytest.raises(UnicodeDecodeError):
        read_tensor(tensor, None)


def test_type_names():
    assert type_name(TensorProto.FLOAT16) == "FLOAT16" and type_name(0) == "unknown"
