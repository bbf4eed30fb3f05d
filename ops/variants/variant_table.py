"""Every variant by name, one example call of each, and the mapping table traced from them."""

from __future__ import annotations

import numpy as np

from .coreml_gathers import coreml_gather, coreml_gather_along_axis, coreml_gather_nd
from .jax_gathers import GatherDimensionNumbers, jax_gather
from .numpy_gathers import numpy_take, numpy_take_along_axis
from .onnx_gathers import onnx_gather, onnx_gather_elements, onnx_gather_nd
from .openvino_gathers import openvino_gather, openvino_gather_nd
from .proposal_gathers import gather_xy_nchw
from .pytorch_gathers import torch_gather, torch_index_select, torch_take, torch_take_along_dim
from .tf_gathers import tf_gather, tf_gather_nd
from .tosa_gathers import tosa_gather
from .variant_steps import trace

VARIANTS = {function.__name__: function for function in (
    onnx_gather, onnx_gather_elements, onnx_gather_nd, openvino_gather, openvino_gather_nd, numpy_take,
    numpy_take_along_axis, torch_gather, torch_take, torch_take_along_dim, torch_index_select, tf_gather,
    tf_gather_nd, tosa_gather, coreml_gather, coreml_gather_along_axis, coreml_gather_nd, jax_gather,
    gather_xy_nchw)}


def example_calls():
    """``(variant name, callable taking no arguments)`` pairs: one representative call per variant."""
    x, rng = np.arange(2 * 3 * 4).reshape(2, 3, 4), np.random.default_rng(0)
    return [
        ("onnx_gather", lambda: onnx_gather(x, np.zeros((5, 6), np.int64), axis=1)),
        ("onnx_gather_elements", lambda: onnx_gather_elements(x, np.zeros((2, 7, 4), np.int64), axis=1)),
        ("onnx_gather_nd", lambda: onnx_gather_nd(x, np.zeros((2, 5, 1), np.int64), batch_dims=1)),
        ("openvino_gather", lambda: openvino_gather(x, np.zeros((2, 5), np.int64), axis=2, batch_dims=1)),
        ("openvino_gather_nd", lambda: openvino_gather_nd(x, np.zeros((2, 3, 5, 1), np.int64), batch_dims=2, version=5)),
        ("numpy_take", lambda: numpy_take(x, np.zeros((5,), np.int64))),
        ("numpy_take_along_axis", lambda: numpy_take_along_axis(x, np.zeros((1, 3, 6), np.int64), axis=2)),
        ("torch_gather", lambda: torch_gather(x, 2, np.zeros((2, 2, 6), np.int64))),
        ("torch_take", lambda: torch_take(x, np.zeros((5, 6), np.int64))),
        ("torch_take_along_dim", lambda: torch_take_along_dim(x, np.zeros((2, 1, 4), np.int64), dim=1)),
        ("torch_index_select", lambda: torch_index_select(x, 0, np.zeros((5,), np.int64))),
        ("tf_gather", lambda: tf_gather(x, np.zeros((2, 3, 5), np.int64), axis=2, batch_dims=2)),
        ("tf_gather_nd", lambda: tf_gather_nd(x, np.zeros((5, 2), np.int64))),
        ("tosa_gather", lambda: tosa_gather(x, np.zeros((2, 5), np.int64))),
        ("coreml_gather", lambda: coreml_gather(x, np.zeros((2, 5), np.int32), axis=-1, batch_dims=1)),
        ("coreml_gather_along_axis", lambda: coreml_gather_along_axis(x, np.zeros((2, 6, 4), np.int32), axis=1)),
        ("coreml_gather_nd", lambda: coreml_gather_nd(x, np.zeros((2, 5, 2), np.int32), batch_dims=1)),
        ("jax_gather", lambda: jax_gather(x, np.zeros((2, 5, 2), np.int64), GatherDimensionNumbers(
            offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1, 2), operand_batching_dims=(0,),
            start_indices_batching_dims=(0,)), slice_sizes=(1, 1, 2))),
        ("gather_xy_nchw", lambda: gather_xy_nchw(rng.random((1, 3, 8, 8)), np.zeros((5, 2), np.int64))),
    ]


def mapping_table() -> str:
    """The Markdown table of how each variant maps onto gatherMultiaxis, a row per ``example_calls()`` call."""
    def shape(s):
        return "[" + ", ".join(map(str, s)) + "]"

    rows = ["| function | data → aligned | indices → aligned | axes | mode | gatherMultiaxis output → result |",
            "|---|---|---|---|---|---|"]
    for name, call in example_calls():
        with trace() as steps:
            call()
        (step,) = steps
        rows.append(f"| `{name}` | {shape(step.data[0])} → {shape(step.data[1])} | {shape(step.indices[0])} → "
                    f"{shape(step.indices[1])} | {list(step.axes)} | {step.mode} | {shape(step.output[0])} → "
                    f"{shape(step.output[1])} |")
    return "\n".join(rows)
