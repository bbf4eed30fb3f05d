"""gathermultiaxis: one gather operator for ONNX Runtime.

``gather_multiaxis`` is the NumPy kernel; ``InferenceSession`` (a drop-in for ``onnxruntime.InferenceSession``)
runs rewritten models, ``session_options()`` registers the custom op on ORT options (both import onnxruntime
on first use); ``gathermultiaxis.graphs`` rewrites ONNX models to use it."""

import logging
from importlib import import_module
from typing import TYPE_CHECKING

from .ops.contract import GatherIndexError, GatherShapeError, Mode
from .ops.geometry import GatherGeometry
from .ops import __version__
from .ops.kernel import gather_multiaxis

if TYPE_CHECKING:
    from .ops.runtime.registration import session_options
    from .ops.runtime.session import InferenceSession

# The library logs through logging.getLogger(__name__) in each module and prints nothing; an application
# decides what is shown (the command line: -q, -v, -vv). Until then nothing reaches stderr.
logging.getLogger(__name__).addHandler(logging.NullHandler())


# imported on first access (PEP 562), so that the kernel and --help work without onnxruntime
_LAZY = {"session_options": ".ops.runtime.registration", "InferenceSession": ".ops.runtime.session"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = ["GatherGeometry", "GatherIndexError", "GatherShapeError", "InferenceSession", "Mode", "__version__",
           "gather_multiaxis", "session_options"]
