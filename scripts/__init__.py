"""gathermultiaxis: one gather operator for ONNX Runtime.

``gather_multiaxis`` is the NumPy kernel, ``session_options()`` gives ORT session options with the
GatherMultiaxis custom op registered, and ``gathermultiaxis.graphs`` rewrites ONNX models to use it.
"""

from importlib.metadata import PackageNotFoundError, version as _version

from .ops import GatherGeometry, GatherIndexError, GatherShapeError, InferenceSession, gather_multiaxis, session_options

try:
    __version__ = _version("gathermultiaxis")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["GatherGeometry", "GatherIndexError", "GatherShapeError", "InferenceSession", "__version__", "gather_multiaxis",
           "session_options"]
