"""ops/runtime/preallocated.py: a run into pre-allocated outputs (the session's run_with_iobinding goes through
run_with_preallocated_outputs_checked) fills the caller's buffers."""

import numpy as np
import onnxruntime as ort
from support import gather_multiaxis_model
from onnx import TensorProto

import gathermultiaxis


def test_a_run_with_a_preallocated_output_fills_it():
    sess = gathermultiaxis.InferenceSession(gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64),
                                            providers=["CPUExecutionProvider"], run_builtin_gathers=False)
    binding = sess.io_binding()
    binding.bind_cpu_input("input", np.arange(6, dtype=np.float32).reshape(2, 3))
    binding.bind_cpu_input("indices", np.array([[2, 0]], np.int64))
    binding.bind_cpu_input("axes", np.array([1], np.int64))
    out = np.full((2, 2), -1, np.float32)
    binding.bind_ortvalue_output("output", ort.OrtValue.ortvalue_from_numpy(out))
    sess.run_with_iobinding(binding)  # through run_with_preallocated_outputs_checked
    np.testing.assert_array_equal(out, [[2, 0], [5, 3]])
