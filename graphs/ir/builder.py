"""Emits the small helper nodes of a rewrite in the form the graph's opset requires. Constants are Constant
nodes (not initializers) so that the same code serves the main graph, subgraphs and function bodies."""

from __future__ import annotations

import functools
from collections.abc import Mapping, MutableSequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from ...ops.contract import DOMAIN, OP_TYPE

INT64_MAX = int(np.iinfo(np.int64).max)  # a Slice end meaning "to the end of the axis"

TEMPLATE_LIMIT = 64  # elements of the largest int64 constant kept as a template (the cache holds small values only)

# A key of attributes a template can stand for: (name, int | str | tuple of ints), sorted by name.
AttributeKey = tuple[tuple[str, "int | str | tuple[int, ...]"], ...]


def attribute_key(attributes: Mapping[str, object]) -> AttributeKey | None:
    """``attributes`` as a template's key, or None where a value is of another kind (a tensor, a graph, a
    float, None, an empty list): such a node is made by ``helper.make_node`` itself."""
    items: list[tuple[str, int | str | tuple[int, ...]]] = []
    for name, value in sorted(attributes.items()):
        if type(value) is int or type(value) is str:
            items.append((name, value))
        elif isinstance(value, (list, tuple)) and value and all(type(v) is int for v in value):
            items.append((name, tuple(value)))
        else:
            return None
    return tuple(items)


@functools.lru_cache(maxsize=1024)
def node_template(op_type: str, domain: str | None, attributes: AttributeKey) -> NodeProto:
    """``helper.make_node(op_type, [], [], domain=domain, **attributes)``, made once: a node copied from it and
    given inputs, outputs and a name serializes to the same bytes as one ``make_node`` builds whole (protobuf
    writes fields in field-number order). Never change the template itself."""
    values: dict[str, Any] = {name: list(value) if isinstance(value, tuple) else value for name, value in attributes}
    return helper.make_node(op_type, [], [], domain=domain, **values)


@functools.lru_cache(maxsize=1024)
def int64_constant_template(shape: tuple[int, ...], data: bytes) -> NodeProto:
    """The Constant node of an int64 value (its bytes, native order), made once: the same template use as
    ``node_template``."""
    array = np.frombuffer(data, dtype=np.int64).reshape(shape)
    return helper.make_node("Constant", [], [], value=numpy_helper.from_array(array, name=""))


@functools.lru_cache(maxsize=1024)
def int64_list_template(values: tuple[int, ...]) -> NodeProto:
    """``int64_constant_template`` of a 1-D list of Python ints (raises OverflowError past int64)."""
    array = np.array(values, dtype=np.int64)
    return int64_constant_template(array.shape, array.tobytes())


@dataclass
class NameScope:
    """Hands out tensor and node names that are not used anywhere in the model yet."""

    taken: set[str]
    # Per base, the last suffix handed out: names are never released, so every smaller suffix is still
    # taken and the search resumes there (the same names as counting from 0, without the quadratic
    # rescan when many nodes share a base).
    _last: dict[str, int] = field(default_factory=dict)

    def fresh(self, base: str) -> str:
        """A name not taken yet, now taken."""
        n = self._last.get(base, 0)
        name = base if n == 0 else f"{base}_{n}"
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self._last[base] = n
        self.taken.add(name)
        return name


@dataclass
class NodeBuilder:
    """Builds the replacement of one node; new names are derived from the replaced node's name.

    ``nodes`` is where the nodes go: a list, or a repeated NodeProto field (``GraphProto().node``), which
    copies each node into one protobuf arena (a standalone NodeProto costs ~1.5 KB, one in a repeated
    field ~0.4 KB: the difference is hundreds of MB over a graph of 100k gathers)."""

    opset: int
    names: NameScope
    prefix: str
    nodes: MutableSequence[NodeProto] = field(default_factory=list)

    def _emit(self, op_type: str, inputs: list[str], role: str, **attributes) -> str:
        output = self.names.fresh(f"{self.prefix}/{role}")  # the node takes its output's (unique) name
        key = attribute_key(attributes)
        if key is None:
            self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attributes))
        else:
            self._append(node_template(op_type, None, key), inputs, [output], output)
        return output

    def _append(self, template: NodeProto, inputs: list[str], outputs: list[str], name: str) -> None:
        """A copy of ``template`` with these inputs, outputs and name, appended (made in place in a repeated
        field)."""
        add = getattr(self.nodes, "add", None)
        node = add() if add is not None else NodeProto()
        node.CopyFrom(template)
        node.input.extend(inputs)
        node.output.extend(outputs)
        if name:
            node.name = name
        if add is None:
            self.nodes.append(node)

    def op(self, op_type: str, inputs: list[str], role: str, **attributes) -> str:
        """Any standard op with one output (the run-time alignment's shape arithmetic)."""
        return self._emit(op_type, inputs, role, **attributes)

    def constant(self, values, role: str) -> str:
        """An int64 constant; below opset 9 (Constant-1 holds floats only) a double Constant Cast to int64,
        ValueError for a value with no exact double form."""
        if self.opset >= 9 and type(values) is list and len(values) <= TEMPLATE_LIMIT \
                and all(type(v) is int for v in values):  # the common case, without numpy
            output = self.names.fresh(f"{self.prefix}/{role}")
            self._append(int64_list_template(tuple(values)), [], [output], output)
            return output
        array = np.asarray(values, dtype=np.int64)
        if self.opset >= 9 and array.size > TEMPLATE_LIMIT:  # made once: no template kept for it
            return self._emit("Constant", [], role, value=numpy_helper.from_array(array, name=""))
        if self.opset >= 9:
            output = self.names.fresh(f"{self.prefix}/{role}")
            self._append(int64_constant_template(array.shape, array.tobytes()), [], [output], output)
            return output
        as_double = array.astype(np.float64)
        if not np.array_equal(as_double.astype(np.int64), array):
            raise ValueError(f"int64 constant {array.tolist()} has no exact double form for opset {self.opset}")
        double = self._emit("Constant", [], role + "_double", value=numpy_helper.from_array(as_double, name=""))
        return self._emit("Cast", [double], role, to=TensorProto.INT64)

    def length(self, x: str, role: str) -> str:
        """The length of the 1-D ``x`` as an int64 scalar. Not ``Size``: ORT's shape inference (1.32)
        propagates Size of a shape-like value as the product of its values (Size(Shape(x)) of a [3, 3]
        ``x`` becomes 9), which then contradicts the length and fails the session's load
        ("Incompatible dimensions"); Shape of the vector is propagated right.
        """
        return self.squeeze(self._emit("Shape", [x], role + "_1d"), [0], role)

    def _with_axes(self, op_type: str, x: str, axes: list[int], role: str) -> str:
        if not axes:
            return x
        if self.opset >= 13:
            return self._emit(op_type, [x, self.constant(axes, role + "_axes")], role)
        return self._emit(op_type, [x], role, axes=list(axes))

    def unsqueeze(self, x: str, axes: list[int], role: str) -> str:
        """Unsqueeze ``x`` at ``axes`` (an attribute before opset 13, an input from 13)."""
        return self._with_axes("Unsqueeze", x, axes, role)

    def squeeze(self, x: str, axes: list[int] | str, role: str) -> str:
        """Squeeze ``axes`` out of ``x``."""
        if isinstance(axes, str):  # computed at run time (opset >= 13 only), never empty
            return self._emit("Squeeze", [x, axes], role)
        return self._with_axes("Squeeze", x, axes, role)

    def cast(self, x: str, to: int, role: str) -> str:
        """Cast ``x`` to the element type ``to``."""
        return self._emit("Cast", [x], role, to=to)

    def shape(self, x: str, role: str) -> str:
        """The shape of ``x``."""
        return self._emit("Shape", [x], role)

    def slice(self, x: str, starts: str, ends: str, axes: str, role: str) -> str:
        """Slice ``x`` (opset 10 on: starts, ends and axes as inputs)."""
        return self._emit("Slice", [x, starts, ends, axes], role)

    def concat(self, parts: list[str], role: str) -> str:
        """Concatenate 1-D ``parts`` along axis 0."""
        return parts[0] if len(parts) == 1 else self._emit("Concat", parts, role, axis=0)

    def gather_multiaxis(self, data: str, indices: str, axes: list[int] | str, output: str, name: str,
                         mode: str) -> None:
        """Append a GatherMultiaxis node."""
        axes_input = axes if isinstance(axes, str) else self.constant(axes, "axes")
        self._append(node_template(OP_TYPE, DOMAIN, (("mode", mode),)), [data, indices, axes_input], [output], name)

    def rename_last_output(self, output: str) -> None:
        """Make the last emitted node write ``output`` (the replaced node's output name)."""
        self.nodes[-1].output[0] = output

