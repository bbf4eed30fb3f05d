"""ORT's offline optimizer as a pre-pass of the rewrite (``rewrite --ort-optimize``).

Under ORT's default session options, ORT constant-folds and fuses through builtin gathers but not
through a custom op, so a rewritten model can differ from the original in the last bit. Running ORT's
own optimizer on the original first (CPU execution provider, ORT_ENABLE_EXTENDED: the level that does
not change layouts for one machine) applies those folds and fusions once, to both sides; the rewrite
of the optimized model is then bit-identical to the original under default options. The optimized
model holds CPU-only fused ops (com.microsoft) and runs on the CPU execution provider.

ORT's optimizer is not always right: ``DISABLED_OPTIMIZERS`` are left out of the pre-pass so that it
never bakes a wrong answer into the model.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from pathlib import Path
from typing import Any, Iterator

import onnx
from onnx import ModelProto

from .modelfile import ModelFileError, SessionOptionsFactory, external_tensors, staging_folder

# ORT 1.31's GatherToSliceFusion turns Gather(x, Range(T-1, -1, -1)) (a reversal) into a Slice that
# selects nothing.
DISABLED_OPTIMIZERS = ("GatherToSliceFusion",)

_OPTIMIZED_NAME = "ort_optimized.onnx"


class OrtOptimizeError(ValueError):
    """ONNX Runtime cannot load or optimize the model; the message holds ORT's reason."""

_EXTERNAL_FROM_BYTES = 1024


def ort_optimize(model: ModelProto, external_data_folder: str | Path | None = None,
                 workdir: str | Path | None = None, *, session_options: SessionOptionsFactory) -> ModelProto:
    """ORT's offline optimization of ``model`` (CPU EP, ORT_ENABLE_EXTENDED, ``DISABLED_OPTIMIZERS`` off),
    on options that ``session_options`` (``gathermultiaxis.session_options``) registers the
    GatherMultiaxis op library on.

    Tensors of ``model`` held in external files are found relative to ``external_data_folder`` (by
    default the working folder). The result holds all its data in memory, except when ``model`` has
    external data and ``workdir`` is given: then its tensors of over 1 KiB stay in
    ``workdir/ort_optimized.onnx.data`` (locations relative to ``workdir``, which must outlive the
    result's use). Raises ``OrtOptimizeError`` with ORT's reason
    when ORT cannot load or optimize the model.

    Args:
        model: the model; it is not changed.
        external_data_folder: the folder its external data locations are relative to (by default the
            working folder).
        workdir: a folder to keep the optimized model's large tensors in (only for a model with external
            data); None holds everything in memory.
        session_options: the factory of ORT session options (``gathermultiaxis.session_options``).

    Returns:
        The optimized model.

    Raises:
        OrtOptimizeError: ORT cannot load or optimize the model.
    """
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="gathermultiaxis-ort-") as scratch:
        folder = Path(workdir) if workdir is not None else Path(scratch)
        target = folder / _OPTIMIZED_NAME
        options = session_options(None)  # new options (see modelfile.SessionOptionsFactory)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(target)
        options.log_severity_level = 3
        external = bool(external_tensors(model))
        if external:
            options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                             str(Path(external_data_folder or Path.cwd()).resolve()))
        keep_external = external and workdir is not None
        if external:
            # ORT writes the weights beside the optimized model. (Without a file of its own, ORT keeps each
            # external initializer it left unchanged pointing at the original's location, relative to a
            # folder that no longer holds it: the optimized model's data was then looked for in ``folder``.)
            options.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                             _OPTIMIZED_NAME + ".data")
            options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                             str(_EXTERNAL_FROM_BYTES))
        try:
            ort.InferenceSession(model.SerializeToString(), options,
                                 providers=["CPUExecutionProvider"], disabled_optimizers=list(DISABLED_OPTIMIZERS))
        except Exception as error:  # noqa: BLE001 - ORT raises its own exception types
            from .modelfile import one_line

            raise OrtOptimizeError(f"ONNX Runtime cannot optimize the model ({one_line(error)})") from None
        return onnx.load_model(str(target), load_external_data=not keep_external)


# ---- typing what ORT's optimizer writes ------------------------------------------------------------------
# ORT's fused ops have no ONNX schema, and ORT's symbolic shape inference stops at the first op it does
# not know (FusedConv, FusedGemm, FusedMatMul among them). For shape inference only, the typing copy holds
# a standard op with exactly the same output type and shape in their place.

_MICROSOFT = "com.microsoft"
_CONV_ATTRIBUTES = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}
_GEMM_ATTRIBUTES = {"alpha", "beta", "transA", "transB"}


def typing_stand_in(node: onnx.NodeProto) -> onnx.NodeProto | None:
    """A standard node typing ``node``'s outputs exactly as ORT computes them, for a com.microsoft op
    that ORT's optimizer inserts; None for any other node (or a form without an exact stand-in).

    Args:
        node: any node.

    Returns:
        A new Conv, Gemm, MatMul or Einsum node with ``node``'s name and outputs, or None.
    """
    if node.domain != _MICROSOFT:
        return None
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "FusedConv":  # Conv + activation (+ Z, added: of the output's shape)
        kept = {k: v for k, v in attributes.items() if k in _CONV_ATTRIBUTES}
        return onnx.helper.make_node("Conv", list(node.input[:3]), list(node.output), name=node.name, **kept)
    if node.op_type == "FusedGemm":  # Gemm + activation
        kept = {k: v for k, v in attributes.items() if k in _GEMM_ATTRIBUTES}
        return onnx.helper.make_node("Gemm", list(node.input[:3]), list(node.output), name=node.name, **kept)
    if node.op_type == "FusedMatMul":  # alpha * op(A) @ op(B); op transposes the last two dims
        if attributes.get("transBatchA", 0) or attributes.get("transBatchB", 0):
            return None
        trans_a, trans_b = attributes.get("transA", 0), attributes.get("transB", 0)
        if not (trans_a or trans_b):
            return onnx.helper.make_node("MatMul", list(node.input[:2]), list(node.output), name=node.name)
        a, b = ("...ji" if trans_a else "...ij"), ("...kj" if trans_b else "...jk")
        return onnx.helper.make_node("Einsum", list(node.input[:2]), list(node.output), name=node.name,
                                     equation=f"{a},{b}->...ik")
    return None


@functools.lru_cache(maxsize=1)
def _contrib_schemas() -> dict[tuple[str, str], Any]:  # Any: ORT's pybind schemas have no type information
    """ORT's own op schemas (com.microsoft and the other domains ORT registers), newest version of each."""
    try:
        from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema
    except ImportError:
        return {}
    schemas: dict[tuple[str, str], Any] = {}
    for schema in get_all_operator_schema():
        key = (schema.domain, schema.name)
        if schema.domain not in ("", "ai.onnx") and (key not in schemas or
                                                      schema.since_version > schemas[key].since_version):
            schemas[key] = schema
    return schemas


def _elem_type_of(type_str: str) -> int:
    name = type_str.removeprefix("tensor(").removesuffix(")").upper()
    try:
        return onnx.TensorProto.DataType.Value(name)
    except ValueError:
        return 0


def schema_output_types(node: onnx.NodeProto, input_types: list[int]) -> list[int] | None:
    """The element types of a non-ONNX node's outputs by ORT's op schema (``bound_output_types``); None
    when ORT has no schema for the op.

    Args:
        node: a node of a domain ORT registers.
        input_types: its inputs' element types (TensorProto data types; 0 for unknown).

    Returns:
        The outputs' element types (0 where the schema does not tell), or None.
    """
    schema = _contrib_schemas().get((node.domain, node.op_type))
    if schema is None:
        return None
    formals = [(formal.typeStr, str(formal.option).endswith("Variadic"), formal.isHomogeneous)
               for formal in schema.inputs]
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    outputs = [formal.typeStr for formal in schema.outputs]
    if schema.outputs and str(schema.outputs[-1].option).endswith("Variadic"):
        outputs += outputs[-1:] * (len(node.output) - len(outputs))
    return bound_output_types(formals, outputs, allowed, input_types, len(node.output))


def bound_output_types(inputs: list[tuple[str, bool, bool]], outputs: list[str], allowed: dict[str, list[str]],
                       input_types: list[int], count: int) -> list[int]:
    """The element types of a node's first ``count`` outputs by its op schema: ``inputs`` are the formal
    inputs (type string, variadic, homogeneous), ``outputs`` the formal outputs' type strings, ``allowed``
    each type parameter's allowed types. An output's type parameter is bound by an input of the same
    parameter whose type is known (a homogeneous variadic input by any of its values), or allows a single
    type; 0 where the schema does not tell.

    Args:
        inputs: the formal inputs, each (type string, variadic, homogeneous).
        outputs: the formal outputs' type strings.
        allowed: type parameter to its allowed type strings.
        input_types: the node's inputs' element types (0 for unknown).
        count: how many outputs the node has.

    Returns:
        One element type (a TensorProto data type, or 0) per output.
    """
    bound: dict[str, int] = {}
    for position, (type_str, variadic, homogeneous) in enumerate(inputs):
        if variadic:  # the last formal input: it takes every remaining value
            if homogeneous:
                known = next((elem_type for elem_type in input_types[position:] if elem_type), 0)
                if known:
                    bound.setdefault(type_str, known)
            break
        if position < len(input_types) and input_types[position]:
            bound.setdefault(type_str, input_types[position])
    types = []
    for type_str in outputs[:count]:
        choices = allowed.get(type_str, [type_str])
        types.append(bound.get(type_str) or (_elem_type_of(choices[0]) if len(choices) == 1 else 0))
    return types


@contextlib.contextmanager
def ort_optimized(model: ModelProto, external_data_folder: Path | None, output: Path, *,
                  session_options: SessionOptionsFactory) -> Iterator[tuple[ModelProto, Path]]:
    """``ort_optimize`` for the command line: the optimized model and the folder its external data is in,
    a temporary folder beside ``output`` (same file system, so big weights are never held in memory),
    removed on exit. ORT's refusal becomes a ModelFileError.

    Args:
        model: the model; it is not changed.
        external_data_folder: the folder its external data locations are relative to.
        output: the path the command writes its result to.
        session_options: the factory of ORT session options (``gathermultiaxis.session_options``).

    Yields:
        The optimized model and the folder of its external data.

    Raises:
        ModelFileError: ORT refuses the model, or the temporary folder cannot be made or written.
    """
    output = Path(output)
    with staging_folder(output, output.parent if str(output.parent) else Path(".")) as workdir:
        try:
            optimized = ort_optimize(model, external_data_folder, workdir, session_options=session_options)
        except OrtOptimizeError as error:
            raise ModelFileError(f"{output}: {error}") from None
        yield optimized, workdir


__all__ = ["DISABLED_OPTIMIZERS", "OrtOptimizeError", "bound_output_types", "ort_optimize", "ort_optimized",
           "schema_output_types", "typing_stand_in"]
