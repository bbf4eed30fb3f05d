"""What the runner, the fuzzer, the bench and the tests share: the IR version, the one-node gather model, the
ORT session factory and the bit-for-bit comparison. onnxruntime is imported when a session is made."""

from __future__ import annotations

import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version

import numpy as np
from onnx import ModelProto, TensorProto, helper

# ORT 1.31 refuses IR versions above 13; onnx 1.23 writes 14 by default. 8 is what ORT >= 1.10 reads.
IR_VERSION = 8


def single_gather_model(op_type: str, data_type: int, index_type: int, data_shape, indices_shape, *,
                        opset: int = 13, name: str | None = None, output_shape=None, **attributes) -> ModelProto:
    """``output = op_type(data, indices, **attributes)`` with graph inputs ``data`` and ``indices`` of ONNX
    element types ``data_type`` and ``index_type``. Shapes are lists of ints, symbolic names or None (unknown
    dim), or None for an unknown rank; ``name`` defaults to the op type in lower case."""
    node = helper.make_node(op_type, ["data", "indices"], ["output"], name=name or op_type.lower(), **attributes)
    graph = helper.make_graph(
        [node], op_type.lower(),
        [helper.make_tensor_value_info("data", data_type, data_shape),
         helper.make_tensor_value_info("indices", index_type, indices_shape)],
        [helper.make_tensor_value_info("output", data_type, output_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)


def tensor_type_of(array: np.ndarray) -> int:
    """The ONNX element type of a NumPy array (object arrays hold strings)."""
    return TensorProto.STRING if array.dtype == object else helper.np_dtype_to_tensor_dtype(array.dtype)


def session_options(options):
    """``gathermultiaxis.session_options``, imported on the first call (the command line's ``--help`` needs
    no onnxruntime): what the commands hand the passes for ORT to load models with."""
    from .ops import session_options as register_gathermultiaxis

    return register_gathermultiaxis(options)


def make_session(model: ModelProto, custom: bool, optimized: bool = False,
                 external_data_folder: str | os.PathLike | None = None,
                 as_users_do: bool = False, intra_op_threads: int | None = None, run_builtin_gathers: bool | None = None):
    """A CPU session of ``model``: ``gathermultiaxis.InferenceSession`` when ``custom``, else plain ORT.

    Comparisons run with graph optimizations off (ORT constant-folds shape arithmetic through a builtin Gather
    but not a custom op, and the two can round differently); timings run with ORT's defaults.

    Args:
        model: the model to run.
        custom: run it in ``gathermultiaxis.InferenceSession`` (else ``onnxruntime.InferenceSession``).
        optimized: ORT's default graph optimizations (else all off).
        external_data_folder: where ORT itself reads (memory-maps) the model's external tensors; None: none.
        as_users_do: no options object at all, as a user's ``InferenceSession(model)``.
        intra_op_threads: ORT's intra-op thread count (None: ORT's default).
        run_builtin_gathers: the custom session's ``run_builtin_gathers`` (None: True with ``as_users_do``,
            else False: comparisons test the kernel).

    Returns:
        The session, on the CPU execution provider."""
    import onnxruntime as ort  # here, not on import: see the module docstring

    if run_builtin_gathers is None:
        run_builtin_gathers = as_users_do
    if as_users_do:
        if custom:
            from .ops.runtime.session import InferenceSession

            return InferenceSession(model, providers=["CPUExecutionProvider"], run_builtin_gathers=run_builtin_gathers)
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])

    options = ort.SessionOptions()
    if intra_op_threads is not None:
        options.intra_op_num_threads = intra_op_threads
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # runs expected to fail would otherwise log errors to stderr
    if external_data_folder is not None:
        options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                         str(external_data_folder))
    if custom:  # the package's own session: the way rewritten models are meant to run
        from .ops import session_options
        from .ops.runtime.session import InferenceSession  # onnxruntime-extensions: only when the op is needed

        if external_data_folder is not None:  # options it keeps as they are, config entry included
            options = session_options(options)
        return InferenceSession(model, options, providers=["CPUExecutionProvider"], run_builtin_gathers=run_builtin_gathers)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def difference(actual, expected) -> str | None:
    """None when the two arrays are bit-identical (dtype, shape, bytes; for strings the values),
    else what differs first."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} vs {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)} vs {list(expected.shape)}"
    flat_a, flat_e = np.ascontiguousarray(actual).reshape(-1), np.ascontiguousarray(expected).reshape(-1)
    if actual.dtype == object:
        unequal = np.array([a != e for a, e in zip(flat_a.tolist(), flat_e.tolist())], dtype=bool)
    else:  # compare bytes, so that NaN payloads and the sign of zero count
        item = actual.dtype.itemsize
        unequal = (flat_a.view(np.uint8).reshape(-1, item) != flat_e.view(np.uint8).reshape(-1, item)).any(axis=1)
    if not unequal.any():
        return None
    position = int(np.argmax(unequal))
    where = [int(i) for i in np.unravel_index(position, actual.shape)] if actual.ndim else []
    return (f"{actual.dtype}{list(actual.shape)} differs at {where}: "
            f"{flat_a[position]!r} vs {flat_e[position]!r}")


def bit_identical(actual, expected) -> bool:
    """Same dtype, shape and bytes (NaN payloads and -0.0 included); object arrays compare values."""
    return difference(actual, expected) is None


def versions() -> dict[str, str]:
    """Versions of what a result depends on, for reports."""
    found = {"python": platform.python_version(), "platform": f"{sys.platform}-{platform.machine()}"}
    for package in ("numpy", "onnx", "onnxruntime", "onnxruntime-extensions", "gathermultiaxis"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found
