"""The node builder of the lowering: int64 constants emitted once, shape arithmetic on them folded."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..ir.builder import NodeBuilder
from ..ir.dead_nodes import remove_dead
from ..ir.folding import BUILDER_FOLDING, fold


class LoweringBuilder(NodeBuilder):
    """NodeBuilder plus the generic ops the lowering needs. Equal int64 constants are emitted once, and
    ops on constants only are folded (``graphs.ir.folding.BUILDER_FOLDING``)."""

    def _values(self) -> dict[str, np.ndarray]:
        return self.__dict__.setdefault("_known", {})

    def constant_value(self, name: str) -> np.ndarray | None:
        """The value of ``name`` where it is a constant this builder emitted or folded."""
        return self._values().get(name)

    def constant(self, values, role: str) -> str:
        """An int64 constant, emitted once per value (the same values give the same name)."""
        array = np.asarray(values, dtype=np.int64)
        cache = self.__dict__.setdefault("_constants", {})
        key = (array.shape, array.tobytes())
        if key not in cache:
            cache[key] = super().constant(array, role)
            self._values()[cache[key]] = array
        return cache[key]

    def drop_unread_constants(self, output: str) -> None:
        """Remove the Constant nodes that folding left unread (read by nothing here, subgraphs included, and
        not ``output``)."""
        remove_dead(self.nodes, [node for node in self.nodes if node.op_type == "Constant"], keep=(output,))

    def _emit(self, op_type: str, inputs: list[str], role: str, **attributes) -> str:
        values = self._values()
        if inputs and all(i in values for i in inputs if i):
            folded = fold(helper.make_node(op_type, list(inputs), ["folded"], **attributes),
                          [values[i] if i else None for i in inputs], self.opset, BUILDER_FOLDING)
            if folded is not None:
                name = self.tensor(folded, role)
                values[name] = folded
                return name
        return super()._emit(op_type, inputs, role, **attributes)

    def op(self, op_type: str, inputs: list[str], role: str, **attributes) -> str:
        """Any standard op with one output; a constant where every input is a constant of this builder and
        ``BUILDER_FOLDING`` folds the op."""
        return self._emit(op_type, inputs, role, **attributes)

    def typed_zero(self, elem_type: int, role: str) -> str:
        """A 1-element tensor holding 0 / False / "" of ``elem_type``."""
        if elem_type == TensorProto.STRING:
            # onnx's annotation of vals lists numbers only; a STRING tensor's values are bytes
            tensor = helper.make_tensor("", TensorProto.STRING, [1], [b""])  # type: ignore[list-item]
        elif elem_type == TensorProto.BFLOAT16:
            tensor = helper.make_tensor("", TensorProto.BFLOAT16, [1], [0.0])
        else:
            tensor = numpy_helper.from_array(np.zeros(1, helper.tensor_dtype_to_np_dtype(elem_type)), name="")
        return self._emit("Constant", [], role, value=tensor)

    def arange(self, n: str, role: str) -> str:
        """[0, 1, ..., n - 1] (int64) for a scalar ``n``: Range from opset 11, NonZero of n True values from
        9, the iteration numbers of a Loop before."""
        if self.opset >= 11:
            return self.op("Range", [self.constant(0, "zero_scalar"), n, self.constant(1, "one_scalar")], role)
        if self.opset >= 9:
            trues = self.op("ConstantOfShape", [self.op("Reshape", [n, self.constant([1], role + "_1d")], role + "_n")],
                            role + "_true", value=helper.make_tensor("", TensorProto.BOOL, [1], [True]))
            return self.squeeze(self.op("NonZero", [trues], role + "_positions"), [0], role)
        iteration, condition, carried = (self.names.fresh(f"{self.prefix}/{role}_{part}") for part in
                                         ("iteration", "condition", "carried"))
        condition_out, carried_out, scanned = (self.names.fresh(f"{self.prefix}/{role}_{part}") for part in
                                               ("condition_out", "carried_out", "position"))
        body = helper.make_graph(
            [helper.make_node("Identity", [condition], [condition_out]), helper.make_node("Identity", [carried], [carried_out]),
             helper.make_node("Identity", [iteration], [scanned])], f"{self.prefix}/{role}_body",
            [helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
             helper.make_tensor_value_info(condition, TensorProto.BOOL, []),
             helper.make_tensor_value_info(carried, TensorProto.INT64, [])],
            [helper.make_tensor_value_info(condition_out, TensorProto.BOOL, []),
             helper.make_tensor_value_info(carried_out, TensorProto.INT64, []),
             helper.make_tensor_value_info(scanned, TensorProto.INT64, [])])
        unused, output = self.names.fresh(f"{self.prefix}/{role}_unused"), self.names.fresh(f"{self.prefix}/{role}")
        self.nodes.append(helper.make_node("Loop", [n, "", self.constant(0, "zero_scalar")], [unused, output],
                                           name=output, body=body))  # Loop-1 needs a loop-carried value
        return output

    def tensor(self, array: np.ndarray, role: str) -> str:
        """A Constant of ``array``'s own element type (opset 9 on)."""
        return self._emit("Constant", [], role, value=numpy_helper.from_array(np.asarray(array), name=""))

    def reduce(self, op_type: str, x: str, axes: list[int] | None, role: str) -> str:
        """``op_type`` over ``axes`` (None: all of them), keepdims 0; axes are an input of ReduceSum from
        opset 13 and of the other reductions from 18."""
        if axes is None:
            return self.op(op_type, [x], role, keepdims=0)
        if self.opset >= (13 if op_type == "ReduceSum" else 18):
            return self.op(op_type, [x, self.constant(axes, role + "_axes")], role, keepdims=0)
        return self.op(op_type, [x], role, axes=axes, keepdims=0)

    def scalar(self, x: str, role: str) -> str:
        """``x`` (one element) reshaped to a scalar."""
        return self.op("Reshape", [x, self.constant(np.zeros(0, np.int64), role + "_shape")], role)


__all__ = ["LoweringBuilder"]
