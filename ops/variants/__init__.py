"""Other frameworks' gathers, each as one ``gather_multiaxis`` call: one module per framework.

Every variant function keeps its framework's argument names, order and defaults; aligns ranks by reshapes
only (and, torch-style, a crop view); makes exactly one ``gather_multiaxis`` call; returns a new array of
the data's dtype; raises GatherIndexError / GatherShapeError unless the framework defines a result (OpenVINO
Gather-8, JAX). ``trace()`` records each call's shapes; ``mapping_table()`` renders them."""

from .coreml_gathers import coreml_gather, coreml_gather_along_axis, coreml_gather_nd
from .jax_gathers import GatherDimensionNumbers, JaxGatherLayout, JaxGatherMode, jax_gather
from .numpy_gathers import numpy_take, numpy_take_along_axis
from .onnx_gathers import onnx_gather, onnx_gather_elements, onnx_gather_nd
from .openvino_gathers import openvino_gather, openvino_gather_nd
from .proposal_gathers import gather_xy_nchw
from .pytorch_gathers import torch_gather, torch_index_select, torch_take, torch_take_along_dim
from .tf_gathers import tf_gather, tf_gather_nd
from .tosa_gathers import tosa_gather
from .variant_steps import Step, trace
from .variant_table import VARIANTS, example_calls, mapping_table

__all__ = [
    "GatherDimensionNumbers", "JaxGatherLayout", "JaxGatherMode", "Step", "VARIANTS", "coreml_gather",
    "coreml_gather_along_axis", "coreml_gather_nd", "example_calls", "gather_xy_nchw", "jax_gather",
    "mapping_table", "numpy_take", "numpy_take_along_axis", "onnx_gather", "onnx_gather_elements",
    "onnx_gather_nd", "openvino_gather", "openvino_gather_nd", "tf_gather", "tf_gather_nd", "torch_gather",
    "torch_index_select", "torch_take", "torch_take_along_dim", "tosa_gather", "trace",
]
