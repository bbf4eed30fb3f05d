"""Strings that would end the process inside onnxruntime-extensions' PyOp bridge, refused before.

The bridge casts input strings to ``str`` where a non-UTF-8 byte throws uncaught (``std::terminate``), and
cuts them at a NUL. So they get a ``ValueError`` first: feeds on each run, constants when a
``session_options()`` session is created (``InferenceSession`` binds constant tables instead)."""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import ModelProto, TensorProto

from ...graphs.ir.walk import node_holders, subgraphs
from ..contract import DOMAIN

NOT_UTF8 = ("holds bytes that are not UTF-8: onnxruntime-extensions' PyOp bridge decodes every string it passes "
            "to the op as UTF-8 and ends the process when that fails")
HOLDS_NUL = ("holds a NUL character: onnxruntime-extensions' PyOp bridge passes strings as C strings, which end at "
             "the first NUL (the op would see them cut)")

# What the op refuses to hand back: a string it gathered that the bridge would cut at its NUL.
NUL_LIMIT = ("a string holding a NUL character cannot cross onnxruntime-extensions' PyOp bridge (it passes "
             "strings as C strings, which end at the first NUL)")


def check_output_strings(output: np.ndarray) -> None:
    """Raise ValueError (``NUL_LIMIT``) where a string of the op's ``output`` holds a NUL."""
    for value in output.flat:  # the bridge would cut the string at the NUL: refuse instead
        if "\x00" in value if isinstance(value, str) else b"\x00" in value:
            raise ValueError(NUL_LIMIT)


def _problem(values) -> str | None:
    """Why strings (bytes or str) cannot cross the bridge intact, or None."""
    for value in values:
        if isinstance(value, str):
            value = value.encode("utf-8", "surrogatepass")
        elif not isinstance(value, bytes):
            continue
        if b"\x00" in value:
            return HOLDS_NUL
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return NOT_UTF8
    return None


def refuse_unsafe_string_feeds(input_feed, names, nul: bool = False) -> None:
    """Raise ValueError for a feed of ``names`` (inputs whose strings cross the bridge) holding bytes that
    are not UTF-8 (a NumPy ``S`` array: ORT passes its bytes on as they are) or, with ``nul``, a NUL."""
    for name in names:
        value = input_feed.get(name)
        if isinstance(value, np.ndarray) and value.dtype.kind in "SUO":
            problem = _problem(value.reshape(-1).tolist() if value.dtype.kind == "S" or nul else ())
            if problem is not None and (nul or problem == NOT_UTF8):
                raise ValueError(f"input {name!r} {problem}")


def _bad_constants(holder) -> dict[str, str]:
    """name -> what it is and why, for the string constants of one graph that cannot cross the bridge."""
    found = {}
    for tensor in getattr(holder, "initializer", ()):
        problem = _problem(tensor.string_data) if tensor.data_type == TensorProto.STRING else None
        if problem is not None:
            found[tensor.name] = f"the string initializer {tensor.name!r} {problem}"
    for node in holder.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attribute in node.attribute:
                values = {"value": lambda: attribute.t.string_data, "value_string": lambda: [attribute.s],
                          "value_strings": lambda: attribute.strings}.get(attribute.name, list)()
                problem = _problem(values)
                if problem is not None:
                    found[node.output[0]] = f"the string Constant {node.output[0]!r} {problem}"
    return found


def unsafe_string_constant(model: ModelProto) -> str | None:
    """The first string constant that cannot cross the bridge and may reach a PyOp node, or None. Conservative:
    every output of a node reading it (subgraphs included) and a subgraph's formal inputs may hold its bytes."""
    holders = list(node_holders(model))
    origin: dict[str, str] = {}
    for holder in holders:
        origin.update(_bad_constants(holder))
    if not origin:
        return None
    changed = True
    while changed:  # until no more names are reached (each pass adds at least one, or stops)
        changed = False
        for holder in holders:
            for node in holder.node:
                inner = [sub for attribute in node.attribute for sub in subgraphs(attribute)]
                read = [name for name in node.input if name in origin]
                read += [name for sub in inner for inside in sub.node for name in inside.input if name in origin]
                if not read:
                    continue
                if node.domain == DOMAIN:
                    return origin[read[0]]
                reached = list(node.output) + [value.name for sub in inner for value in sub.input]
                for name in reached:
                    if name and name not in origin:
                        origin[name] = origin[read[0]]
                        changed = True
    return None


def refuse_unsafe_string_constants(path_or_bytes) -> None:
    """Raise ValueError when the model (path, bytes or ModelProto) has such a string constant; do nothing for a
    model it cannot read (ORT reports that)."""
    try:
        if isinstance(path_or_bytes, ModelProto):
            model = path_or_bytes
        elif isinstance(path_or_bytes, (bytes, bytearray)):
            model = onnx.load_from_string(bytes(path_or_bytes))
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            model = onnx.load(os.fspath(path_or_bytes), load_external_data=False)  # strings are never external
        else:
            return
    except Exception:  # noqa: BLE001 - not a model onnx reads: ORT gives its own error
        return
    found = unsafe_string_constant(model)
    if found is not None:
        raise ValueError(f"{found}; it reaches a GatherMultiaxis (PyOp) node of this model. "
                         "gathermultiaxis.InferenceSession binds constant tables (they never cross the bridge) and "
                         "gives ORT's own result for such strings")
