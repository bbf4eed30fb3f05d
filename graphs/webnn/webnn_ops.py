"""What ORT's WebNN execution provider takes: its op table, the inputs it needs constant, the tensor types and
ranks WebNN has."""

from __future__ import annotations

from onnx import TensorProto

from ...ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND

MIN_OPSET = 11  # WebNN's gatherElements and gatherND map from ONNX opset 11; Where/Less on int64 from 9
MAX_RANK = 5    # the ranks every WebNN backend supports
# ONNX op -> WebNN op, from ORT's WebNN EP table (onnxruntime-web 1.22, js/web/docs/webnn-operators.md)
WEBNN_OPS = {
    "Abs": "abs", "Add": "add", "And": "logicalAnd", "ArgMax": "argMax", "ArgMin": "argMin",
    "AveragePool": "averagePool2d", "BatchNormalization": "batchNormalization", "Cast": "cast", "Ceil": "ceil",
    "Clip": "clamp", "Concat": "concat", "Conv": "conv2d", "ConvTranspose": "convTranspose2d", "Cos": "cos",
    "CumSum": "cumulativeSum", "Div": "div", "DequantizeLinear": "dequantizeLinear", "Dropout": "identity",
    "Einsum": "matmul", "Elu": "elu", "Equal": "equal", "Erf": "erf", "Exp": "exp", "Expand": "expand",
    "Flatten": "reshape", "Floor": "floor", GATHER: "gather", GATHER_ELEMENTS: "gatherElements",
    GATHER_ND: "gatherND", "Gelu": "gelu", "Gemm": "gemm", "GlobalAveragePool": "averagePool2d",
    "GlobalMaxPool": "maxPool2d", "GlobalLpPool": "l2Pool2d", "Greater": "greater",
    "GreaterOrEqual": "greaterOrEqual", "GRU": "gru", "HardSigmoid": "hardSigmoid", "HardSwish": "hardSwish",
    "Identity": "identity", "InstanceNormalization": "instanceNormalization",
    "LayerNormalization": "layerNormalization", "LeakyRelu": "leakyRelu", "Less": "lesser",
    "LessOrEqual": "lesserOrEqual", "Log": "log", "LpPool": "l2Pool2d", "LRN": "averagePool2d", "LSTM": "lstm",
    "MatMul": "matmul", "Max": "max", "MaxPool": "maxPool2d", "Min": "min", "Mul": "mul", "Neg": "neg",
    "Not": "logicalNot", "Or": "logicalOr", "Pad": "pad", "Pow": "pow", "PRelu": "prelu",
    "QuantizeLinear": "quantizeLinear", "Reciprocal": "reciprocal", "ReduceL1": "reduceL1", "ReduceL2": "reduceL2",
    "ReduceLogSum": "reduceLogSum", "ReduceLogSumExp": "reduceLogSumExp", "ReduceMax": "reduceMax",
    "ReduceMean": "reduceMean", "ReduceMin": "reduceMin", "ReduceProd": "reduceProduct", "ReduceSum": "reduceSum",
    "ReduceSumSquare": "reduceSumSquare", "Relu": "relu", "Reshape": "reshape", "Resize": "resample2d",
    "ScatterElements": "scatterElements", "ScatterND": "scatterND", "Shape": "slice", "Sigmoid": "sigmoid",
    "Sign": "sign", "Softplus": "softplus", "Softsign": "softsign", "Sin": "sin", "Slice": "slice",
    "Softmax": "softmax", "Split": "split", "Sqrt": "sqrt", "Squeeze": "reshape", "Sub": "sub", "Tan": "tan",
    "Tanh": "tanh", "Tile": "tile", "Transpose": "transpose", "Trilu": "triangular", "Unsqueeze": "reshape",
    "Where": "where", "Xor": "logicalXor",
    "Constant": "(a constant: ORT makes it an initializer)",
}
# inputs the EP needs constant, by op ("'shape' input should be a constant", ...)
CONSTANT_INPUTS = {"Reshape": (1,), "Expand": (1,), "Slice": (1, 2, 3, 4), "Squeeze": (1,), "Unsqueeze": (1,),
                   "Clip": (1, 2),
                   "Tile": (1,), "Split": (1,), "CumSum": (1,), "Trilu": (1,),
                   **{op: (1,) for op in WEBNN_OPS if op.startswith("Reduce")}}
NO_WEBNN_TYPES = {TensorProto.STRING: "string", TensorProto.DOUBLE: "double", TensorProto.COMPLEX64: "complex64",
                  TensorProto.COMPLEX128: "complex128", TensorProto.BFLOAT16: "bfloat16"}
NO_SUCH_TENSORS = "WebNN has no such tensors"  # the finding on a value of one of NO_WEBNN_TYPES
INT32_LIMIT = 2 ** 31
INT64_MAX = 2 ** 63 - 1
# Ops that only reshape: their output holds their first input's elements in the same order
RESHAPES = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"}
