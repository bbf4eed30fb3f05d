"""The GatherMultiaxis node signature, as ONNX Runtime sees it (no onnxruntime import here).

    output = GatherMultiaxis(input, indices, axes, mode)     domain ai.onnx.contrib, version 1
      input    T      one of DATA_TYPES
      indices  int32 or int64 (INDEX_TYPES), the rank of input
      axes     int64 1-D tensor
      mode     string attribute, required on the node: one of kernel.MODES
      output   T      the rank of input

DATA_TYPES are the element types onnxruntime-extensions' PyOp bridge can carry: not float16 or
bfloat16 (the rewriter wraps those in an exact Cast round trip), not complex (registering complex
types makes every session fail to load).
"""

from onnx import TensorProto

DOMAIN = "ai.onnx.contrib"
OP_TYPE = "GatherMultiaxis"
DATA_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT8, TensorProto.INT16, TensorProto.INT32,
              TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
              TensorProto.BOOL, TensorProto.STRING)
INDEX_TYPES = (TensorProto.INT32, TensorProto.INT64)
