"""Rank rules: the third layer of rank finding, for what ONNX's and ORT's shape inference both miss.

One small rule per op: from what is known of the inputs (``TensorInfo``: element type and a shape whose
dims may be unknown) and the node's attributes and constant inputs, the outputs' ``TensorInfo``. A rule
returns ``None`` when it cannot tell. Sizes are only kept where the rule is exact (a Shape's length, an
Unsqueeze of a scalar, a Concat of 1-D pieces), because a Reshape's rank is the length of its shape input.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from onnx import NodeProto, TensorProto

from .inference import Dim, TensorInfo
from .walk import attribute

Constants = Callable[[str], "np.ndarray | None"]  # the value of a tensor when it is a graph constant
RankRule = Callable[[NodeProto, Sequence["TensorInfo | None"], Constants], "list[TensorInfo] | None"]
_MICROSOFT = "com.microsoft"


def _known(info: TensorInfo | None) -> bool:
    return info is not None and info.rank is not None


def _ranked(elem_type: int, rank: int) -> TensorInfo:
    return TensorInfo(elem_type, (None,) * rank)


def _elem(info: TensorInfo | None) -> int:
    return info.elem_type if info is not None else 0


def same_shape(node, inputs, constants):
    """Elementwise unary ops, normalizations, activations: output 0 has the shape of input 0."""
    return [inputs[0]] if _known(inputs[0]) else None


def same_rank(node, inputs, constants):
    """Ops whose outputs keep the rank of input 0 but not its sizes (Transpose, Pad, Slice, Conv, ...)."""
    if not _known(inputs[0]):
        return None
    return [_ranked(inputs[0].elem_type, inputs[0].rank)] * len(node.output)


def attention(node, inputs, constants):
    """com.microsoft Attention / MultiHeadAttention: output rank = the query's rank (batch, sequence, hidden)."""
    return [_ranked(inputs[0].elem_type, inputs[0].rank)] if _known(inputs[0]) else None


def broadcast(node, inputs, constants):
    """Multidirectional broadcast (Add, Mul, Where, Equal, ...): the largest input rank."""
    present = [info for name, info in zip(node.input, inputs) if name]
    if not all(_known(info) for info in present):
        return None
    elem = TensorProto.BOOL if node.op_type in _COMPARISONS else _elem(present[-2 if node.op_type == "Where" else 0])
    return [_ranked(elem, max(info.rank for info in present))]


def cast(node, inputs, constants):
    if not _known(inputs[0]):
        return None
    return [TensorInfo(attribute(node, "to"), inputs[0].shape)]


def predicate(node, inputs, constants):
    """IsNaN, IsInf: a bool tensor of the input's shape."""
    return [TensorInfo(TensorProto.BOOL, inputs[0].shape)] if _known(inputs[0]) else None


def shape(node, inputs, constants):
    """Shape: 1-D, its length the input rank (cut by opset 15's start/end)."""
    if not _known(inputs[0]):
        return [TensorInfo(TensorProto.INT64, (None,))]
    rank = inputs[0].rank
    start, end = attribute(node, "start", 0), attribute(node, "end", rank)
    start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
    return [TensorInfo(TensorProto.INT64, (max(end - start, 0),))]


def size(node, inputs, constants):
    return [TensorInfo(TensorProto.INT64, ())]


def flatten(node, inputs, constants):
    return [_ranked(_elem(inputs[0]), 2)]


def _length(info: TensorInfo | None) -> Dim:
    """The length of a 1-D tensor, when known."""
    return info.shape[0] if _known(info) and info.rank == 1 else None


def reshape(node, inputs, constants):
    """Reshape: the output rank is the length of the shape input."""
    length = _length(inputs[1])
    return [_ranked(_elem(inputs[0]), length)] if isinstance(length, int) else None


def expand(node, inputs, constants):
    length = _length(inputs[1])
    if not (_known(inputs[0]) and isinstance(length, int)):
        return None
    return [_ranked(inputs[0].elem_type, max(inputs[0].rank, length))]


def constant_of_shape(node, inputs, constants):
    length = _length(inputs[0])
    value = attribute(node, "value")
    elem = value.data_type if value is not None else TensorProto.FLOAT
    return [_ranked(elem, length)] if isinstance(length, int) else None


def stft(node, inputs, constants):
    """STFT: [batch, frames, unique bins, 2] whatever the signal's length."""
    return [_ranked(_elem(inputs[0]), 4)]


def range_(node, inputs, constants):
    return [_ranked(_elem(inputs[0]), 1)]


def non_zero(node, inputs, constants):
    return [_ranked(TensorProto.INT64, 2)]


def _axes(node: NodeProto, inputs, constants: Constants) -> list[int] | None:
    if len(node.input) > 1 and node.input[1]:
        value = constants(node.input[1])
        return None if value is None else [int(a) for a in np.asarray(value).reshape(-1)]
    return attribute(node, "axes")


def unsqueeze(node, inputs, constants):
    axes = _axes(node, inputs, constants)
    if not _known(inputs[0]) or axes is None:
        return None
    rank = inputs[0].rank + len(axes)
    dims = list(inputs[0].shape)
    for axis in sorted(a % rank for a in axes):
        dims.insert(axis, 1)
    return [TensorInfo(inputs[0].elem_type, tuple(dims))]


def squeeze(node, inputs, constants):
    axes = _axes(node, inputs, constants)
    if not _known(inputs[0]) or axes is None:
        return None
    rank = inputs[0].rank
    gone = {a % rank for a in axes}
    return [TensorInfo(inputs[0].elem_type, tuple(d for i, d in enumerate(inputs[0].shape) if i not in gone))]


def concat(node, inputs, constants):
    known = [info for info in inputs if _known(info)]
    if not known:
        return None
    if all(_known(info) and info.rank == 1 for info in inputs):
        lengths = [info.shape[0] for info in inputs]
        total = sum(lengths) if all(isinstance(n, int) for n in lengths) else None
        return [TensorInfo(known[0].elem_type, (total,))]
    return [_ranked(known[0].elem_type, known[0].rank)]


def matmul(node, inputs, constants):
    if not (_known(inputs[0]) and _known(inputs[1])):
        return None
    a, b = inputs[0].rank, inputs[1].rank
    rank = max(a, b) if a >= 2 and b >= 2 else (b - 1 if a == 1 else a - 1)
    return [_ranked(inputs[0].elem_type, rank)]


def gather(node, inputs, constants):
    if not (_known(inputs[0]) and _known(inputs[1])):
        return None
    return [_ranked(inputs[0].elem_type, inputs[0].rank + inputs[1].rank - 1)]


def gather_elements(node, inputs, constants):
    known = inputs[1] if _known(inputs[1]) else inputs[0]
    return [_ranked(_elem(inputs[0]), known.rank)] if _known(known) else None


def reduce(node, inputs, constants):
    """Reductions with keepdims (the default): the input rank."""
    if attribute(node, "keepdims", 1) != 1 or not _known(inputs[0]):
        return None
    return [_ranked(inputs[0].elem_type, inputs[0].rank)]


_COMPARISONS = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "IsNaN", "IsInf"}
_UNARY = ("Identity Neg Abs Relu Sigmoid Tanh Exp Log Sqrt Erf Softmax LogSoftmax Dropout LayerNormalization Not Floor "
          "Ceil Round Sign Reciprocal LeakyRelu Elu Selu Gelu HardSigmoid HardSwish Clip Softplus Softsign Sin Cos "
          "Mish CumSum Trilu InstanceNormalization BatchNormalization GroupNormalization RMSNormalization").split()
_SAME_RANK = "Transpose Pad Slice Tile Conv ConvTranspose MaxPool AveragePool Resize ReverseSequence TopK Split".split()
_BROADCAST = "Add Sub Mul Div Pow Mod Max Min Sum Mean Where BitShift PRelu".split() + sorted(_COMPARISONS - {
    "IsNaN", "IsInf"})
# com.microsoft ops that ORT's transformer optimizer and offline optimizer write.
_MICROSOFT_UNARY = ("FastGelu BiasGelu Gelu QuickGelu SkipLayerNormalization SkipSimplifiedLayerNormalization "
                    "SimplifiedLayerNormalization LayerNormalization BiasAdd").split()

RANK_RULES: dict[tuple[str, str], RankRule] = {
    **{("", op): same_shape for op in _UNARY},
    **{("", op): same_rank for op in _SAME_RANK},
    **{("", op): broadcast for op in _BROADCAST},
    **{("", op): reduce for op in "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ArgMax ArgMin".split()},
    ("", "IsNaN"): predicate, ("", "IsInf"): predicate,
    ("", "Cast"): cast, ("", "Shape"): shape, ("", "Size"): size, ("", "Flatten"): flatten,
    ("", "Reshape"): reshape, ("", "Expand"): expand, ("", "ConstantOfShape"): constant_of_shape,
    ("", "STFT"): stft, ("", "Range"): range_, ("", "NonZero"): non_zero, ("", "Unsqueeze"): unsqueeze,
    ("", "Squeeze"): squeeze, ("", "Concat"): concat, ("", "MatMul"): matmul, ("", "Gather"): gather,
    ("", "GatherElements"): gather_elements,
    **{(_MICROSOFT, op): same_shape for op in _MICROSOFT_UNARY},
    (_MICROSOFT, "Attention"): attention, (_MICROSOFT, "MultiHeadAttention"): attention,
    (_MICROSOFT, "FusedMatMul"): matmul, (_MICROSOFT, "FusedConv"): same_rank,
    (_MICROSOFT, "BiasSplitGelu"): same_rank,  # the last dimension halves
    (_MICROSOFT, "FusedGemm"): flatten,  # Gemm: always 2-D
}


def apply_rank_rule(node: NodeProto, inputs: Sequence[TensorInfo | None], constants: Constants
                    ) -> list[TensorInfo] | None:
    """The outputs' TensorInfo by the node's rank rule, or None (no rule, or it cannot tell)."""
    rule = RANK_RULES.get(("" if node.domain == "ai.onnx" else node.domain, node.op_type))
    if rule is None:
        return None
    try:
        return rule(node, inputs, constants)
    except (IndexError, TypeError, ValueError, ZeroDivisionError):  # a malformed node: ORT will say why
        return None
