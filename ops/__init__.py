"""The GatherMultiaxis operator: its shape rules and NumPy kernel (NumPy only), and, imported on first use,
the variants and the ONNX Runtime registration (``InferenceSession``, ``session_options``, ``register``, ...)."""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from .contract import (DATA_TYPES, DOMAIN, INDEX_TYPES, MODES, OP_TYPE, GatherIndexError, GatherShapeError, Mode,
                       normalize_axes)
from .geometry import GatherGeometry
from .kernel import gather_multiaxis
from .private_api import PrivateAPIError

try:
    __version__ = version("gathermultiaxis")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

_VARIANTS = ("gather_xy_nchw", "numpy_take", "numpy_take_along_axis", "onnx_gather", "onnx_gather_elements",
             "onnx_gather_nd", "openvino_gather", "openvino_gather_nd", "tf_gather", "tf_gather_nd", "torch_gather",
             "torch_index_select", "torch_take", "torch_take_along_dim", "tosa_gather", "coreml_gather",
             "coreml_gather_along_axis", "coreml_gather_nd", "jax_gather")
# name -> module that defines it, imported on first access (PEP 562): the variants too, so that the package
# root, and the command line's --help, load only the kernel
_LAZY = {"bridge_info": ".runtime.registration", "register": ".runtime.registration",
         "session_options": ".runtime.registration", "InferenceSession": ".runtime.session",
         **dict.fromkeys(_VARIANTS, ".variants")}

if TYPE_CHECKING:  # the lazy names, for type checkers
    from . import variants
    from .runtime.registration import bridge_info, register, session_options
    from .runtime.session import InferenceSession
    from .variants import (coreml_gather, coreml_gather_along_axis, coreml_gather_nd, gather_xy_nchw, jax_gather,
                           numpy_take, numpy_take_along_axis, onnx_gather, onnx_gather_elements, onnx_gather_nd,
                           openvino_gather, openvino_gather_nd, tf_gather, tf_gather_nd, torch_gather,
                           torch_index_select, torch_take, torch_take_along_dim, tosa_gather)


def __getattr__(name: str):
    if name == "variants":
        return import_module(".variants", __name__)
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "DATA_TYPES", "DOMAIN", "INDEX_TYPES", "MODES", "OP_TYPE", "GatherGeometry", "GatherIndexError",
    "GatherShapeError", "Mode", "PrivateAPIError", "InferenceSession", "bridge_info", "gather_multiaxis",
    "normalize_axes", "register", "session_options",
    "variants", "gather_xy_nchw", "numpy_take", "numpy_take_along_axis", "onnx_gather", "onnx_gather_elements",
    "onnx_gather_nd", "openvino_gather", "openvino_gather_nd", "tf_gather", "tf_gather_nd", "torch_gather",
    "torch_index_select", "torch_take", "torch_take_along_dim", "tosa_gather", "coreml_gather",
    "coreml_gather_along_axis", "coreml_gather_nd", "jax_gather",
]
