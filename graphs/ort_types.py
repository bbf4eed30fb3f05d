"""ONNX Runtime's own load-time types of a model's main-graph values, which its fusions read. The rewrite
declares each replaced output with exactly this type so that the written model meets the same fusions: a
shape ORT did not know can enable a fusion that rounds differently. Each value is read as a graph output
plus its ``Shape`` (ORT's Python API shows a scalar and an unknown shape alike as ``[]``).
"""

from __future__ import annotations

from collections.abc import Iterable
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
    """The type ORT's load-time inference gives each of the named values of ``model``'s main graph.

    Raises:
        OrtTypesError: ORT cannot load the model.
    """
    import onnxruntime as ort

    made = {name for node in model.graph.node for name in node.output if name}
    outputs = {value.name for value in model.graph.output}
    wanted = list(dict.fromkeys(name for name in names if name in made))
    if not wanted:
        return {}
    # Only the additions are built; protobuf merges a concatenated message into the model's bytes (the
    # repeated node and output fields grow), so the model is never copied here. The outputs are declared
    # with no type: ORT infers it.
    extra = ModelProto()
    taken = NameScope(all_names(model))
    shapes_of: dict[str, str] = {}
    for name in wanted:
        if name not in outputs:
            extra.graph.output.add().name = name
        shapes_of[name] = taken.fresh(f"{name}/ort_type_shape")
        extra.graph.node.append(helper.make_node("Shape", [name], [shapes_of[name]]))
        extra.graph.output.add().name = shapes_of[name]
    options = session_options(None)  # new options (see modelfile.SessionOptionsFactory)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    if external_data_folder is not None:
        options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                         str(Path(external_data_folder).resolve()))
    try:
        session = ort.InferenceSession(model.SerializeToString() + extra.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - ORT raises its own exception types
        raise OrtTypesError(one_line(error)) from None
    seen = {value.name: (value.type, value.shape) for value in session.get_outputs()}
    del session
    types = {}
    for name in wanted:
        kind, dims = seen[name]
        elem_type = _ELEM_TYPES.get(kind)
        rank = seen[shapes_of[name]][1]
        if elem_type is None:
            continue
        type_proto = TypeProto()
        type_proto.tensor_type.elem_type = elem_type
        if rank and isinstance(rank[0], int):  # ORT knows the rank
            shape = type_proto.tensor_type.shape
            shape.SetInParent()  # a scalar: a shape with no dims
            dims = dims or []
            for size in dims if len(dims) == rank[0] else [None] * rank[0]:
                dim = shape.dim.add()
                if isinstance(size, int):
                    dim.dim_value = size
                elif isinstance(size, str):
                    dim.dim_param = size
        types[name] = type_proto
    return types


# ORT's names of tensor types ("tensor(float16)") -> ONNX element types
_ELEM_TYPES = {f"tensor({name.lower()})": value for name, value in TensorProto.DataType.items() if value}


__all__ = ["OrtTypesError", "ort_value_types", "plain_session_options"]
