"""ORT's symbolic shape inference, run step by step to keep its partial result (private ORT API, looked up
through ``ops.private_api``)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from typing import Any

from ...ops.private_api import Lookup

_SYMBOLIC_STEPS = ("_preprocess", "_infer_impl", "_update_output_from_vi")
_SYMBOLIC_MODULE = "onnxruntime.tools.symbolic_shape_infer"


@functools.cache
def symbolic_shape_infer_module() -> Any:
    """ORT's ``onnxruntime/tools/symbolic_shape_infer.py``, loaded from its file alone, or None when absent.

    Importing it by name first runs ``onnxruntime/tools/__init__.py``, which imports torch whenever torch is
    installed (seconds), though the module needs none of it. It is given a name of this package's, so that
    ``onnxruntime.tools`` stays as its importer would find it.
    """
    if _SYMBOLIC_MODULE in sys.modules:
        return sys.modules[_SYMBOLIC_MODULE]
    root = importlib.util.find_spec("onnxruntime")
    if root is None or root.origin is None:
        return None
    path = Path(root.origin).parent / "tools" / "symbolic_shape_infer.py"
    spec = importlib.util.spec_from_file_location("gathermultiaxis.ort_symbolic_shape_infer", path)
    if not path.is_file() or spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def symbolic_shape_inference() -> type:
    """ORT's ``SymbolicShapeInference`` class, with the steps ``partial_symbolic_inference`` calls.

    Returns:
        The class.

    Raises:
        PrivateAPIError: a step is missing from the installed onnxruntime.
    """
    lookup = Lookup("run onnxruntime's symbolic shape inference")
    module = symbolic_shape_infer_module()
    if module is None:
        lookup.missing.append(_SYMBOLIC_MODULE)
    inference_class = lookup.attribute(module, "SymbolicShapeInference", _SYMBOLIC_MODULE)
    for step in _SYMBOLIC_STEPS:
        lookup.attribute(inference_class, step, "SymbolicShapeInference")
    lookup.done()
    return inference_class


def partial_symbolic_inference(model: Any) -> Any:
    """Run ORT's symbolic shape inference on ``model`` and return what it inferred, also when incomplete.

    ``SymbolicShapeInference.infer_shapes`` raises on incomplete inference (after saving
    "sym_shape_infer_temp.onnx" into the working folder); its own steps, run here, keep the partial result.

    Args:
        model: the model (a ``ModelProto``), left unchanged.

    Returns:
        The inferred copy (``ModelProto``).

    Raises:
        PrivateAPIError: the steps are missing from the installed onnxruntime.
        Exception: whatever ORT's inference raises on this model.
    """
    inference = symbolic_shape_inference()(2**31 - 1, True, False, 0)
    inference._preprocess(model)
    while inference.run_:
        inference._infer_impl()
    inference._update_output_from_vi()
    return inference.out_mp_


__all__ = ["partial_symbolic_inference", "symbolic_shape_infer_module", "symbolic_shape_inference"]
