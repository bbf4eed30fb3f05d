"""Layer 2: the ranks ORT's symbolic shape inference states, less those resting on a value where ORT's kernels may
give another rank."""

from __future__ import annotations
import contextlib
import logging
import io
import math
from collections import Counter
from dataclasses import dataclass
import onnx
import onnx.shape_inference
from onnx import GraphProto, ModelProto
from ...ops.alignment import GATHER_ND
from ...ops.private_api import PrivateAPIError
from .symbolic_inference import partial_symbolic_inference, symbolic_shape_infer_module, symbolic_shape_inference
from ..ir.walk import ONNX_DOMAINS, attribute, constant_value, names_read, node_holders, subgraphs
from ..schema import register_schema
from .tensor_info import TensorInfo, tensor_info

_log = logging.getLogger(__name__)


@dataclass
class SymbolicInference:
    """Layer 2's result: name to TensorInfo, and why ORT's symbolic shape inference gave up ("" when it did not)."""

    infos: dict[str, TensorInfo]
    failure: str = ""


def symbolic_inference(light: ModelProto) -> SymbolicInference:
    """Layer 2: ORT's symbolic shape inference (knows Reshape/Flatten chains and com.microsoft ops).

    Names from every graph; a name defined in two sibling subgraphs is ambiguous and dropped. So is every
    value whose rank rests on one that ORT's symbolic inference states where ORT's kernels may give
    another (``_symbolic_unsure``): the outputs of those nodes and all that is computed from them.

    Raises:
        PrivateAPIError: the installed onnxruntime's private inference steps changed.
    """
    register_schema()  # ORT's inference falls back to onnx's per node, GatherMultiaxis ones included
    try:
        symbolic_shape_inference()  # PrivateAPIError when the installed onnxruntime lacks a step
        if (symbolic_shape_infer_module().get_opset(light) or 0) < 7:
            return SymbolicInference({}, "the model's opset is below 7")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            inferred = partial_symbolic_inference(light)  # the partial result, also where inference stops
    except (PrivateAPIError, MemoryError):
        # an onnxruntime whose private steps changed: say so, rather than rewrite with fewer ranks; out of
        # memory: not "no inference" (see ``inferred``)
        raise
    except Exception as error:  # noqa: BLE001 - it gives up on some graphs as a whole: the next layers take over
        failure = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        _log.debug("ORT's symbolic shape inference gave up on the model (%s)", failure)
        return SymbolicInference({}, failure)
    infos: dict[str, TensorInfo] = {}
    seen: Counter = Counter()
    for holder in node_holders(inferred):
        if isinstance(holder, GraphProto):
            for value in (*holder.value_info, *holder.output):
                info = tensor_info(value.type)
                if info is not None and info.rank is not None:
                    seen[value.name] += 1
                    infos[value.name] = info
    unsure: set[str] = set()
    _unsure_values(inferred.graph, {}, infos, unsure)
    return SymbolicInference({name: info for name, info in infos.items() if seen[name] == 1 and name not in unsure})


def symbolic_infos(light: ModelProto) -> dict[str, TensorInfo]:
    """Layer 2's ranks (``symbolic_inference``), without the reason it may have given up."""
    return symbolic_inference(light).infos

_REDUCTIONS = frozenset("ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum "
                        "ReduceLogSumExp ReduceSumSquare".split())


def _unsure_values(graph: GraphProto, outer: dict[str, tuple[int, ...]], infos: dict[str, TensorInfo],
                   unsure: set[str]) -> None:
    """Add to ``unsure`` the values of ``graph`` (subgraphs included, in graph order) whose symbolic rank
    rests on one ``_symbolic_unsure`` doubts."""
    constants = dict(outer)
    constants.update((init.name, tuple(init.dims)) for init in graph.initializer)
    for node in graph.node:
        value = constant_value(node)
        if value is not None:
            constants[node.output[0]] = tuple(value.dims)
        tainted = any(name in unsure for name in node.input)
        branch_outputs = []
        for attribute_proto in node.attribute:
            for sub in subgraphs(attribute_proto):
                _unsure_values(sub, constants, infos, unsure)
                tainted = tainted or any(name in unsure for name in names_read(sub))
                branch_outputs.append([value.name for value in sub.output])
        if tainted:
            unsure.update(name for name in node.output if name)
            continue
        for position in _symbolic_unsure(node, constants, infos, branch_outputs, unsure):
            if position < len(node.output) and node.output[position]:
                unsure.add(node.output[position])


def _symbolic_unsure(node: onnx.NodeProto, constants: dict[str, tuple[int, ...]], infos: dict[str, TensorInfo],
                     branch_outputs: list[list[str]], unsure: set[str]) -> list[int]:
    """The outputs of ``node`` whose rank ORT's symbolic inference states where ORT's kernels may give
    another (measured with onnxruntime 1.32; docs/upstream.md): an If whose branches' ranks are not known
    and equal (it takes the then-branch's), a Squeeze without constant axes, a SequenceInsert (it takes the
    first element's rank), a GatherND with batch_dims (it ignores them), SoftmaxCrossEntropyLoss, and a
    reduction with keepdims=0 over empty or run-time axes."""
    if node.domain not in ONNX_DOMAINS:
        return []
    everything = list(range(len(node.output)))
    op = node.op_type
    if op == "If":
        if len(branch_outputs) != 2:
            return everything

        def rank(names: list[str], k: int) -> int | None:
            info = infos.get(names[k]) if k < len(names) and names[k] not in unsure else None
            return None if info is None else info.rank

        then_outputs, else_outputs = branch_outputs
        return [k for k in everything if rank(then_outputs, k) is None or rank(then_outputs, k) != rank(else_outputs, k)]
    sized_axes = len(node.input) > 1 and node.input[1] in constants and math.prod(constants[node.input[1]]) > 0
    if op == "Squeeze":
        if len(node.input) > 1 and node.input[1]:
            return [] if sized_axes else everything
        if attribute(node, "axes") is not None:
            return []
        data = infos.get(node.input[0])  # no axes: every dim of size 1, known only where every size is
        return [] if data is not None and data.shape is not None and all(isinstance(d, int) for d in data.shape) \
            else everything
    if op in ("SequenceInsert", "SoftmaxCrossEntropyLoss"):
        return everything
    if op == GATHER_ND:
        return everything if attribute(node, "batch_dims", 0) else []
    if op in _REDUCTIONS and attribute(node, "keepdims", 1) == 0:
        if len(node.input) > 1 and node.input[1] and not sized_axes:
            return everything
    return []


__all__ = ["SymbolicInference", "symbolic_inference", "symbolic_infos"]
