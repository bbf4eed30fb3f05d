"""The constants a pass reads: one scope's values that cannot change at run time, read on demand."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping
from typing import Iterator

import numpy as np
from onnx import GraphProto, TensorProto, helper

from .tensors import read_tensor
from .walk import ONNX_DOMAINS


class ConstantView(Mapping):
    """The values of a scope that cannot change at run time (the one way the passes read a constant):
    initializers that are not graph inputs, Constant nodes, opset 7-8 int64 constants (a double Constant then
    Cast), and the enclosing scopes'. Membership, ``tensor``, ``dtype`` and ``size`` read no payload; arrays
    are read on first use, so a table that is only gathered from is never loaded."""

    def __init__(self, graph: GraphProto, outer: "ConstantView | None" = None,
                 external_data_folder: str | os.PathLike | None = None):
        inputs = {value.name for value in graph.input}
        self._outer, self._hidden = outer, inputs
        self.external_data_folder: str | os.PathLike | None = (external_data_folder if outer is None
                                                                else outer.external_data_folder)
        self._initializers: dict[str, TensorProto] = {t.name: t for t in graph.initializer if t.name not in inputs}
        self._tensors: dict[str, TensorProto] = dict(self._initializers)
        # The nodes are read on the first lookup past the initializers (``initializer`` alone reads none:
        # the session's bind step), only those the graph has now (a pass appends its replacements after them).
        self._graph, self._own, self._scanned = graph, len(graph.node), False

    def _scan(self) -> None:
        self._scanned = True
        self._arrays: dict[str, np.ndarray] = {}
        self._int64_casts: dict[str, str] = {}  # a Cast's output -> its float constant, converted on first read
        for node in itertools.islice(self._graph.node, self._own):
            if node.op_type == "Constant" and node.domain in ONNX_DOMAINS:
                for attribute in node.attribute:
                    if attribute.name == "value":
                        self._tensors[node.output[0]] = attribute.t
                    elif attribute.name == "value_ints":
                        self._arrays[node.output[0]] = np.array(attribute.ints, dtype=np.int64)
            elif (node.op_type == "Cast" and node.domain in ONNX_DOMAINS and node.input[0] in self._tensors
                  and next((a.i for a in node.attribute if a.name == "to"), 0) == TensorProto.INT64
                  and self._tensors[node.input[0]].data_type in _FLOAT_TYPES):
                self._int64_casts[node.output[0]] = node.input[0]

    def _view_of(self, name: str) -> "ConstantView | None":
        """The scope whose own constant ``name`` is (this one or an enclosing one), or None."""
        if not self._scanned:
            self._scan()
        if name in self._arrays or name in self._tensors or name in self._int64_casts:
            return self
        return None if self._outer is None or name in self._hidden else self._outer._view_of(name)

    def tensor(self, name: str) -> TensorProto | None:
        """The TensorProto of ``name`` (an initializer or a Constant's value), or None."""
        view = self._view_of(name)
        return None if view is None else view._tensors.get(name)

    def initializer(self, name: str) -> TensorProto | None:
        """The TensorProto of ``name`` when it is an initializer of this scope itself (not an enclosing
        scope's, not a Constant's value; external data not read: its location is in the proto), or None.
        """
        return self._initializers.get(name)

    def dtype(self, name: str) -> np.dtype | None:
        """The element type of the constant ``name`` as NumPy's, read from its proto (no payload), or None."""
        view = self._view_of(name)
        if view is None:
            return None
        if name in view._arrays:
            return view._arrays[name].dtype
        if name in view._int64_casts:
            return np.dtype(np.int64)
        try:
            return np.dtype(helper.tensor_dtype_to_np_dtype(view._tensors[name].data_type))
        except (KeyError, ValueError, TypeError):
            return None

    def size(self, name: str) -> int | None:
        """How many elements the constant ``name`` has, read from its proto (no payload), or None."""
        view = self._view_of(name)
        if view is None:
            return None
        if name in view._arrays:
            return int(view._arrays[name].size)
        return math.prod(view._tensors[view._int64_casts.get(name, name)].dims)

    def learn(self, name: str, value: np.ndarray) -> None:
        """Record ``value`` for ``name``: a value of this scope that a pass found constant."""
        if not self._scanned:
            self._scan()
        self._arrays[name] = value

    def __getitem__(self, name: str) -> np.ndarray:
        view = self._view_of(name)
        if view is None:
            raise KeyError(name)
        if name not in view._arrays:
            if name in view._int64_casts:
                view._arrays[name] = view[view._int64_casts[name]].astype(np.int64)
            else:
                view._arrays[name] = read_tensor(view._tensors[name], self.external_data_folder)
        return view._arrays[name]

    def __contains__(self, name) -> bool:
        return self._view_of(name) is not None

    def __iter__(self) -> Iterator[str]:
        if not self._scanned:
            self._scan()
        outer = (n for n in (self._outer or ()) if n not in self._hidden)
        return iter(dict.fromkeys(itertools.chain(self._tensors, self._arrays, self._int64_casts, outer)))

    def __len__(self) -> int:
        return sum(1 for _ in self)


_FLOAT_TYPES = (TensorProto.DOUBLE, TensorProto.FLOAT, TensorProto.FLOAT16)


__all__ = ["ConstantView"]
