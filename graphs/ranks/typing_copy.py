"""The typing copy: the model with only what ORT enforces (initializer dims, Constant values, the main graph's
input shapes, a Loop's counters), large constants as bare inputs, and ORT's readings where ONNX's inference
differs."""

from __future__ import annotations
import math
from dataclasses import dataclass, field
import onnx
import onnx.shape_inference
from onnx import AttributeProto, GraphProto, ModelProto, TypeProto, helper, numpy_helper
from ..ir.builder import NameScope
from ..ir.walk import ONNX_DOMAINS, all_names, attribute, constant_value
from . import element_types
from .tensor_info import tensor_info


STRIP_ABOVE_BYTES = 1 << 16  # constants larger than this become bare inputs of the typing copy

# A Reshape to one dim of more than this many elements gets a shape of unknown value in the typing copy:
# ONNX's data propagation makes a shape of one dimension per element of a 1-D value of static length
# (about 70 bytes each: 2.7 GiB for the WebNN flat form's Reshape of a 50257x768 table, before a Gather)
FLAT_LENGTH_LIMIT = 1 << 22


def typing_copy(model: ModelProto) -> ModelProto:
    """A copy for shape inference holding only what ORT enforces (see the module docstring). Built piece
    by piece, so that no large payload is ever copied.
    """
    light = ModelProto()
    for name in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(light, name, getattr(model, name))
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    copier = TypingCopier(NameScope(all_names(model)))
    light.graph.CopyFrom(copier.graph(model.graph, main=True))
    declared = {value.name for value in light.graph.input}
    for value in copier.hoisted:
        if value.name not in declared:
            declared.add(value.name)
            light.graph.input.append(value)
    return light


@dataclass
class TypingCopier:
    """Builds the typing copy graph by graph: ``names`` gives the stand-ins fresh names, ``hoisted`` collects the
    bare inputs standing for large initializers."""

    names: NameScope
    hoisted: list[onnx.ValueInfoProto] = field(default_factory=list)
    constants: dict[str, onnx.TensorProto] = field(default_factory=dict)  # small integer ones of the graphs walked into

    def graph(self, graph: GraphProto, main: bool, outer: dict[str, tuple[int, ...] | None] | None = None
              ) -> GraphProto:
        """The typing copy of one graph (its subgraphs too); its large initializers go to ``hoisted``."""
        light = GraphProto(name=graph.name)
        light.input.extend(graph.input)
        light.output.extend(graph.output)
        if main:  # ORT checks no element of a sequence input against its declared shape (FINDINGS A4)
            for value in light.input:
                if value.type.HasField("sequence_type"):
                    _clear_element_shape(value.type.sequence_type.elem_type)
        facts = _facts(graph, main, outer or {})
        if not main:  # outer constants the body reads: ONNX's inference of a subgraph sees their types, not values
            light.initializer.extend(self._outer_constants(graph))
        enclosing = self.constants
        self.constants = {name: tensor for name, tensor in enclosing.items() if name not in {v.name for v in graph.input}}
        self.constants.update(_small_integer_constants(graph))
        try:
            return self._copy_graph(graph, main, light, facts)
        finally:
            self.constants = enclosing

    def _copy_graph(self, graph: GraphProto, main: bool, light: GraphProto,
                    facts: dict[str, tuple[int, ...] | None]) -> GraphProto:
        """The rest of ``graph``'s copy into ``light``: value_info, initializers and nodes."""
        # A value_info entry for a fact (an initializer, a Constant output, an input) is left out: its
        # cleared shape would hide the fact (the dynamo exporter writes one for every initializer).
        fact_names = {init.name for init in graph.initializer} | {value.name for value in graph.input} | {
            node.output[0] for node in graph.node if constant_value(node) is not None}
        light.value_info.extend(value for value in graph.value_info if value.name not in fact_names)
        # Declared element types are kept, declared sizes not: ORT does not enforce value_info, graph
        # outputs, or Loop and Scan body inputs (their types come from the node's inputs).
        for value in (*light.output, *light.value_info, *(light.input if not main else ())):
            if value.type.HasField("tensor_type"):
                value.type.tensor_type.ClearField("shape")
        for init in graph.initializer:
            if is_large(init):
                self.hoisted.append(bare_input(init.name, init))
            else:
                light.initializer.append(init)
        light.sparse_initializer.extend(graph.sparse_initializer)
        long_shapes = self._long_flat_shapes(graph)
        for node in graph.node:
            value = constant_value(node)
            if node.op_type == "Reshape" and node.domain in ONNX_DOMAINS and node.input[1:2] and (
                    node.input[1] in long_shapes):
                # (its result keeps rank 1, of unknown length: see FLAT_LENGTH_LIMIT)
                stand_in = self.names.fresh(node.input[1] + "/unknown_length")
                self.hoisted.append(helper.make_tensor_value_info(stand_in, onnx.TensorProto.INT64, [1]))
                light.node.append(helper.make_node("Reshape", [node.input[0], stand_in], list(node.output),
                                                   name=node.name))
                light.node[-1].attribute.extend(node.attribute)
                continue
            if value is not None and is_large(value):
                stand_in = self.names.fresh(node.output[0] + "/stripped")
                self.hoisted.append(bare_input(stand_in, value))
                light.node.append(helper.make_node("Identity", [stand_in], [node.output[0]], name=node.name))
                continue
            standard_op = element_types.typing_stand_in(node)
            if standard_op is not None:  # an ORT fused op: a standard op of the same output type and shape
                light.node.append(standard_op)
                continue
            reading = ORT_READINGS.get(node.op_type) if node.domain in ONNX_DOMAINS else None
            as_ort_reads = reading(node, facts, self) if reading is not None else None
            if as_ort_reads is not None:  # ONNX's inference would state another rank than ORT's kernel gives
                light.node.extend(as_ort_reads)
                continue
            copy = light.node.add(op_type=node.op_type, domain=node.domain, name=node.name, overload=node.overload)
            copy.input.extend(node.input)
            copy.output.extend(node.output)
            for attribute in node.attribute:
                if attribute.type == AttributeProto.GRAPH:
                    body = copy.attribute.add(name=attribute.name, type=attribute.type).g
                    body.CopyFrom(self.graph(attribute.g, main=False, outer=facts))
                    if node.op_type == "Loop" and node.domain in ONNX_DOMAINS:
                        type_loop_counters(body)
                elif attribute.type == AttributeProto.GRAPHS:
                    copy.attribute.add(name=attribute.name, type=attribute.type).graphs.extend(
                        self.graph(sub, main=False, outer=facts) for sub in attribute.graphs)
                else:
                    copy.attribute.append(attribute)
        return light


    def _outer_constants(self, graph: GraphProto) -> list[onnx.TensorProto]:
        """Copies of the small constants of enclosing graphs that ``graph``'s own nodes read (an Unsqueeze's
        or a reduction's axes), for ONNX's inference of ``graph``."""
        own = {init.name for init in graph.initializer} | {value.name for value in graph.input} | {
            name for node in graph.node for name in node.output}
        copies = []
        for name in dict.fromkeys(name for node in graph.node for name in node.input):
            tensor = self.constants.get(name)
            if name and name not in own and tensor is not None:
                copy = onnx.TensorProto()
                copy.CopyFrom(tensor)
                copy.name = name
                copies.append(copy)
        return copies

    @staticmethod
    def _long_flat_shapes(graph: GraphProto) -> set[str]:
        """The constants of ``graph`` that are a Reshape's shape of one dim of over FLAT_LENGTH_LIMIT."""
        candidates = {init.name: init for init in graph.initializer}
        candidates.update((node.output[0], value) for node in graph.node if (value := constant_value(node)) is not None)
        long = set()
        for name, tensor in candidates.items():
            if (list(tensor.dims) == [1] and tensor.data_type == onnx.TensorProto.INT64
                    and tensor.data_location != onnx.TensorProto.EXTERNAL
                    and int(numpy_helper.to_array(tensor)[0]) > FLAT_LENGTH_LIMIT):
                long.add(name)
        return long


def _facts(graph: GraphProto, main: bool, outer: dict[str, tuple[int, ...] | None]
           ) -> dict[str, tuple[int, ...] | None]:
    """What ORT enforces of the names ``graph`` sees: a constant's dims, a main graph input's declared dims
    (-1 where no size is fixed). A subgraph input hides an outer name."""
    facts = dict(outer)
    for value in graph.input:
        facts.pop(value.name, None)
        info = tensor_info(value.type) if main else None
        if info is not None and info.rank is not None:
            facts[value.name] = tuple(d if isinstance(d, int) else -1 for d in info.shape or ())
    facts.update((init.name, tuple(init.dims)) for init in graph.initializer)
    for node in graph.node:
        value = constant_value(node)
        if value is not None:
            facts[node.output[0]] = tuple(value.dims)
    return facts


def _small_integer_constants(graph: GraphProto) -> dict[str, onnx.TensorProto]:
    """``graph``'s integer constants of at most 64 elements held in the model (axes, shapes, bounds)."""
    found = {}
    tensors = [(init.name, init) for init in graph.initializer]
    tensors += [(node.output[0], value) for node in graph.node if (value := constant_value(node)) is not None]
    for name, tensor in tensors:
        if (tensor.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and math.prod(tensor.dims) <= 64
                and tensor.data_location != onnx.TensorProto.EXTERNAL):
            found[name] = tensor
    return found


def _clear_element_shape(type_proto: TypeProto) -> None:
    if type_proto.HasField("tensor_type"):
        type_proto.tensor_type.ClearField("shape")


def split_to_sequence_reading(node: onnx.NodeProto, facts: dict[str, tuple[int, ...] | None],
                              copier: TypingCopier) -> list[onnx.NodeProto] | None:
    """SplitToSequence with keepdims=0 and a scalar ``split``: ORT's kernel drops the split axis (it keeps
    it only for a 1-D split), ONNX's inference keeps it. Stand-in: the node without ``split``, which ONNX
    types as ORT runs it. A ``split`` of unknown rank: elements of unknown rank (a Reshape to a shape of
    unknown length first)."""
    if attribute(node, "keepdims", 1) != 0 or len(node.input) < 2 or not node.input[1]:
        return None
    dims = facts.get(node.input[1], ())
    if node.input[1] in facts and dims is not None and len(dims) == 1:
        return None  # a 1-D split: both keep the axis
    inputs = [node.input[0]]
    nodes = []
    if node.input[1] not in facts or (dims is not None and len(dims) > 1):
        shape = copier.names.fresh(node.input[1] + "/unknown_rank")
        copier.hoisted.append(helper.make_tensor_value_info(shape, onnx.TensorProto.INT64, [shape + "/length"]))
        unranked = copier.names.fresh(node.input[0] + "/unknown_rank")
        nodes.append(helper.make_node("Reshape", [node.input[0], shape], [unranked]))
        inputs = [unranked, node.input[1]]
    nodes.append(helper.make_node("SplitToSequence", inputs, list(node.output), name=node.name,
                                  axis=attribute(node, "axis", 0), keepdims=0))
    return nodes


def squeeze_reading(node: onnx.NodeProto, facts: dict[str, tuple[int, ...] | None],
                    copier: TypingCopier) -> list[onnx.NodeProto] | None:
    """Squeeze whose ``axes`` input is an empty constant: ORT squeezes every dim of size 1 (as without
    axes), ONNX's inference squeezes nothing. Stand-in: the node without ``axes``."""
    if len(node.input) < 2 or not node.input[1]:
        return None
    dims = facts.get(node.input[1])
    if dims is None or math.prod(dims) != 0:
        return None
    return [helper.make_node("Squeeze", [node.input[0]], list(node.output), name=node.name)]

ORT_READINGS = {"SplitToSequence": split_to_sequence_reading, "Squeeze": squeeze_reading}


def type_loop_counters(body: GraphProto) -> None:
    """A Loop body's first two inputs are facts of the Loop spec: the iteration number (an int64 scalar)
    and the condition (a bool scalar).
    """
    for value, elem_type in zip(body.input, (onnx.TensorProto.INT64, onnx.TensorProto.BOOL)):
        value.type.CopyFrom(helper.make_tensor_type_proto(elem_type, []))


def is_large(tensor: onnx.TensorProto) -> bool:
    """Whether ``tensor`` holds more than STRIP_ABOVE_BYTES.

    Estimated from dims and type: ByteSize() would encode the whole payload to count it.
    """
    try:
        item = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        item = 8
    return math.prod(tensor.dims) * max(item, 1) > STRIP_ABOVE_BYTES


def bare_input(name: str, tensor: onnx.TensorProto) -> onnx.ValueInfoProto:
    """A graph input standing for a large constant: its type and dims, no data. A 1-D integer one gets a
    symbolic length: data propagation makes a shape of one dimension per element of a static length.
    """
    dims: list = list(tensor.dims)
    if len(dims) == 1 and tensor.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        dims = [f"{name}/length"]
    return helper.make_tensor_value_info(name, tensor.data_type, dims)


__all__ = ["FLAT_LENGTH_LIMIT", "ORT_READINGS", "STRIP_ABOVE_BYTES", "TypingCopier", "bare_input", "is_large",
           "split_to_sequence_reading", "squeeze_reading", "type_loop_counters", "typing_copy"]
