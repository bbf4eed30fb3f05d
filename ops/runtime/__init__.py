"""The operator in ONNX Runtime: the session, the PyOp registration and the run errors. Each name is imported
on first access (PEP 562): ``import gathermultiaxis.ops.runtime`` loads no onnxruntime."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .registration import bridge_info, register, session_options
    from .run_errors import guard_onnxruntime_sessions
    from .session import InferenceSession

# name -> module that defines it (relative to this package)
_LAZY = {"InferenceSession": ".session", "bridge_info": ".registration", "register": ".registration",
         "session_options": ".registration", "guard_onnxruntime_sessions": ".run_errors"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["InferenceSession", "bridge_info", "guard_onnxruntime_sessions", "register", "session_options"]
