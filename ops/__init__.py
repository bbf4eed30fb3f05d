"""The GatherMultiaxis operator: its shape rules, its NumPy kernel and its ONNX Runtime registration."""

from .geometry import GatherGeometry, GatherShapeError, normalize_axes
from .kernel import MODES, GatherIndexError, gather_multiaxis
from .ortop import DATA_TYPES, DOMAIN, INDEX_TYPES, OP_TYPE, bridge_info, register, session_options
from .session import InferenceSession
from . import variants
from .variants import (gather_xy_nchw, numpy_take, numpy_take_along_axis, onnx_gather, onnx_gather_elements,
                       onnx_gather_nd, openvino_gather, openvino_gather_nd, tf_gather, tf_gather_nd, torch_gather,
                       torch_index_select, torch_take, torch_take_along_dim, tosa_gather)

__all__ = [
    "DATA_TYPES", "DOMAIN", "INDEX_TYPES", "MODES", "OP_TYPE", "GatherGeometry", "GatherIndexError",
    "GatherShapeError", "InferenceSession", "bridge_info", "gather_multiaxis", "normalize_axes", "register", "session_options",
    "variants", "gather_xy_nchw", "numpy_take", "numpy_take_along_axis", "onnx_gather", "onnx_gather_elements",
    "onnx_gather_nd", "openvino_gather", "openvino_gather_nd", "tf_gather", "tf_gather_nd", "torch_gather",
    "torch_index_select", "torch_take", "torch_take_along_dim", "tosa_gather",
]
