"""Imports onnxruntime-extensions without its tokenizer converter: import this before ``onnxruntime_extensions``.

``cvt`` imports transformers and torch when installed (5-20 s, ~230 MB) and sets
``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` for later child processes; a lazy stand-in replaces it."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any, Callable

_CVT = "onnxruntime_extensions.cvt"


def _real_cvt() -> types.ModuleType:
    if isinstance(sys.modules.get(_CVT), _DeferredCvt):
        del sys.modules[_CVT]
    return importlib.import_module(_CVT)  # after the del, imports it and sets the package's ``cvt`` attribute


class _DeferredCvt(types.ModuleType):
    gen_processing_models: Callable[..., Any]  # set on the stand-in below (declared: no class attribute)

    def __getattr__(self, name: str):
        if name.startswith("__"):  # the import system probing (__path__, __spec__ ...): not a use
            raise AttributeError(name)
        return getattr(_real_cvt(), name)


def _gen_processing_models(*args, **kwargs):
    return _real_cvt().gen_processing_models(*args, **kwargs)


if "onnxruntime_extensions" not in sys.modules and _CVT not in sys.modules:
    _stand_in = _DeferredCvt(_CVT, "stand-in: the real module is imported on first use")
    _stand_in.gen_processing_models = _gen_processing_models
    sys.modules[_CVT] = _stand_in

import onnxruntime_extensions  # noqa: E402 - after the stand-in, on purpose

if isinstance(sys.modules.get(_CVT), _DeferredCvt):
    onnxruntime_extensions.cvt = sys.modules[_CVT]  # found in sys.modules, so the import did not set it
