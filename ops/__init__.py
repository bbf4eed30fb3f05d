"""The GatherMultiaxis operator: its shape rules, its NumPy kernel and its ONNX Runtime registration."""

from .geometry import GatherGeometry, GatherShapeError, normalize_axes
from .kernel import MODES, GatherIndexError, gather_multiaxis
from .ortop import DATA_TYPES, DOMAIN, INDEX_TYPES, OP_TYPE, bridge_info, register, session_options

__all__ = [
    "DATA_TYPES", "DOMAIN", "INDEX_TYPES", "MODES", "OP_TYPE", "GatherGeometry", "GatherIndexError",
    "GatherShapeError", "bridge_info", "gather_multiaxis", "normalize_axes", "register", "session_options",
]
