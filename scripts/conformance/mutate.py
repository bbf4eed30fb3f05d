"""Mutation fuzzing (``gathermultiaxis check --mutate N``): rewritten models edited after the rewrite, run
three ways, compared bit for bit.

Case ``seed`` is drawn from that seed alone. Its base is a fuzz model (``fuzz.fuzz_case``) or one of the
real models given (``Base``; the check's default: the bundled example). The base is rewritten, then edited
by one to three mutations (``MUTATIONS``), each at a random GatherMultiaxis node of the main graph:

* ``data_op``, ``indices_op``, ``output_op``: an op inserted on the node's data or indices input, or after
  its output (Identity, Mul by 2, Neg, a no-op Cast, Concat with itself, Transpose, Reshape to 1-D, ...);
* ``record_copy``: another node's provenance record put under this one (one node: its own record edited:
  another op, axis or input, an unknown attribute, a foreign domain, a second record, text that is no record);
* ``attribute_change``: the node's mode or axes changed under its record;
* ``range_indices``: the indices the rewrite aligned replaced by ``Range`` (descending, ascending, or from
  ``-n``) of the data's size on the axis, through Identity, no-op Cast, ``Add 0``, ``Mul 1``, an Unsqueeze /
  Squeeze pair or an Expand;
* ``unknown_type``: a value fed through com.microsoft ``ExpandDims`` and a Squeeze (ONNX's inference then
  knows neither its element type nor its shape), or every value_info removed;
* ``stale_record`` (before the rewrite): a gather of the base carries a record already.

Float feeds get quiet NaNs with payloads (float16 ``0x7e01``, ``0xfe03``, ``0x7e55``; signalling ones are
quieted by ORT's own Cast from float16 before the kernel sees them: docs/upstream.md). The edited
model runs in ``gathermultiaxis.InferenceSession`` as users run it (the "default" side: nodes one standard
gather computes run as that gather), with ``run_builtin_gathers=False`` (the "kernel" side), and lowered by
``lower_model`` (the "lowered" side: plain ORT, or the kernel-only session where nodes are left), all with
ORT's default options. The three agree when every side raises, or when none does and every output is
bit-identical (``harness.difference``: float16 as bits, strings exact).
"""

from __future__ import annotations

import functools
import json
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from ..ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND
from ..graphs import lower_model, rewrite_model
from ..graphs.ir.walk import any_node, attribute
from ..graphs.provenance import KEY
from ..harness import difference
from ..ops.contract import MODES, Mode, is_gather_multiaxis
from .fuzz import fuzz_case
from .isolation import report_phase

MUTATIONS = ("data_op", "indices_op", "output_op", "record_copy", "attribute_change", "range_indices",
             "unknown_type")
SIDES = ("default", "kernel", "lowered")
FUZZ_SHARE = 0.6  # of the cases drawn from a fuzz model when real bases are given
_NUMERIC = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64)  # Mul / Neg at any opset
_SIGNED = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64)
_HALF_NANS = np.array([0x7E01, 0xFE03, 0x7E55], np.uint16)  # quiet NaNs with payloads


@dataclass(frozen=True)
class Base:
    """A real model the mutations start from, and its inputs."""

    name: str
    model: ModelProto
    feeds: dict[str, np.ndarray]


@dataclass
class MutationCase:
    """One mutated case: where it started, what was done, the edited rewritten model and its feeds."""

    seed: int
    base: str
    mutations: list[str]
    model: ModelProto
    feeds: dict[str, np.ndarray]

    @property
    def description(self) -> str:
        """The case in one line: seed, base and mutations."""
        return f"mutation seed {self.seed}: {self.base}; " + "; ".join(self.mutations)


@dataclass
class Comparison:
    """What the three sides gave: equal or not, how they differ, and whether each side raised."""

    equal: bool
    detail: str = ""
    raised: dict[str, bool] = field(default_factory=dict)


# -- the graph as the mutations see it ---------------------------------------------------------------


class _Graph:
    """The rewritten model being edited: ONNX's inference of it, fresh names, node insertion."""

    def __init__(self, model: ModelProto, rng: np.random.Generator):
        self.model, self.rng, self.count = model, rng, 0
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.taken = {name for node in model.graph.node for name in (*node.input, *node.output)}
        self.taken |= {value.name for value in (*model.graph.input, *model.graph.output)}
        self.taken |= {tensor.name for tensor in model.graph.initializer}
        self.infer()

    def infer(self) -> None:
        """ONNX's inference of the model as it is now (types and ranks, where known)."""
        try:
            inferred = onnx.shape_inference.infer_shapes(self.model)
        except Exception:  # noqa: BLE001 - a model inference refuses: nothing is known
            inferred = self.model
        self.types: dict[str, TensorProto] = {}
        graph = inferred.graph
        for value in (*graph.input, *graph.value_info, *graph.output):
            if value.type.HasField("tensor_type"):
                self.types[value.name] = value.type.tensor_type
        for tensor in graph.initializer:
            self.types.setdefault(tensor.name, helper.make_tensor_type_proto(tensor.data_type, tensor.dims).tensor_type)

    def elem_type(self, name: str) -> int:
        tensor_type = self.types.get(name)
        return tensor_type.elem_type if tensor_type is not None else 0

    def rank(self, name: str) -> int | None:
        tensor_type = self.types.get(name)
        return len(tensor_type.shape.dim) if tensor_type is not None and tensor_type.HasField("shape") else None

    def fresh(self, role: str) -> str:
        self.count += 1
        name = f"mutation/{role}_{self.count}"
        while name in self.taken:
            self.count += 1
            name = f"mutation/{role}_{self.count}"
        self.taken.add(name)
        return name

    def gathers(self) -> list[NodeProto]:
        return [node for node in self.model.graph.node if is_gather_multiaxis(node)]

    def producer_position(self, name: str) -> int:
        """Where nodes computing from ``name`` may go: after its producer (0 for an input or initializer)."""
        for position, node in enumerate(self.model.graph.node):
            if name in node.output:
                return position + 1
        return 0

    def insert(self, position: int, nodes: list[NodeProto]) -> None:
        """Put ``nodes`` at ``position`` (the graph's nodes are copied: edit a node before, not after)."""
        graph = self.model.graph
        kept = list(graph.node)
        del graph.node[:]
        graph.node.extend(kept[:position] + nodes + kept[position:])

    def constant(self, value, dtype, role: str) -> tuple[str, NodeProto]:
        name = self.fresh(role)
        return name, helper.make_node("Constant", [], [name], name=name,
                                      value=numpy_helper.from_array(np.array(value, dtype), name))

    def op(self, op_type: str, inputs: list[str], role: str, domain: str = "", **attributes) -> tuple[str, NodeProto]:
        name = self.fresh(role)
        return name, helper.make_node(op_type, inputs, [name], name=name, domain=domain or None, **attributes)

    def axes_op(self, op_type: str, x: str, axes: list[int], role: str) -> tuple[str, list[NodeProto]]:
        """Unsqueeze or Squeeze in the opset's form (axes an input from 13, an attribute before)."""
        if self.opset >= 13:
            axes_name, constant = self.constant(axes, np.int64, role + "_axes")
            name, node = self.op(op_type, [x, axes_name], role)
            return name, [constant, node]
        name, node = self.op(op_type, [x], role, axes=axes)
        return name, [node]

    def replace_reads(self, old: str, new: str, skip: set[str]) -> None:
        """Every node reading ``old`` (but the new ``skip`` nodes) reads ``new`` instead."""
        for node in self.model.graph.node:
            if node.name in skip:
                continue
            for i, name in enumerate(node.input):
                if name == old:
                    node.input[i] = new

    def record(self, node: NodeProto) -> dict | None:
        for entry in node.metadata_props:
            if entry.key == KEY:
                try:
                    return json.loads(entry.value)
                except ValueError:
                    return None
        return None


# -- the mutations ----------------------------------------------------------------------------------


def _value_op(g: _Graph, x: str, elem_type: int, rank: int | None, for_indices: bool) -> tuple[str, list[NodeProto], str]:
    """An op computing a new value from ``x``: (output, nodes, what it is)."""
    choices = ["Identity", "Transpose", "Concat"]
    if elem_type:
        choices.append("Cast")
    if elem_type in _NUMERIC:
        choices += ["Mul", "Neg"] if not for_indices else ["Neg", "Add"]
    if for_indices:
        choices += ["CastIndices"]
    else:
        choices += ["Reshape"]
    kind = str(g.rng.choice(choices))
    if kind == "Identity":
        y, node = g.op("Identity", [x], "identity")
        return y, [node], "Identity"
    if kind == "Transpose":
        y, node = g.op("Transpose", [x], "transpose")
        return y, [node], "Transpose"
    if kind == "Concat":
        y, node = g.op("Concat", [x, x], "concat", axis=0)
        return y, [node], "Concat with itself"
    if kind == "Cast":
        y, node = g.op("Cast", [x], "cast", to=elem_type)
        return y, [node], f"no-op Cast to {TensorProto.DataType.Name(elem_type)}"
    if kind == "CastIndices":
        to = int(g.rng.choice([TensorProto.INT32, TensorProto.INT64]))
        y, node = g.op("Cast", [x], "cast", to=to)
        return y, [node], f"Cast to {TensorProto.DataType.Name(to)}"
    if kind == "Neg":
        y, node = g.op("Neg", [x], "neg")
        return y, [node], "Neg"
    if kind in ("Mul", "Add"):
        value = 2 if kind == "Mul" else -1
        c, constant = g.constant(value, helper.tensor_dtype_to_np_dtype(elem_type), "operand")
        y, node = g.op(kind, [x, c], kind.lower())
        return y, [constant, node], f"{kind} {value}"
    shape, constant = g.constant([-1], np.int64, "flat_shape")
    y, node = g.op("Reshape", [x, shape], "flat")
    return y, [constant, node], "Reshape to 1-D"


def data_op(g: _Graph, node: NodeProto) -> str:
    x = node.input[0]
    y, nodes, what = _value_op(g, x, g.elem_type(x), g.rank(x), for_indices=False)
    node.input[0] = y  # before the insertion, which copies the graph's nodes
    g.insert(g.producer_position(x), nodes)
    return f"data_op: {what} on the data of {node.name!r}"


def indices_op(g: _Graph, node: NodeProto) -> str:
    i = node.input[1]
    y, nodes, what = _value_op(g, i, g.elem_type(i), g.rank(i), for_indices=True)
    node.input[1] = y
    g.insert(g.producer_position(i), nodes)
    return f"indices_op: {what} on the indices of {node.name!r}"


def output_op(g: _Graph, node: NodeProto) -> str:
    out = node.output[0]
    inner = g.fresh("gathered")
    node.output[0] = inner
    elem_type = g.elem_type(out)
    # Where the rewrite's Squeeze of the output follows, an op changing the shape before it makes a model that
    # breaks ONNX's rules, which ORT's optimizer may or may not hide (it folds Reshape + Squeeze): then only
    # ops that keep the shape
    squeezed = any(reader.op_type == "Squeeze" and out in reader.input for reader in g.model.graph.node)
    choices = ["Identity"] + ([] if squeezed else ["Transpose", "Reshape", "Squeeze", "Concat"])
    choices += ["Mul", "Neg"] if elem_type in _NUMERIC else []
    kind = str(g.rng.choice(choices))
    nodes: list[NodeProto]
    if kind == "Reshape":
        shape, constant = g.constant([-1], np.int64, "flat_shape")
        nodes = [constant, helper.make_node("Reshape", [inner, shape], [out], name=g.fresh("flat"))]
    elif kind == "Mul":
        two, constant = g.constant(2, helper.tensor_dtype_to_np_dtype(elem_type), "two")
        nodes = [constant, helper.make_node("Mul", [inner, two], [out], name=g.fresh("mul"))]
    elif kind == "Concat":
        nodes = [helper.make_node("Concat", [inner, inner], [out], name=g.fresh("concat"), axis=0)]
    else:
        nodes = [helper.make_node(kind, [inner], [out], name=g.fresh(kind.lower()))]
    position = list(g.model.graph.node).index(node) + 1
    g.insert(position, nodes)
    return f"output_op: {kind} after {node.name!r}"


def _set_record(node: NodeProto, text: str, append: bool = False) -> None:
    if not append:
        kept = [entry for entry in node.metadata_props if entry.key != KEY]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    entry = node.metadata_props.add()
    entry.key, entry.value = KEY, text


def _edited_record(g: _Graph, record: dict) -> tuple[str, str]:
    """(text, what): ``record`` edited one way."""
    edited = json.loads(json.dumps(record))
    kind = str(g.rng.choice(["op", "attribute", "inputs", "unknown attribute", "domain", "garbage"]))
    if kind == "op":
        edited["op_type"] = str(g.rng.choice([op for op in (GATHER, GATHER_ELEMENTS, GATHER_ND) if op != record["op_type"]]))
    elif kind == "attribute":
        name = "batch_dims" if record["op_type"] == GATHER_ND else "axis"
        edited["attributes"][name] = int(edited["attributes"].get(name, 0)) + int(g.rng.choice([-1, 1]))
    elif kind == "inputs":
        edited["inputs"] = list(reversed(edited["inputs"]))
    elif kind == "unknown attribute":
        edited["attributes"]["mode"] = 1
    elif kind == "domain":
        edited["domain"] = "com.microsoft"
    else:
        return "{not a record", "text that is no record"
    return json.dumps(edited, sort_keys=True, separators=(",", ":")), f"record with another {kind}"


def record_copy(g: _Graph, node: NodeProto) -> str:
    others = [other for other in g.gathers() if other is not node and g.record(other) is not None]
    record = g.record(node)
    if others and g.rng.random() < 0.7:
        source = others[int(g.rng.integers(len(others)))]
        text = next(entry.value for entry in source.metadata_props if entry.key == KEY)
        _set_record(node, text)
        return f"record_copy: the record of {source.name!r} under {node.name!r}"
    if record is None:
        _set_record(node, json.dumps({"op_type": "Gather", "inputs": [node.input[0], node.input[1]],
                                      "output": node.output[0], "attributes": {"axis": 0}, "name": ""}))
        return f"record_copy: a Gather record under the unrecorded {node.name!r}"
    text, what = _edited_record(g, record)
    append = bool(g.rng.random() < 0.3)
    _set_record(node, text, append=append)
    return f"record_copy: {what} under {node.name!r}" + (" (after its own)" if append else "")


def attribute_change(g: _Graph, node: NodeProto) -> str:
    mode = attribute(node, "mode", Mode.ERROR.value)  # not UTF-8: escaped, so another mode is chosen
    rank = g.rank(node.input[0])
    if rank and g.rng.random() < 0.5:
        k = int(g.rng.integers(1, rank + 1))
        axes = [int(a) for a in g.rng.permutation(rank)[:k]]
        axes = [a - rank if g.rng.random() < 0.3 else a for a in axes]
        name, constant = g.constant(axes, np.int64, "axes")
        node.input[2] = name
        g.insert(0, [constant])
        return f"attribute_change: axes {axes} on {node.name!r}"
    new = str(g.rng.choice([m for m in MODES if m != mode]))
    for proto in node.attribute:
        if proto.name == "mode":
            proto.s = new.encode()
    return f"attribute_change: mode {new!r} on {node.name!r}"


_WRAPPERS = ("Identity", "Cast", "Add 0", "Mul 1", "Unsqueeze/Squeeze", "Expand")


def _wrap(g: _Graph, x: str, kind: str) -> tuple[str, list[NodeProto]]:
    if kind == "Identity":
        y, node = g.op("Identity", [x], "identity")
        return y, [node]
    if kind == "Cast":
        y, node = g.op("Cast", [x], "cast", to=TensorProto.INT64)
        return y, [node]
    if kind in ("Add 0", "Mul 1"):
        c, constant = g.constant(0 if kind == "Add 0" else 1, np.int64, "neutral")
        y, node = g.op(kind.split()[0], [x, c], "neutral_op")
        return y, [constant, node]
    if kind == "Expand":
        shape, constant = g.constant([1], np.int64, "expand_shape")
        y, node = g.op("Expand", [x, shape], "expand")
        return y, [constant, node]
    y1, first = g.axes_op("Unsqueeze", x, [0], "unsqueeze")
    y2, second = g.axes_op("Squeeze", y1, [0], "squeeze")
    return y2, first + second


def range_indices(g: _Graph, node: NodeProto) -> str | None:
    if g.opset < 11:
        return None
    record = g.record(node)
    known = [name for name in g.taken]
    if record and isinstance(record.get("inputs"), list) and len(record["inputs"]) == 2 and all(
            name in known for name in record["inputs"]):
        data, indices = record["inputs"]
        axis = int(record.get("attributes", {}).get("axis", 0)) if record.get("op_type") == "Gather" else 0
    else:
        data, indices, axis = node.input[0], node.input[1], 0
    nodes: list[NodeProto] = []
    shape, n = g.op("Shape", [data], "shape")
    axis_name, c_axis = g.constant(axis, np.int64, "axis")
    size, n2 = g.op("Gather", [shape, axis_name], "size", axis=0)
    nodes += [n, c_axis, n2]
    direction = str(g.rng.choice(["descending", "ascending", "from -n"]))
    zero, c0 = g.constant(0, np.int64, "zero")
    one, c1 = g.constant(1, np.int64, "one")
    nodes += [c0, c1]
    if direction == "descending":
        minus_one, cm = g.constant(-1, np.int64, "minus_one")
        start, sub = g.op("Sub", [size, one], "start")
        nodes += [cm, sub]
        r, rn = g.op("Range", [start, minus_one, minus_one], "range")
    elif direction == "ascending":
        r, rn = g.op("Range", [zero, size, one], "range")
    else:
        start, neg = g.op("Neg", [size], "start")
        nodes.append(neg)
        r, rn = g.op("Range", [start, zero, one], "range")
    nodes.append(rn)
    wrappers = [str(w) for w in g.rng.choice(_WRAPPERS, size=int(g.rng.integers(0, 3)))]
    y = r
    for wrapper in wrappers:
        y, more = _wrap(g, y, wrapper)
        nodes += more
    rank = g.rank(indices)
    if rank is not None and rank != 1:
        shape_name, constant = g.constant([-1] + [1] * (rank - 1), np.int64, "indices_shape")
        y, reshape = g.op("Reshape", [y, shape_name], "indices")
        nodes += [constant, reshape]
    if g.elem_type(indices) == TensorProto.INT32:
        y, cast = g.op("Cast", [y], "indices_int32", to=TensorProto.INT32)
        nodes.append(cast)
    position = max(g.producer_position(data), g.producer_position(indices))
    g.insert(position, nodes)
    g.replace_reads(indices, y, {n.name for n in nodes})
    through = " through " + ", ".join(wrappers) if wrappers else ""
    return f"range_indices: {indices!r} replaced by a {direction} Range{through}"


def unknown_type(g: _Graph, node: NodeProto) -> str | None:
    if g.rng.random() < 0.3:
        del g.model.graph.value_info[:]
        return "unknown_type: every value_info removed"
    record = g.record(node)
    candidates = [node.input[0], node.input[1]]
    if record and isinstance(record.get("inputs"), list):
        candidates += [name for name in record["inputs"] if isinstance(name, str) and name in g.taken]
    x = candidates[int(g.rng.integers(len(candidates)))]
    if g.elem_type(x) in (TensorProto.BFLOAT16, 0):
        return None
    axis, constant = g.constant(0, np.int32, "expand_axis")
    expanded, expand = g.op("ExpandDims", [x, axis], "expanded", domain="com.microsoft")
    y, squeeze = g.axes_op("Squeeze", expanded, [0], "untyped")
    nodes = [constant, expand, *squeeze]
    g.insert(g.producer_position(x), nodes)
    g.replace_reads(x, y, {n.name for n in nodes})
    if not any(o.domain == "com.microsoft" for o in g.model.opset_import):
        g.model.opset_import.add(domain="com.microsoft", version=1)
    return f"unknown_type: {x!r} through com.microsoft ExpandDims and Squeeze"


_APPLY: dict[str, Callable[[_Graph, NodeProto], str | None]] = {
    "data_op": data_op, "indices_op": indices_op, "output_op": output_op, "record_copy": record_copy,
    "attribute_change": attribute_change, "range_indices": range_indices, "unknown_type": unknown_type}


def _stale_record(model: ModelProto, rng: np.random.Generator) -> str | None:
    """A gather of ``model`` (before the rewrite) carries a record of another gather already."""
    gathers = [node for node in model.graph.node if node.op_type in (GATHER, GATHER_ELEMENTS, GATHER_ND)
               and node.domain in ("", "ai.onnx")]
    if not gathers:
        return None
    node = gathers[int(rng.integers(len(gathers)))]
    op = str(rng.choice([GATHER, GATHER_ELEMENTS, GATHER_ND]))
    text = json.dumps({"op_type": op, "inputs": [node.input[1], node.input[0]], "output": node.output[0],
                       "attributes": {"axis": int(rng.integers(-2, 3))} if op != GATHER_ND else {}, "name": "stale"})
    _set_record(node, text)
    return f"stale_record: {node.name!r} carries a {op} record before the rewrite"


def _with_payload_nans(feeds: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    result = {}
    for name, value in feeds.items():
        value = np.array(value)
        if value.dtype == np.float16 and value.size:
            bits = value.view(np.uint16).reshape(-1)
            bits[rng.integers(value.size, size=min(3, value.size))] = rng.choice(_HALF_NANS, size=min(3, value.size))
        elif value.dtype in (np.float32, np.float64) and value.size:
            flat = value.reshape(-1)
            bits = flat.view(np.uint32 if value.dtype == np.float32 else np.uint64)
            payload = 0x7FC00001 if value.dtype == np.float32 else 0x7FF8000000000001
            bits[rng.integers(value.size)] = payload
        result[name] = value
    return result


def mutation_case(seed: int, bases: tuple[Base, ...] = ()) -> MutationCase:
    """The mutated case of ``seed`` (see the module docstring): from a fuzz model, or with ``bases`` and
    probability ``1 - FUZZ_SHARE`` from one of them.

    Args:
        seed: the case's seed (the same seed and bases give the same case).
        bases: real models to start from besides the fuzz models.

    Returns:
        The MutationCase.
    """
    rng = np.random.default_rng([seed, 38])
    if bases and rng.random() >= FUZZ_SHARE:
        base = bases[int(rng.integers(len(bases)))]
        name, original, feeds = base.name, ModelProto(), dict(base.feeds)
        original.CopyFrom(base.model)
    else:
        case = fuzz_case(seed)
        name, original, feeds = f"fuzz seed {seed}", case.model, dict(case.data_sets[0].feeds)
    done = []
    if rng.random() < 0.15:
        stale = _stale_record(original, rng)
        if stale:
            done.append(stale)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rewritten, _ = rewrite_model(original)
    g = _Graph(rewritten, rng)
    reshaped = False
    for _ in range(int(rng.integers(1, 4))):
        gathers = g.gathers()
        if not gathers:
            break
        node = gathers[int(rng.integers(len(gathers)))]
        for _attempt in range(4):
            mutation = str(rng.choice(MUTATIONS))
            what = _APPLY[mutation](g, node)
            if what:
                done.append(what)
                reshaped = reshaped or mutation in _RESHAPING
                break
        g.infer()
    if reshaped:
        _forget_declared_shapes(g.model)
    return MutationCase(seed, name, done, g.model, _with_payload_nans(feeds, rng))


# Mutations that may change the shape of values the model declares (value_info, outputs): the declarations go
# (their element types stay), as a tool that edits a model infers it again. A declared static shape the run
# contradicts makes ORT plan the value's buffer from it, and the PyOp bridge ends the process when the op's
# output does not fit (std::terminate; docs/upstream.md): the model's own fault, not what is compared here.
_RESHAPING = ("data_op", "indices_op", "output_op", "attribute_change", "range_indices")


def _forget_declared_shapes(model: ModelProto) -> None:
    for value in (*model.graph.value_info, *model.graph.output):
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")


# -- running it three ways ------------------------------------------------------------------------


def _holds_gather_multiaxis(model: ModelProto) -> bool:
    return any_node(model, is_gather_multiaxis)


def run_sides(model: ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, list | BaseException]:
    """The model's outputs (or the exception) on each side: ``default``, ``kernel``, ``lowered``."""
    import onnxruntime as ort

    from ..ops.runtime.session import InferenceSession

    results: dict[str, list | BaseException] = {}
    providers = ["CPUExecutionProvider"]

    def options() -> ort.SessionOptions:  # ORT's default optimizations; one thread (cases run side by side)
        made = ort.SessionOptions()
        made.intra_op_num_threads, made.log_severity_level = 1, 4
        return made

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for side, builtin in (("default", True), ("kernel", False)):
            report_phase(f"running the {side} side")
            try:
                session = InferenceSession(model, options(), providers=providers, run_builtin_gathers=builtin)
                results[side] = session.run(None, feeds)
            except Exception as error:  # noqa: BLE001 - ORT's and the op's own error types
                results[side] = error
        report_phase("running the lowered side")
        try:
            lowered, _ = lower_model(model)
            if _holds_gather_multiaxis(lowered):
                runner = InferenceSession(lowered, options(), providers=providers, run_builtin_gathers=False)
            else:
                runner = ort.InferenceSession(lowered.SerializeToString(), options(), providers=providers)
            results["lowered"] = runner.run(None, feeds)
        except Exception as error:  # noqa: BLE001
            results["lowered"] = error
    return results


def compare_sides(results: dict[str, list | BaseException]) -> Comparison:
    """Whether the sides agree: every one raised, or none did and every output is bit-identical to the
    kernel side's."""
    raised = {side: isinstance(value, BaseException) for side, value in results.items()}
    if all(raised.values()):
        return Comparison(True, "every side raised", raised)
    if any(raised.values()):
        which = [side for side, value in raised.items() if value]
        errors = "; ".join(f"{side}: {type(results[side]).__name__}: {str(results[side]).splitlines()[0][:160]}"
                           for side in which)
        return Comparison(False, f"only {', '.join(which)} raised ({errors})", raised)
    kernel = results["kernel"]
    assert isinstance(kernel, list)
    for side in ("default", "lowered"):
        outputs = results[side]
        assert isinstance(outputs, list)
        for number, (got, want) in enumerate(zip(outputs, kernel)):
            problem = difference(got, want)
            if problem is not None:
                return Comparison(False, f"{side} vs kernel, output {number}: {problem}", raised)
    return Comparison(True, "", raised)


@functools.lru_cache(maxsize=4)
def bases_from(paths: tuple[str, ...]) -> tuple[Base, ...]:
    """The bases of ``paths``: the bundled example (its own inputs) for ``EXAMPLE``, else the model file with
    generated inputs (the first set its original model runs on with plain ORT, else the first set made)."""
    import onnxruntime as ort

    from ..examples import EXAMPLE_PATH, example_inputs
    from .input_generation import sized_inputs

    bases = []
    for path in paths:
        if path == EXAMPLE:
            bases.append(Base("the bundled example", onnx.load(str(EXAMPLE_PATH)), example_inputs()))
            continue
        model = onnx.load(path)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        chosen = None
        for attempt, feeds in enumerate(sized_inputs(model, 0, {})):
            chosen = chosen or feeds
            try:
                session.run(None, feeds)
            except Exception:  # noqa: BLE001 - refused: the next sizes
                if attempt < 8:
                    continue
                break
            chosen = feeds
            break
        if chosen is None:
            raise ValueError(f"{path}: no inputs can be made for it")
        bases.append(Base(path, model, chosen))
    return tuple(bases)


EXAMPLE = "example"  # bases_from's name of the bundled example


def check_mutation(seed: int, bases: tuple[Base, ...] = ()) -> tuple[MutationCase, Comparison]:
    """Make case ``seed`` and compare its three sides."""
    case = mutation_case(seed, bases)
    return case, compare_sides(run_sides(case.model, case.feeds))


__all__ = ["EXAMPLE", "bases_from", "MUTATIONS", "SIDES", "Base", "Comparison", "MutationCase", "check_mutation", "compare_sides",
           "mutation_case", "run_sides"]
