"""Random single-node gather models for ``gathermultiaxis check --fuzz N --seed S``.

Case ``i`` is drawn from seed ``S + i`` alone, so ``--fuzz 1 --seed S+i`` replays it. A failing case
is saved as a backend-test folder (model.onnx + test_data_set_0/input_*.pb), which
``gathermultiaxis check FOLDER`` runs again.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ..harness import single_gather_model
from .cases import CheckCase, DataSet

OPSETS = {GATHER: (7, 11, 13), GATHER_ELEMENTS: (11, 13), GATHER_ND: (11, 12, 13)}
ELEMENT_TYPES = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT8, TensorProto.INT16, TensorProto.INT32,
                 TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
                 TensorProto.BOOL, TensorProto.STRING, TensorProto.FLOAT16, TensorProto.BFLOAT16)


def _dims(rng, rank: int) -> list[int]:
    return [int(rng.choice([0, 1, 1, 2, 3, 4, 2, 3])) for _ in range(rank)]


def _values(rng, shape, dim: int) -> np.ndarray:
    """Indices for an axis of size ``dim``, negatives included; now and then one out of range."""
    values = rng.integers(-dim, max(dim, 1), shape) if dim else np.zeros(shape, dtype=np.int64)
    if values.size and rng.random() < 0.1:
        values.reshape(-1)[rng.integers(values.size)] = int(rng.choice([dim, dim + 2, -dim - 1, -dim - 5]))
    return values


def _data(rng, elem_type: int, shape) -> np.ndarray:
    if elem_type == TensorProto.STRING:
        return rng.integers(0, 1000, shape).astype(str).astype(object)
    if elem_type == TensorProto.BFLOAT16:
        return rng.standard_normal(shape).astype(np.float32)  # fed as float32, see with_float_boundary
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    if dtype == bool:
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        values = rng.standard_normal(shape).astype(dtype)
        values.reshape(-1)[: values.size // 7] = np.nan
        return values
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -(1 << 62)), min(info.max, 1 << 62), shape, dtype=np.int64).astype(dtype)


def _random_node(rng):
    """(op_type, opset, attributes, data shape, indices array) of one random gather."""
    op_type = str(rng.choice(list(OPSETS)))
    opset = int(rng.choice(OPSETS[op_type]))
    r = int(rng.integers(1, 6))
    data_shape = _dims(rng, r)
    if op_type == "Gather":
        axis = int(rng.integers(-r, r))
        q = int(rng.integers(0, 7 - r))  # indices rank: the output rank r + q - 1 stays <= 5
        indices = _values(rng, _dims(rng, q), data_shape[axis])
        return op_type, opset, {"axis": axis}, data_shape, indices
    if op_type == GATHER_ELEMENTS:
        axis = int(rng.integers(-r, r))
        # torch.gather semantics: indices may be smaller than the data on the other dimensions
        shape = [int(rng.integers(0, d + 1)) if i != axis % r and rng.random() < 0.3 else d
                 for i, d in enumerate(data_shape)]
        shape[axis % r] = int(rng.choice([0, 1, 2, 3]))
        indices = _values(rng, shape, data_shape[axis % r])
        return op_type, opset, {"axis": axis}, data_shape, indices
    b = int(rng.integers(0, r)) if opset >= 12 and rng.random() < 0.5 else 0
    k = int(rng.integers(1, r - b + 1))
    lead = data_shape[:b] + _dims(rng, int(rng.integers(0, 6 - b)))[:4 - b]  # b < r <= 5
    indices = np.stack([_values(rng, lead, data_shape[b + j]) for j in range(k)], axis=-1)
    attributes = {"batch_dims": b} if opset >= 12 else {}
    return op_type, opset, attributes, data_shape, indices.reshape(lead + [k])


def _declared_shape(rng, name: str, shape) -> list:
    """The shape a graph input declares: static, some dims symbolic, or the rank only."""
    mode = rng.integers(0, 3)
    if mode == 0:
        return list(shape)
    if mode == 1:  # some dims symbolic
        return [f"{name}_d{i}" if rng.random() < 0.5 else d for i, d in enumerate(shape)]
    return [None] * len(shape)  # rank only


def with_float_boundary(model: onnx.ModelProto, input_name: str, output_name: str) -> onnx.ModelProto:
    """Let a bfloat16 input and output be fed and fetched as float32 (ORT's Python API has no bfloat16):
    Casts are inserted behind the input and in front of the output, which keep their names."""
    graph = model.graph
    inner_input, inner_output = f"{input_name}_bf16", f"{output_name}_bf16"
    for node in graph.node:
        node.input[:] = [inner_input if name == input_name else name for name in node.input]
        node.output[:] = [inner_output if name == output_name else name for name in node.output]
    graph.node.insert(0, helper.make_node("Cast", [input_name], [inner_input], name="to_bfloat16",
                                          to=TensorProto.BFLOAT16))
    graph.node.append(helper.make_node("Cast", [inner_output], [output_name], name="from_bfloat16",
                                       to=TensorProto.FLOAT))
    for value in (*graph.input, *graph.output):
        if value.name in (input_name, output_name):
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    return model


def fuzz_case(seed: int) -> CheckCase:
    """One random gather model (Gather, GatherElements or GatherND, of a random opset, element type, shapes and
    declared shapes) and its feeds, drawn from ``seed`` alone, so a seed replays its case.

    Args:
        seed: the case's seed.

    Returns:
        The ``CheckCase`` (one data set, whose both-sides-raising counts as a comparison).
    """
    rng = np.random.default_rng(seed)
    op_type, opset, attributes, data_shape, indices = _random_node(rng)
    if op_type != GATHER_ND and rng.random() < 0.5:  # GatherND takes int64 indices only
        indices = indices.astype(np.int32)
    elem_type = int(rng.choice([t for t in ELEMENT_TYPES if t != TensorProto.BFLOAT16 or opset >= 13]))
    feeds = {"data": _data(rng, elem_type, data_shape), "indices": indices}
    index_type = helper.np_dtype_to_tensor_dtype(indices.dtype)
    model = single_gather_model(op_type, elem_type, index_type, _declared_shape(rng, "data", data_shape),
                                _declared_shape(rng, "indices", indices.shape), opset=opset,
                                name=f"fuzz_{op_type}", **attributes)
    if elem_type == TensorProto.BFLOAT16:
        model = with_float_boundary(model, "data", "output")
    description = (f"seed {seed}: {op_type}-{opset} {TensorProto.DataType.Name(elem_type)} data{data_shape} "
                   f"indices{list(indices.shape)} {attributes}")
    # Out-of-range indices are drawn on purpose: both sides raising is then a comparison too.
    return CheckCase(description, model, [DataSet(feeds, raising_compares=True)], "fuzz")


def save_reproducer(case: CheckCase, save_dir: str | Path | None, seed: int) -> Path:
    """Save ``case`` as a backend-test folder ``seed-<seed>`` under ``save_dir`` (default: a new
    temporary folder); ``gathermultiaxis check FOLDER`` runs it again."""
    folder = Path(save_dir or tempfile.mkdtemp(prefix="gathermultiaxis-fuzz-")) / f"seed-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save_model(case.model, str(folder / "model.onnx"))
    data_dir = folder / "test_data_set_0"
    data_dir.mkdir(exist_ok=True)
    for number, (name, value) in enumerate(case.data_sets[0].feeds.items()):
        (data_dir / f"input_{number}.pb").write_bytes(numpy_helper.from_array(value, name).SerializeToString())
    return folder

