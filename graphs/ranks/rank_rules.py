"""Rank rules: the third layer of rank finding, for what ONNX's and ORT's shape inference both miss.

One small rule per op: from what is known of the inputs (``TensorInfo``: element type and a shape whose
dims may be unknown) and the node's attributes and constant inputs, the outputs' ``TensorInfo``. A rule
returns ``None`` when it cannot tell. Sizes are only kept where the rule is exact (a Shape's length, an
Unsqueeze of a scalar, a Concat of 1-D pieces), because a Reshape's rank is the length of its shape input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable, Protocol, Sequence, TypeGuard

import numpy as np
from onnx import GraphProto, NodeProto, TensorProto

from .tensor_info import Dim, TensorInfo
from ..ir.folding import slice_length
from ..ir.walk import attribute

if TYPE_CHECKING:
    from .tensor_info import KnownRankInfo

Constants = Callable[[str], "np.ndarray | None"]  # the value of a tensor when it is a graph constant


class RankRule(Protocol):
    """One op's rank rule: from what is known of the inputs and the node's attributes and constant inputs, what
    is known of the outputs.
    """

    def __call__(self, node: NodeProto, inputs: Sequence[TensorInfo | None], constants: Constants
                 ) -> list[TensorInfo] | None: ...

_MICROSOFT = "com.microsoft"


def known(info: TensorInfo | None) -> TypeGuard[KnownRankInfo]:
    return info is not None and info.rank is not None


def ranked(elem_type: int, rank: int) -> TensorInfo:
    return TensorInfo(elem_type, (None,) * rank)


def elem_type_of(info: TensorInfo | None) -> int:
    return info.elem_type if info is not None else 0


def same_shape(node, inputs, constants):
    """Elementwise unary ops, normalizations, activations: output 0 has the shape of input 0."""
    return [inputs[0]] if known(inputs[0]) else None


def same_rank(node, inputs, constants):
    """Ops whose outputs keep the rank of input 0 but not its sizes (Transpose, Pad, Slice, Conv, ...)."""
    if not known(inputs[0]):
        return None
    return [ranked(inputs[0].elem_type, inputs[0].rank)] * len(node.output)


def attention(node, inputs, constants):
    """com.microsoft Attention / MultiHeadAttention: output rank = the query's rank (batch, sequence, hidden)."""
    return [ranked(inputs[0].elem_type, inputs[0].rank)] if known(inputs[0]) else None


def broadcast(node, inputs, constants):
    """Multidirectional broadcast (Add, Mul, Where, Equal, ...): the largest input rank."""
    present = [info for name, info in zip(node.input, inputs) if name]
    if not all(known(info) for info in present):
        return None
    elem = TensorProto.BOOL if node.op_type in _COMPARISONS else elem_type_of(present[-2 if node.op_type == "Where" else 0])
    return [ranked(elem, max(info.rank for info in present))]


def cast(node, inputs, constants):
    """Cast: the input's shape, of the type ``to``."""
    if not known(inputs[0]):
        return None
    return [TensorInfo(attribute(node, "to"), inputs[0].shape)]


def predicate(node, inputs, constants):
    """IsNaN, IsInf: a bool tensor of the input's shape."""
    return [TensorInfo(TensorProto.BOOL, inputs[0].shape)] if known(inputs[0]) else None


def shape(node, inputs, constants):
    """Shape: 1-D, its length the input rank (cut by opset 15's start/end)."""
    if not known(inputs[0]):
        return [TensorInfo(TensorProto.INT64, (None,))]
    rank = inputs[0].rank
    start, end = attribute(node, "start", 0), attribute(node, "end", rank)
    start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
    return [TensorInfo(TensorProto.INT64, (max(end - start, 0),))]


def size(node, inputs, constants):
    """Size: an int64 scalar."""
    return [TensorInfo(TensorProto.INT64, ())]


def flatten(node, inputs, constants):
    """Flatten: 2-D, of the input's type."""
    return [ranked(elem_type_of(inputs[0]), 2)]


def _length(info: TensorInfo | None) -> Dim:
    """The length of a 1-D tensor, when known."""
    return info.shape[0] if known(info) and info.rank == 1 else None


def reshape(node, inputs, constants):
    """Reshape: the output rank is the length of the shape input."""
    length = _length(inputs[1])
    return [ranked(elem_type_of(inputs[0]), length)] if isinstance(length, int) else None


def expand(node, inputs, constants):
    """Expand: the larger of the input's rank and the shape input's length."""
    length = _length(inputs[1])
    if not (known(inputs[0]) and isinstance(length, int)):
        return None
    return [ranked(inputs[0].elem_type, max(inputs[0].rank, length))]


def constant_of_shape(node, inputs, constants):
    """ConstantOfShape: the rank is the shape input's length; the type is ``value``'s (float by default)."""
    length = _length(inputs[0])
    value = attribute(node, "value")
    elem = value.data_type if value is not None else TensorProto.FLOAT
    return [ranked(elem, length)] if isinstance(length, int) else None


def stft(node, inputs, constants):
    """STFT: [batch, frames, unique bins, 2] whatever the signal's length."""
    return [ranked(elem_type_of(inputs[0]), 4)]


def range_(node, inputs, constants):
    """Range: 1-D, of the start's type."""
    return [ranked(elem_type_of(inputs[0]), 1)]


def non_zero(node, inputs, constants):
    """NonZero: a 2-D int64 tensor (input rank by the count of non-zeros)."""
    return [ranked(TensorProto.INT64, 2)]


def _axes(node: NodeProto, inputs, constants: Constants) -> list[int] | None:
    if len(node.input) > 1 and node.input[1]:
        value = constants(node.input[1])
        return None if value is None else [int(a) for a in np.asarray(value).reshape(-1)]
    return attribute(node, "axes")


def unsqueeze(node, inputs, constants):
    """Unsqueeze: size-1 dims inserted at the axes (attribute, or constant input from opset 13)."""
    axes = _axes(node, inputs, constants)
    if not known(inputs[0]) or axes is None:
        return None
    rank = inputs[0].rank + len(axes)
    dims = list(inputs[0].shape)
    for axis in sorted(a % rank for a in axes):
        dims.insert(axis, 1)
    return [TensorInfo(inputs[0].elem_type, tuple(dims))]


def squeeze(node, inputs, constants):
    """Squeeze: the given axes removed; empty axes, as ORT reads them, remove every dim of size 1."""
    axes = _axes(node, inputs, constants)
    if not known(inputs[0]) or axes is None:
        return None
    rank = inputs[0].rank
    if not axes:  # an empty axes input: ORT squeezes every dim of size 1, as without axes
        if not all(isinstance(d, int) for d in inputs[0].shape):
            return None
        return [TensorInfo(inputs[0].elem_type, tuple(d for d in inputs[0].shape if d != 1))]
    gone = {a % rank for a in axes}
    return [TensorInfo(inputs[0].elem_type, tuple(d for i, d in enumerate(inputs[0].shape) if i not in gone))]


def concat(node, inputs, constants):
    """Concat: the inputs' rank; of 1-D pieces of known lengths, the summed length."""
    typed = [info for info in inputs if known(info)]
    if not typed:
        return None
    if all(known(info) and info.rank == 1 for info in inputs):
        lengths = [info.shape[0] for info in inputs]
        total = sum(lengths) if all(isinstance(n, int) for n in lengths) else None
        return [TensorInfo(typed[0].elem_type, (total,))]
    return [ranked(typed[0].elem_type, typed[0].rank)]


def matmul(node, inputs, constants):
    """MatMul: NumPy's matmul rank (a 1-D operand loses its dimension), of input 0's type."""
    if not (known(inputs[0]) and known(inputs[1])):
        return None
    a, b = inputs[0].rank, inputs[1].rank
    rank = max(a, b) if a >= 2 and b >= 2 else (b - 1 if a == 1 else a - 1)
    return [ranked(inputs[0].elem_type, rank)]




def slice_(node, inputs, constants):
    """Slice keeps the rank; of a 1-D vector of known length (a shape vector) with constant bounds, the
    exact length (a Reshape's rank is the length of its shape input)."""
    if not known(inputs[0]):
        return None
    kept = [ranked(inputs[0].elem_type, inputs[0].rank)]
    length = _length(inputs[0])
    if not isinstance(length, int):
        return kept
    if len(node.input) > 1:  # opset 10: inputs (starts, ends, axes, steps)
        bounds = [constants(name) if name else None for name in (*node.input[1:5], *[""] * (5 - len(node.input)))]
        starts, ends, axes, steps = bounds
        if starts is None or ends is None or (axes is None and len(node.input) > 3 and node.input[3]) or (
                steps is None and len(node.input) > 4 and node.input[4]):
            return kept
    else:
        starts, ends, axes, steps = (attribute(node, name) for name in ("starts", "ends", "axes", "steps"))
    starts, ends = np.asarray(starts).reshape(-1), np.asarray(ends).reshape(-1)
    axes = np.zeros(1, np.int64) if axes is None else np.asarray(axes).reshape(-1)
    steps = np.ones(1, np.int64) if steps is None else np.asarray(steps).reshape(-1)
    if not (len(starts) == len(ends) == len(axes) == len(steps) == 1) or int(axes[0]) not in (0, -1) or not steps[0]:
        return kept
    return [TensorInfo(inputs[0].elem_type, (slice_length(length, int(starts[0]), int(ends[0]), int(steps[0])),))]




def untyped(rule: RankRule) -> RankRule:
    """``rule``'s ranks with the element types left unknown, for ops whose outputs are not of their first
    input's type (QuantizeLinear, MatMulInteger, ...): the op's schema types them (``output_elem_types``)."""

    def ranks_only(node, inputs, constants):
        outputs = rule(node, inputs, constants)
        return None if outputs is None else [TensorInfo(0, info.shape) for info in outputs]

    ranks_only.__doc__ = rule.__doc__
    return ranks_only


def on_inputs(rule: RankRule, *positions: int) -> RankRule:
    """``rule`` applied to the inputs at ``positions`` (a quantized op's tensors among its scales and zero
    points: QLinearAdd's A and B are inputs 0 and 3)."""

    def picked(node, inputs, constants):
        chosen = [inputs[p] if p < len(inputs) else None for p in positions]
        inner = NodeProto()
        inner.CopyFrom(node)
        del inner.input[:]
        inner.input.extend(node.input[p] if p < len(node.input) else "" for p in positions)
        return rule(inner, chosen, constants)

    picked.__doc__ = rule.__doc__
    return picked




def reduce(node, inputs, constants):
    """Reductions: the input rank with keepdims (the default); with keepdims=0 one less per reduced axis
    (ArgMax/ArgMin: one), all of them for empty or absent axes unless noop_with_empty_axes, as ORT reads them."""
    if not known(inputs[0]):
        return None
    rank = inputs[0].rank
    elem_type = TensorProto.INT64 if node.op_type in ("ArgMax", "ArgMin") else inputs[0].elem_type
    if attribute(node, "keepdims", 1) == 1:
        return [ranked(elem_type, rank)]
    if node.op_type in ("ArgMax", "ArgMin"):
        return [ranked(elem_type, rank - 1)] if rank else None
    axes = _axes(node, inputs, constants)
    if axes is None and len(node.input) > 1 and node.input[1]:
        return None  # axes known at run time only
    if not axes:
        return [ranked(elem_type, rank if attribute(node, "noop_with_empty_axes", 0) else 0)]
    return [ranked(elem_type, rank - len({a % rank for a in axes}))] if rank else None


_COMPARISONS = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "IsNaN", "IsInf"}
_UNARY = ("Identity Neg Abs Relu Sigmoid Tanh Exp Log Sqrt Erf Softmax LogSoftmax Dropout LayerNormalization Not Floor "
          "Ceil Round Sign Reciprocal LeakyRelu Elu Selu Gelu HardSigmoid HardSwish Clip Softplus Softsign Sin Cos "
          "Mish CumSum Trilu InstanceNormalization BatchNormalization GroupNormalization RMSNormalization").split()
_SAME_RANK = "Transpose Pad Tile Conv ConvTranspose MaxPool AveragePool Resize ReverseSequence TopK Split".split()
_BROADCAST = "Add Sub Mul Div Pow Mod Max Min Sum Mean Where BitShift PRelu".split() + sorted(_COMPARISONS - {
    "IsNaN", "IsInf"})
# com.microsoft ops that ORT's transformer optimizer and offline optimizer write.
_MICROSOFT_UNARY = ("FastGelu BiasGelu Gelu QuickGelu SkipLayerNormalization SkipSimplifiedLayerNormalization "
                    "SimplifiedLayerNormalization LayerNormalization BiasAdd").split()

RANK_RULES: dict[tuple[str, str], RankRule] = {
    **{("", op): same_shape for op in _UNARY},
    **{("", op): same_rank for op in _SAME_RANK},
    **{("", op): broadcast for op in _BROADCAST},
    **{("", op): reduce for op in ("ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum "
                                   "ReduceLogSumExp ReduceSumSquare ArgMax ArgMin").split()},
    ("", "IsNaN"): predicate, ("", "IsInf"): predicate,
    ("", "Cast"): cast, ("", "Shape"): shape, ("", "Size"): size, ("", "Flatten"): flatten,
    ("", "Reshape"): reshape, ("", "Expand"): expand, ("", "ConstantOfShape"): constant_of_shape,
    ("", "STFT"): stft, ("", "Range"): range_, ("", "NonZero"): non_zero, ("", "Unsqueeze"): unsqueeze,
    ("", "Squeeze"): squeeze, ("", "Slice"): slice_, ("", "Concat"): concat, ("", "MatMul"): matmul, 
    **{(_MICROSOFT, op): same_shape for op in _MICROSOFT_UNARY},
    (_MICROSOFT, "Attention"): attention, (_MICROSOFT, "MultiHeadAttention"): attention,
    (_MICROSOFT, "FusedMatMul"): matmul, (_MICROSOFT, "FusedConv"): same_rank,
    (_MICROSOFT, "BiasSplitGelu"): same_rank,  # the last dimension halves
    (_MICROSOFT, "FusedGemm"): flatten,  # Gemm: always 2-D
    # Quantized models (ORT's quantization tools): the outputs are not of the first input's type
    **{(domain, op): untyped(same_rank) for domain in ("", _MICROSOFT) for op in ("QuantizeLinear", "DequantizeLinear")},
    ("", "MatMulInteger"): untyped(matmul), (_MICROSOFT, "MatMulIntegerToFloat"): untyped(matmul),
    (_MICROSOFT, "DynamicQuantizeMatMul"): untyped(matmul),
    ("", "QLinearMatMul"): untyped(on_inputs(matmul, 0, 3)), ("", "QLinearConv"): untyped(same_rank),
    **{(_MICROSOFT, op): untyped(on_inputs(broadcast, 0, 3)) for op in ("QLinearAdd", "QLinearMul")},
    **{(_MICROSOFT, op): untyped(same_rank) for op in ("QLinearSoftmax", "QLinearSigmoid", "QLinearLeakyRelu")},
    (_MICROSOFT, "QGemm"): untyped(flatten),
    (_MICROSOFT, "MatMulNBits"): same_rank,  # A [..., K] x B -> [..., N], of A's type
}


def holder_output_ranks(node: NodeProto, bodies: dict[str, tuple[GraphProto, dict[str, TensorInfo]]],
                        outer: dict[str, TensorInfo]) -> list[TensorInfo | None]:
    """The ranks of an If's, Loop's or Scan's outputs from what every layer knows of its subgraphs' outputs
    (ORT's if.cc, loop.cc, scan_9.cc): an If output has a rank when both branches give it that same rank (ORT
    runs one branch: otherwise the rank is the condition's); a Loop's or Scan's carried output has its
    initial value's rank when the body gives that rank back; a scan output has the body output's rank plus
    one (after zero iterations a Loop's is [0], rank 1, where ORT knows no shape of the body output: the
    gathers reading it then fail in the original too, unless their indices are empty). ``bodies``: attribute
    name to (its subgraph, the subgraph's types after its walk); one TensorInfo (rank only) or None per output."""
    result: list[TensorInfo | None] = [None] * len(node.output)
    if node.domain not in ("", "ai.onnx"):
        return result

    def body_output(name: str, k: int) -> TensorInfo | None:
        graph, infos = bodies[name]
        return infos.get(graph.output[k].name) if k < len(graph.output) else None

    if node.op_type == "If" and {"then_branch", "else_branch"} <= bodies.keys():
        for k in range(len(node.output)):
            then, other = body_output("then_branch", k), body_output("else_branch", k)
            if known(then) and known(other) and then.rank == other.rank:
                result[k] = ranked(then.elem_type or other.elem_type, then.rank)
        return result
    if node.op_type not in ("Loop", "Scan") or "body" not in bodies:
        return result
    if node.op_type == "Loop":
        carried, initial_at, body_at = len(node.input) - 2, 2, 1
    else:
        carried = len(node.input) - int(attribute(node, "num_scan_inputs", 0))
        initial_at, body_at = 0, 0
        if len(bodies["body"][0].input) != len(node.input):
            return result  # Scan 8 (a batch axis first): not read here
    for k in range(len(node.output)):
        out = body_output("body", body_at + k)
        if not known(out):
            continue
        if k < carried:  # by induction over the iterations, from the body input of the initial value's rank
            initial = outer.get(node.input[initial_at + k])
            graph, infos = bodies["body"]
            body_input = infos.get(graph.input[initial_at + k].name)
            if known(initial) and initial.rank == out.rank and (body_input is None or body_input.rank in (
                    None, initial.rank)):
                result[k] = ranked(initial.elem_type or out.elem_type, out.rank)
        else:
            result[k] = ranked(out.elem_type, out.rank + 1)
    return result

def apply_rank_rule(node: NodeProto, inputs: Sequence[TensorInfo | None], constants: Constants,
                    rules: Mapping[tuple[str, str], RankRule]) -> list[TensorInfo] | None:
    """The outputs' TensorInfo by the node's rule in ``rules`` ((domain, op type), "" for ONNX), or None."""
    rule = rules.get(("" if node.domain == "ai.onnx" else node.domain, node.op_type))
    if rule is None:
        return None
    try:
        return rule(node, inputs, constants)
    except (IndexError, TypeError, ValueError, ZeroDivisionError):  # a malformed node: ORT will say why
        return None
