"""What is known of a value's type: ``TensorInfo`` (element type and shape, dims concrete, symbolic or unknown),
read from ONNX types and learnt per name."""

from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard
from onnx import GraphProto, TypeProto
from ..ir.walk import constant_value


Dim = int | str | None  # a concrete size, a symbolic name, or unknown


@dataclass(frozen=True)
class TensorInfo:
    """What shape inference knows about a tensor: element type (0 if unknown) and shape."""

    elem_type: int
    shape: tuple[Dim, ...] | None  # None: rank unknown

    @property
    def rank(self) -> int | None:
        """The number of dims, or None when the shape is unknown."""
        return None if self.shape is None else len(self.shape)


if TYPE_CHECKING:
    class KnownRankInfo(TensorInfo):
        """For type checkers only: a TensorInfo whose rank is known, what ``known_rank``'s True says."""

        shape: tuple[Dim, ...]

        @property
        def rank(self) -> int: ...


def tensor_info(type_proto: TypeProto) -> TensorInfo | None:
    """What a declared type says of a tensor."""
    if not type_proto.HasField("tensor_type"):
        return None
    tensor_type = type_proto.tensor_type
    if not tensor_type.HasField("shape"):
        return TensorInfo(tensor_type.elem_type, None)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim)
    return TensorInfo(tensor_type.elem_type, dims)


def graph_infos(graph: GraphProto, main: bool = False) -> dict[str, TensorInfo]:
    """What inference wrote into ``graph`` (of the typing copy), with the facts ORT enforces last so that
    nothing hides them: initializer dims, Constant values and the main graph's input shapes.
    """
    infos: dict[str, TensorInfo] = {}
    for value in (*graph.value_info, *graph.output, *(graph.input if not main else ())):
        learn(infos, value.name, tensor_info(value.type))
    facts = {init.name: TensorInfo(init.data_type, tuple(init.dims)) for init in graph.initializer}
    if main:
        facts.update({value.name: info for value in graph.input if (info := tensor_info(value.type)) is not None})
    for node in graph.node:
        value = constant_value(node)
        if value is not None:
            facts[node.output[0]] = TensorInfo(value.data_type, tuple(value.dims))
    for name, info in facts.items():
        if info.rank is not None or not known_rank(infos.get(name)):
            infos[name] = with_elem_type(info, infos.get(name))
    return infos


def learn(infos: dict[str, TensorInfo], name: str, info: TensorInfo | None) -> None:
    """Record ``info`` for ``name`` unless it knows less than what is recorded: an entry without a shape
    never replaces a known rank (it keeps only its element type when the known one has none).
    """
    if info is None:
        return
    known = infos.get(name)
    if known_rank(known) and info.rank is None:
        if not known.elem_type and info.elem_type:
            infos[name] = TensorInfo(info.elem_type, known.shape)
        return
    infos[name] = with_elem_type(info, known)


def declared_ranks(graph: GraphProto) -> dict[str, TensorInfo]:
    """The ranks (never the sizes: ORT does not enforce them) that ``graph`` of the original model
    declares for values no fact covers: value_info, outputs and subgraph inputs. Used only where
    inference says nothing.
    """
    ranks = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        info = tensor_info(value.type)
        if info is not None and info.rank is not None:
            ranks[value.name] = TensorInfo(info.elem_type, (None,) * info.rank)
    return ranks


def known_rank(info: TensorInfo | None) -> TypeGuard[KnownRankInfo]:
    """Whether ``info`` knows a rank."""
    return info is not None and info.rank is not None


def with_elem_type(info: TensorInfo, known: TensorInfo | None) -> TensorInfo:
    """``info``, with ``known``'s element type where ``info`` has none."""
    if info.elem_type or known is None:
        return info
    return TensorInfo(known.elem_type, info.shape)


__all__ = ["Dim", "TensorInfo", "declared_ranks", "graph_infos", "known_rank", "learn", "tensor_info",
           "with_elem_type"]
