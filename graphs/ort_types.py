"""ONNX Runtime's own load-time types of a model's main-graph values, which its fusions read. The rewrite
declares each replaced output with exactly this type so that the written model meets the same fusions: a
shape ORT did not know can enable a fusion that rounds differently. Each value is read as a graph output;
where ORT's Python API shows ``[]`` (a scalar and an unknown shape look alike there), also its ``Shape``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

from onnx import ModelProto, TensorProto, TypeProto, helper

from .ir.builder import NameScope
from .modelfile import SessionOptionsFactory, one_line
from .ir.walk import all_names


class OrtTypesError(ValueError):
    """ORT cannot load the model to say its types; the message holds ORT's reason."""


def plain_session_options(options=None):
    """A ``SessionOptionsFactory`` that registers nothing: for models of standard and ORT's own ops."""
    import onnxruntime as ort

    return options if options is not None else ort.SessionOptions()


def ort_value_types(model: ModelProto, names: Iterable[str], *, session_options: SessionOptionsFactory,
                    external_data_folder: str | Path | None = None) -> dict[str, TypeProto]:
    """The type ORT's load-time inference gives each of the named values of ``model``'s main graph. Every
    session it makes is of ``model`` with outputs and ``Shape`` nodes added, so one that loads proves that
    ``model`` loads too (with the same options, ``model`` declaring an output).

    Raises:
        OrtTypesError: ORT cannot load the model.
    """
    made = {name for node in model.graph.node for name in node.output if name}
    wanted = list(dict.fromkeys(name for name in names if name in made))
    if not wanted:
        return {}
    read = _Reader(model, session_options, external_data_folder)
    # One session of outputs alone where it answers: a Shape node for each value costs ORT more than the
    # output itself. The Shape of every value (one session, as asked first) decides where another would.
    try:
        seen = read(wanted, _maybe_scalars(model, wanted))
        unclear = [name for name in wanted if seen[name][2] is None and not seen[name][1]]
        if unclear:
            seen.update(read(unclear, unclear))
        return _types(wanted, seen)
    except OrtTypesError:
        pass  # the answer, or ORT's reason, of the session that has every Shape
    return _types(wanted, read(wanted, wanted))


class _Reader:
    """Sessions of ``model`` with some of its values as outputs, some with their ``Shape``."""

    def __init__(self, model: ModelProto, session_options: SessionOptionsFactory,
                 external_data_folder: str | Path | None):
        self.model, self.session_options, self.external_data_folder = model, session_options, external_data_folder
        self.outputs = {value.name for value in model.graph.output}

    def __call__(self, names: list[str], shaped: Collection[str]) -> dict[str, tuple[str, list, int | None]]:
        """Each of ``names``: ORT's type name, its shape as the Python API shows it, and the rank its
        ``Shape`` gives (for ``shaped`` ones; else None)."""
        import onnxruntime as ort

        # Only the additions are built; protobuf merges a concatenated message into the model's bytes (the
        # repeated node and output fields grow), so the model is never copied here. The outputs are declared
        # with no type: ORT infers it.
        extra = ModelProto()
        taken = NameScope(all_names(self.model)) if shaped else None
        shapes_of: dict[str, str] = {}
        for name in names:
            if name not in self.outputs:
                extra.graph.output.add().name = name
            if name in shaped:
                assert taken is not None
                shapes_of[name] = taken.fresh(f"{name}/ort_type_shape")
                extra.graph.node.append(helper.make_node("Shape", [name], [shapes_of[name]]))
                extra.graph.output.add().name = shapes_of[name]
        options = self.session_options(None)  # new options (see modelfile.SessionOptionsFactory)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 4
        if self.external_data_folder is not None:
            options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                             str(Path(self.external_data_folder).resolve()))
        try:
            session = ort.InferenceSession(self.model.SerializeToString() + extra.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
        except Exception as error:  # noqa: BLE001 - ORT raises its own exception types
            raise OrtTypesError(one_line(error)) from None
        seen = {value.name: (value.type, value.shape) for value in session.get_outputs()}
        del session
        answer = {}
        for name in names:
            kind, dims = seen[name]
            rank = None
            if name in shapes_of:
                rank_dims = seen[shapes_of[name]][1]
                rank = rank_dims[0] if rank_dims and isinstance(rank_dims[0], int) else -1  # -1: not known
            answer[name] = (kind, dims or [], rank)
        return answer


def _types(names: list[str], seen: dict[str, tuple[str, list, int | None]]) -> dict[str, TypeProto]:
    """The TypeProto of each answer (values typed alike share one: callers copy it, never change it)."""
    made: dict[tuple, TypeProto | None] = {}
    types = {}
    for name in names:
        kind, dims, rank = seen[name]
        key = (kind, tuple(dims), rank)
        if key not in made:
            made[key] = _type_proto(kind, dims, rank)
        type_proto = made[key]
        if type_proto is not None:
            types[name] = type_proto
    return types


def _type_proto(kind: str, dims: list, rank: int | None) -> TypeProto | None:
    """ORT's answer for one value as a TypeProto; None for a type other than a tensor."""
    elem_type = _ELEM_TYPES.get(kind)
    if elem_type is None:
        return None
    type_proto = TypeProto()
    type_proto.tensor_type.elem_type = elem_type
    if rank is None:  # no Shape asked: ORT showed dims, so it knows the rank
        rank = len(dims)
    if rank >= 0:  # ORT knows the rank
        shape = type_proto.tensor_type.shape
        shape.SetInParent()  # a scalar: a shape with no dims
        for size in dims if len(dims) == rank else [None] * rank:
            dim = shape.dim.add()
            if isinstance(size, int):
                dim.dim_value = size
            elif isinstance(size, str):
                dim.dim_param = size
    return type_proto


def _maybe_scalars(model: ModelProto, names: list[str]) -> set[str]:
    """Those of ``names`` whose node reads a rank-0 constant (a gather of a shape, most often): likely
    scalars, whose ``Shape`` is asked at once."""
    scalars = {tensor.name for tensor in model.graph.initializer if not tensor.dims}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output and any(
                attribute.name in ("value_int", "value_float", "value_string")
                or (attribute.name == "value" and not attribute.t.dims) for attribute in node.attribute):
            scalars.add(node.output[0])
    wanted = set(names)
    return {name for node in model.graph.node if not scalars.isdisjoint(node.input)
            for name in node.output if name in wanted}


# ORT's names of tensor types ("tensor(float16)") -> ONNX element types
_ELEM_TYPES = {f"tensor({name.lower()})": value for name, value in TensorProto.DataType.items() if value}


__all__ = ["OrtTypesError", "ort_value_types", "plain_session_options"]
