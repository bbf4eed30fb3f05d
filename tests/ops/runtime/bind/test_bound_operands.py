"""ops/runtime/bind/bound_operands.py: a constant table read as the bind step binds it."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from gathermultiaxis.ops.runtime.bind.bound_operands import tensor_array


def test_16_bit_tables_stay_raw_and_name_their_format():
    halves = numpy_helper.from_array(np.array([1.5, -2.0], np.float16), "h")
    array, widen = tensor_array(halves, None)
    assert array.dtype == np.float16 and widen == "float16"
    bits = helper.make_tensor("b", TensorProto.BFLOAT16, [2], vals=np.array([0x3FC0, 0xC000], np.uint16).tobytes(),
                              raw=True)
    array, widen = tensor_array(bits, None)
    assert array.dtype == np.uint16 and array.tolist() == [0x3FC0, 0xC000] and widen == "bfloat16"


def test_external_tables_without_a_folder_are_not_bound():
    tensor = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "w.bin"
    assert tensor_array(tensor, None) is None
