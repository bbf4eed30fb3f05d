"""What ORT must load to accept a written model, when the model it was made from already loaded.

Loading the whole written model again re-proves every unchanged node and costs as much (50k gathers
rewritten: 20 s, 800 MB). The second load only has to show that ORT takes the new nodes, on their inputs
typed as the input model types them, and that the unchanged nodes reading their outputs still type-check.
:func:`changed_part` builds that model: the new nodes (each distinct replacement once), their inputs typed by
ONNX's inference (small constants as values), their read outputs declared as the written model declares them,
the unchanged readers with renamed outputs. When anything else differs, a new node reuses an input name, a
read value lost its producer or an input's type is unknown: ``None``, and the whole model is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping

from onnx import GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto, helper

from .ir.builder import NameScope
from .ranks.tensor_info import TensorInfo, graph_infos
from .ranks.shape_inference import inferred
from .ranks.typing_copy import is_large, typing_copy
from .ir.walk import constant_value, holds_subgraph, node_holders, nodes_within, subgraphs

# The model-level metadata_props may differ (the rewrite names itself there): the part carries the written ones.
_MODEL_FIELDS = ("ir_version", "producer_name", "producer_version", "domain", "model_version", "doc_string",
                 "functions", "training_info")
_GRAPH_FIELDS = ("name", "input", "output", "initializer", "sparse_initializer", "doc_string",
                 "quantization_annotation", "metadata_props")


def changed_part(loaded: ModelProto, written: ModelProto,
                 types: Mapping[str, TensorInfo] | None = None) -> ModelProto | None:
    """A model ORT loads exactly when it loads ``written``, given it loaded ``loaded``, or ``None``.
    ``types``: inferred types of ``loaded``'s main graph (a report's ``main_graph_types``), else inferred."""
    if not _same_but_nodes(loaded, written):
        return None
    before, after = loaded.graph, written.graph
    before_nodes = list(before.node)
    split = _split(before_nodes, after)
    if split is None:
        return None
    kept, new = split
    made: dict[str, int] = {}  # each new name -> the new node that makes it
    for i, node in enumerate(new):
        for name in node.output:
            if name and made.setdefault(name, i) != i:  # a name made twice
                return None
    removed = {name for position, node in enumerate(before_nodes) if position not in kept
               for name in node.output if name}
    if not _fresh(loaded, made.keys() - removed):
        return None
    dropped_domains = {o.domain for o in loaded.opset_import} - {o.domain for o in written.opset_import}
    if "" in dropped_domains:
        dropped_domains.add("ai.onnx")
    wanted: dict[str, list[NodeProto]] = {}  # new values the unchanged nodes read -> those nodes
    reads: dict[int, tuple[str, ...]] = {}  # id(node) -> _reads(node), of the new nodes and their readers
    for position in sorted(kept):
        node = before_nodes[position]
        if dropped_domains and any(inner.domain in dropped_domains for inner in nodes_within([node])):
            return None
        node_reads = _reads(node)
        for name in node_reads:
            if name in made:
                wanted.setdefault(name, []).append(node)
                reads[id(node)] = node_reads
            elif name in removed:  # read, and its producer is gone
                return None
    for value in after.output:
        if value.name in made:
            wanted.setdefault(value.name, [])
        elif value.name in removed:
            return None
    declared = _new_value_info(before, after, made)
    if declared is None:
        return None
    del kept, removed, before_nodes
    reads.update((id(node), _reads(node)) for node in new)
    return _part_model(written, loaded, new, made, wanted, declared, types, reads)


def _split(before_nodes: list[NodeProto], after: GraphProto) -> tuple[set[int], list[NodeProto]] | None:
    """The positions in ``before_nodes`` of the nodes ``after`` keeps as they were, and its other (new) nodes;
    None where two nodes of ``before_nodes`` are alike (or their identities' hashes collide): which one
    stayed cannot be told."""
    originals: dict[int, int] = {}  # hash of a node's identity -> its position (the node itself compared below)
    for position, node in enumerate(before_nodes):
        if originals.setdefault(hash(_identity(node)), position) != position:
            return None
    kept: set[int] = set()
    new: list[NodeProto] = []
    before_names = {node.name for node in before_nodes}  # another name: another identity (cheaper to tell)
    for node in after.node:
        original = originals.get(hash(_identity(node))) if node.name in before_names else None
        if original is not None and original not in kept and node == before_nodes[original]:
            kept.add(original)
        else:
            new.append(node)
    return (kept, new) if new else None


def _fresh(loaded: ModelProto, names: set[str]) -> bool:
    """Whether no graph of ``loaded`` uses any of ``names`` (new names must not shadow or repeat one)."""
    for graph in (holder for holder in node_holders(loaded) if isinstance(holder, GraphProto)):
        for values in (graph.input, graph.output, graph.value_info, graph.initializer):
            if any(value.name in names for value in values):
                return False
        used: set[str] = set()
        for node in graph.node:
            used.update(node.input, node.output)
        if not names.isdisjoint(used):
            return False
    return True


def _same_but_nodes(loaded: ModelProto, written: ModelProto) -> bool:
    """Whether the models differ at most in the main graph's nodes and value_info and in the opsets
    only new or removed nodes use (each domain at one version, the same in both where both import it)."""
    if any(getattr(loaded, name) != getattr(written, name) for name in _MODEL_FIELDS):
        return False
    if any(getattr(loaded.graph, name) != getattr(written.graph, name) for name in _GRAPH_FIELDS):
        return False
    before = {o.domain: o.version for o in loaded.opset_import}
    after = {o.domain: o.version for o in written.opset_import}
    if len(before) != len(loaded.opset_import) or len(after) != len(written.opset_import):
        return False
    return all(after.get(domain, version) == version for domain, version in before.items())


def _identity(node: NodeProto) -> tuple:
    return node.domain, node.op_type, node.name, tuple(node.input), tuple(node.output)


def _reads(node: NodeProto) -> tuple[str, ...]:
    """What a node reads from the graph it stands in: its inputs and what its subgraphs read of
    enclosing graphs (not their own inputs, initializers and node outputs)."""
    names = tuple(filter(None, node.input))
    if not holds_subgraph(node):
        return names
    outer = set(names)
    for attribute in node.attribute:
        for body in subgraphs(attribute):
            own = {value.name for value in body.input} | {tensor.name for tensor in body.initializer} | \
                  {name for inner in body.node for name in inner.output}
            outer.update(name for inner in body.node for name in _reads(inner) if name not in own)
    return tuple(sorted(outer))


def _new_value_info(before: GraphProto, after: GraphProto, made: Mapping[str, int]) -> list[ValueInfoProto] | None:
    """The written graph's value_info of new names; None when it changed one of another name."""
    old: dict[str, list[ValueInfoProto]] = {}
    for value in before.value_info:
        old.setdefault(value.name, []).append(value)
    declared = []
    for value in after.value_info:
        if value.name in made:
            declared.append(value)
        elif not any(value == known for known in old.get(value.name, ())):
            return None
    return declared


def _part_model(written: ModelProto, loaded: ModelProto, new: list[NodeProto], made: dict[str, int],
                wanted: dict[str, list[NodeProto]], declared: list[ValueInfoProto],
                types: Mapping[str, TensorInfo] | None, reads: dict[int, tuple[str, ...]]) -> ModelProto | None:
    """The new nodes, each distinct group once, with the unchanged nodes that read what a group makes
    (their outputs renamed: they are there for ORT to infer them on the group's declared outputs)."""
    readers = [node for nodes in wanted.values() for node in nodes]
    outside = {name for node in (*new, *readers) for name in reads[id(node)] if name not in made}
    constants = _small_constants(loaded.graph, outside)
    types = _input_model_types(loaded, (outside - set(constants)) | set(wanted), types)
    del outside, readers
    if types is None:
        return None
    value_info = {value.name: value for value in declared}
    part = GraphProto(name="changed part")
    # what an outside name stands for in a signature: a constant's value, else an input's type
    outside_forms: dict[str, tuple] = {name: ("input", info) for name, info in types.items()}
    outside_forms.update((name, ("constant", tensor.SerializeToString())) for name, tensor in constants.items())
    signature = _Signature(outside_forms, wanted, value_info, reads)
    seen: set[tuple] = set()
    checked_readers: dict[int, NodeProto] = {}  # id -> reader: one copy of a reader of several groups
    for group in _groups(new, made, reads):
        nodes = [new[i] for i in group]
        group_readers = list({id(node): node for name in _outputs(nodes) for node in wanted.get(name, ())}.values())
        key = signature(nodes, group_readers)
        if key not in seen:
            seen.add(key)
            part.node.extend(nodes)
            checked_readers.update((id(node), node) for node in group_readers)
    produced = set(_outputs(part.node))
    names = NameScope({name for node in (*part.node, *checked_readers.values())
                       for name in (node.name, *node.input, *node.output)})
    for reader in checked_readers.values():
        copy = part.node.add()
        copy.CopyFrom(reader)
        copy.name = names.fresh(f"{reader.name}/read") if reader.name else ""
        for k, name in enumerate(copy.output):
            if name:
                copy.output[k] = names.fresh(f"{name}/read")
    outputs = []
    for name in sorted(set(wanted) & produced):  # typed as the written model declares, if it agrees
        info = types[name]
        if name in value_info:
            if value_info[name].type.tensor_type.elem_type != info.elem_type:
                return None  # the readers would see another type: no part proves that
            outputs.append(value_info[name])
        else:
            outputs.append(_value(name, info, with_shape=False))  # the element type its readers saw
    for name in sorted({name for node in part.node for name in _reads(node)} - produced):
        if name in constants:
            part.initializer.append(constants[name])
        elif name in value_info:  # made by a group left out as a repeat: as the written model declares it
            part.input.append(value_info[name])
        else:
            part.input.append(_value(name, types[name], with_shape=True))
    part.output.extend(outputs)
    part.value_info.extend(value for name, value in value_info.items() if name in produced and name not in wanted)
    model = ModelProto(ir_version=written.ir_version)
    model.opset_import.extend(written.opset_import)
    model.metadata_props.extend(written.metadata_props)
    model.graph.CopyFrom(part)
    return model


def _outputs(nodes) -> list[str]:
    return [name for node in nodes for name in node.output if name]


def _value(name: str, info: TensorInfo, with_shape: bool) -> ValueInfoProto:
    shape = list(info.shape) if with_shape and info.shape is not None else None
    return helper.make_tensor_value_info(name, info.elem_type, shape)


def _input_model_types(loaded: ModelProto, names: set[str],
                       types: Mapping[str, TensorInfo] | None) -> dict[str, TensorInfo] | None:
    """Element type and shape of ``names`` in the input model (initializers by their own dims); None
    when one has no element type."""
    if types is None:
        types = graph_infos(inferred(typing_copy(loaded)).graph, main=True)
    found = {name: types[name] for name in names if name in types}
    for tensor in loaded.graph.initializer:  # the typing copy declares a large one by its type only
        if tensor.name in names:
            found[tensor.name] = TensorInfo(tensor.data_type, tuple(tensor.dims))
    if len(found) != len(names) or not all(info.elem_type for info in found.values()):
        return None
    return found


def _small_constants(graph: GraphProto, names: set[str]) -> dict[str, TensorProto]:
    """The initializers and Constant values among ``names`` small enough to keep as values (the typing
    copy's own limit), each named after the value it gives."""
    constants = {}
    inputs = {value.name for value in graph.input}
    for tensor in graph.initializer:
        if tensor.name in names and tensor.name not in inputs and not is_large(tensor) \
                and tensor.data_location != TensorProto.EXTERNAL:
            constants[tensor.name] = tensor
    for node in graph.node:
        if node.output and node.output[0] in names:
            value = constant_value(node)
            if value is not None and not is_large(value) and value.data_location != TensorProto.EXTERNAL:
                named = TensorProto()
                named.CopyFrom(value)
                named.name = node.output[0]
                constants[named.name] = named
    return constants


def _groups(nodes: list[NodeProto], producer: Mapping[str, int], reads: Mapping[int, tuple[str, ...]]) -> list[list[int]]:
    """The connected groups of ``nodes`` (a node and those whose outputs it reads: ``producer`` maps each
    output to its node's index), in node order."""
    parent = list(range(len(nodes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, node in enumerate(nodes):
        for name in reads[id(node)]:
            j = producer.get(name)
            if j is not None:
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(nodes)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


class _Signature:
    """A group and its readers with the group's own names numbered in order of appearance and outside names
    replaced by what they are (``outside_forms``: a constant's value, an input's type; any other name, one
    only a subgraph reads or defines or another group's, as it is): equal for groups that ORT loads alike."""

    def __init__(self, outside_forms: dict[str, tuple], wanted: Mapping[str, list[NodeProto]],
                 value_info: Mapping[str, ValueInfoProto], reads: Mapping[int, tuple[str, ...]]):
        self.outside_forms, self.wanted, self.value_info, self.reads = outside_forms, wanted, value_info, reads

    def __call__(self, group: list[NodeProto], readers: list[NodeProto]) -> tuple:
        numbers: dict[str, int] = {}
        forms, wanted, value_info = self.outside_forms, self.wanted, self.value_info
        signature: list[tuple] = []
        for node in (*group, *readers):
            numbered = len(signature) < len(group)
            ins = tuple([(numbers[name] if name in numbers else forms.get(name, name)) if name else ""
                         for name in node.input])
            outer: tuple = ()
            if holds_subgraph(node):
                outer = tuple((name, numbers[name] if name in numbers else forms.get(name, name))
                              for name in sorted(set(self.reads[id(node)]) - set(node.input)))
            outs: tuple = ()
            if numbered:
                for name in node.output:
                    numbers.setdefault(name, len(numbers))
                outs = tuple([(numbers[name] if name else "", name in wanted,
                               value_info[name].type.SerializeToString() if name in value_info else b"")
                              for name in node.output])
            signature.append((node.domain, node.op_type, ins, outer, outs,
                              tuple([a.SerializeToString() for a in node.attribute])))
        return tuple(signature)


__all__ = ["changed_part"]
