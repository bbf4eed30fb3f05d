"""The bundled example model: a small network that holds every kind of gather the rewriter handles.

``build_example_model()`` makes it; the shipped file ``examples/gathers.onnx`` is its output (a test
keeps the two in step). Inputs have symbolic batch and sequence dimensions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

from .ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from .harness import IR_VERSION

EXAMPLE_PATH = Path(__file__).resolve().parent / "examples" / "gathers.onnx"
OPSET = 17


def build_example_model() -> ModelProto:
    """The bundled example (``EXAMPLE_PATH`` holds it as written by this function): every kind of gather."""
    rng = np.random.default_rng(2025)
    table = numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "embedding_table")
    half_table = numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float16), "half_table")
    column = numpy_helper.from_array(np.array(1, dtype=np.int64), "column")
    zero = numpy_helper.from_array(np.array(0, dtype=np.int64), "zero")
    minus_one = numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one")
    then_branch = helper.make_graph(
        [helper.make_node("Gather", ["embedding_table", "token_ids"], ["picked"], name="branch_gather", axis=0)],
        "then", [], [helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["batch", "sequence", 8])])
    else_branch = helper.make_graph(
        [helper.make_node(GATHER, ["embedding_table", "zero"], ["fallback_row"], name="else_gather", axis=0),
         helper.make_node("Expand", ["fallback_row", "token_shape_with_width"], ["picked_else"], name="else_expand")],
        "else", [], [helper.make_tensor_value_info("picked_else", TensorProto.FLOAT, ["batch", "sequence", 8])])
    nodes = [
        helper.make_node(GATHER, ["embedding_table", "token_ids"], ["embedded"], name="embedding", axis=0),
        helper.make_node(GATHER, ["half_table", "token_ids"], ["embedded_half"], name="half_embedding", axis=0),
        helper.make_node(GATHER_ELEMENTS, ["embedded", "sort_order"], ["reordered"], name="reorder", axis=2),
        helper.make_node(GATHER_ND, ["embedded", "positions"], ["picked_rows"], name="pick_rows", batch_dims=1),
        helper.make_node(GATHER, ["embedded", "column"], ["second_token"], name="second_token", axis=1),
        helper.make_node("Shape", ["token_ids"], ["token_shape"], name="token_shape"),
        helper.make_node(GATHER, ["token_shape", "zero"], ["batch"], name="batch_size", axis=0),
        helper.make_node("Unsqueeze", ["batch", "minus_one_axes"], ["batch_1d"], name="batch_1d"),
        helper.make_node("Concat", ["batch_1d", "minus_one"], ["flat_shape"], name="flat_shape", axis=0),
        helper.make_node("Reshape", ["embedded", "flat_shape"], ["flattened"], name="flatten"),
        helper.make_node("Concat", ["token_shape", "width"], ["token_shape_with_width"], name="with_width", axis=0),
        helper.make_node("If", ["use_table"], ["branch_out"], name="choose", then_branch=then_branch,
                         else_branch=else_branch),
    ]
    outputs: list[tuple[str, int, list[str | int]]] = [
        ("reordered", TensorProto.FLOAT, ["batch", "sequence", 8]),
        ("picked_rows", TensorProto.FLOAT, ["batch", "picks", 8]),
        ("second_token", TensorProto.FLOAT, ["batch", 8]),
        ("flattened", TensorProto.FLOAT, ["batch", "flat"]),
        ("embedded_half", TensorProto.FLOAT16, ["batch", "sequence", 8]),
        ("branch_out", TensorProto.FLOAT, ["batch", "sequence", 8])]
    graph = helper.make_graph(
        nodes, "gathers",
        [helper.make_tensor_value_info("token_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("sort_order", TensorProto.INT32, ["batch", "sequence", 8]),
         helper.make_tensor_value_info("positions", TensorProto.INT64, ["batch", "picks", 1]),
         helper.make_tensor_value_info("use_table", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(name, elem, shape) for name, elem, shape in outputs],
        [table, half_table, column, zero, minus_one,
         numpy_helper.from_array(np.array([0], dtype=np.int64), "minus_one_axes"),
         numpy_helper.from_array(np.array([8], dtype=np.int64), "width")])
    graph.doc_string = f"Every gather the rewriter handles: embedding, float16, torch.gather, {GATHER_ND}, x[:, 1], shape arithmetic, If."
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                              producer_name="gathermultiaxis-example")
    helper.set_model_props(model, {"purpose": "gathermultiaxis bundled example"})
    return model


def example_inputs(batch: int = 2, sequence: int = 5, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for the bundled example, every index in range (token ids include negative ones).

    Args:
        batch: the batch size.
        sequence: the sequence length.
        seed: NumPy's random seed; it also picks the If branch (even: the table branch).

    Returns:
        The feeds by input name."""
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(-50, 50, (batch, sequence)),
        "sort_order": rng.permuted(np.tile(np.arange(8, dtype=np.int32), (batch, sequence, 1)), axis=-1),
        "positions": rng.integers(0, sequence, (batch, 3, 1)),
        "use_table": np.array(bool(seed % 2 == 0)),
    }
