"""The inputs made for a case that brings none: index inputs within the data's bounds, symbolic dims sized
until the original model accepts them."""

from __future__ import annotations

from collections.abc import Iterator
from math import prod

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper

from ..ops.alignment import GATHER_ND
from ..graphs import GATHER_OPS
from .cases import GENERATED_BYTES_LIMIT, CannotGenerate, feed_names

# Symbolic dims start at the first of these sizes (3: small, and not 1, which would hide broadcasting
# mistakes); while the original model refuses the generated inputs, one dim name at a time takes the
# others (see ``symbolic_size_attempts``).
SYMBOLIC_SIZES = (3, 1, 8, 64, 512, 4096)
MAX_SIZE_ATTEMPTS = 64  # generated data sets tried per case before it is "not compared"


# Ops whose output holds the values of their first input (rearranged, repeated or cast): index values
# pass through them unchanged on their way to a gather.
SHAPE_ONLY_OPS = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Cast", "Expand", "Identity"})


def index_source(producers: dict[str, NodeProto], name: str, through: frozenset[str]) -> str:
    """The value whose values ``name`` holds: followed back through ``producers`` (output name -> node) of
    op types ``through`` (their first input)."""
    seen = set()
    while name in producers and name not in seen:
        node = producers[name]
        if node.op_type not in through or node.domain not in ("", "ai.onnx") or not node.input:
            break
        seen.add(name)
        name = node.input[0]
    return name


def index_bounds(model: ModelProto, sizes: dict[str, list[int]], through: frozenset[str] = frozenset()
                 ) -> dict[str, int]:
    """For graph inputs used as gather indices (directly, or through ops of ``through``: SHAPE_ONLY_OPS,
    which pass the values on unchanged): the size of the axis they index."""
    shapes = dict(sizes)
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    bounds: dict[str, int] = {}
    producers = {output: node for node in model.graph.node for output in node.output} if through else {}
    for node in model.graph.node:
        if node.op_type not in GATHER_OPS or len(node.input) < 2:
            continue
        source = index_source(producers, node.input[1], through)
        if source not in sizes:
            continue
        data_shape = shapes.get(node.input[0])
        if not data_shape:
            continue
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == GATHER_ND:
            size = min(data_shape[attributes.get("batch_dims", 0):], default=None)  # fits every indexed dim
        else:
            axis = attributes.get("axis", 0)
            size = data_shape[axis] if -len(data_shape) <= axis < len(data_shape) else None
        if size:
            bounds[source] = min(size, bounds.get(source, size))
    return bounds


def _static_size(dim) -> int | None:
    """A declared dim's size, or None when it is symbolic (a dim_param, no value, or the negative
    dim_value -1 that some exporters write for a dynamic dim). A purely numeric dim_param ("16": the
    transformers exporters name head counts and sizes so) is that size."""
    if dim.HasField("dim_value") and dim.dim_value >= 0:
        return dim.dim_value
    return int(dim.dim_param) if dim.HasField("dim_param") and dim.dim_param.isdigit() else None


def _fed_tensor_dims(model: ModelProto, given: dict[str, tuple[int, ...]]):
    fed = set(feed_names(model))
    for value in model.graph.input:
        if value.name in fed and value.name not in given and value.type.HasField("tensor_type"):
            yield from value.type.tensor_type.shape.dim


def given_dim_sizes(model: ModelProto, given: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """The sizes the user's input shapes give symbolic dims: ``input_ids:[1,128]`` on an input declared
    ``[batch, seq]`` fixes ``batch`` at 1 and ``seq`` at 128 for every generated input that names them
    (``attention_mask``). A name given two sizes (by two inputs) is left to the generator, whose
    attempts the original model then judges; so is an input given at another rank than declared."""
    sizes: dict[str, set[int]] = {}
    for value in model.graph.input:
        if value.name not in given or not value.type.tensor_type.HasField("shape"):
            continue
        dims = value.type.tensor_type.shape.dim
        if len(dims) != len(given[value.name]):
            continue
        for dim, size in zip(dims, given[value.name]):
            if _static_size(dim) is None and dim.dim_param:
                sizes.setdefault(dim.dim_param, set()).add(size)
    return {name: next(iter(values)) for name, values in sizes.items() if len(values) == 1}


def symbolic_dim_names(model: ModelProto, given: dict[str, tuple[int, ...]]) -> list[str]:
    """The names of the symbolic dims of the inputs to generate, in order of first appearance, without
    those the given shapes fix (``given_dim_sizes``)."""
    fixed = given_dim_sizes(model, given)
    names: dict[str, None] = {}
    for dim in _fed_tensor_dims(model, given):
        if _static_size(dim) is None and dim.dim_param and dim.dim_param not in fixed:
            names.setdefault(dim.dim_param)
    return list(names)


def describe_feeds(model: ModelProto, feeds: dict[str, np.ndarray], origin: str,
                   given: dict[str, tuple[int, ...]] | None = None) -> str:
    """What a data set feeds each input, for the user: its type and shape, where it came from, and the
    declared shape where that differs (the first thing to look at when ORT refuses the inputs)."""
    declared = {value.name: [str(_static_size(d)) if _static_size(d) is not None else (d.dim_param or "?")
                             for d in value.type.tensor_type.shape.dim]
                for value in model.graph.input
                if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape")}
    parts = []
    for name, array in feeds.items():
        shape = list(np.shape(array))
        how = "generated at the --input-shapes shape" if given and name in given else origin
        if name in declared and declared[name] != [str(size) for size in shape]:
            how += f"; declared [{', '.join(declared[name])}]"
        elif name not in {value.name for value in model.graph.input}:
            how += "; not an input of the model"
        parts.append(f"{name} {np.asarray(array).dtype}{shape} ({how})")
    return ", ".join(parts)


def sized_inputs(model: ModelProto, seed: int, shapes: dict[str, tuple[int, ...]]) -> Iterator[dict[str, np.ndarray]]:
    """Generated inputs, one size attempt after another (``symbolic_size_attempts``), for the caller to
    stop at the first the original accepts. An attempt over the memory cap is skipped; when every one
    is, the first one's CannotGenerate says why.

    Raises:
        CannotGenerate: an input cannot be generated at all, or every attempt is over the cap."""
    too_large, generated = None, False
    for size, dim_sizes in symbolic_size_attempts(model, shapes):
        try:
            feeds = generated_inputs(model, seed, size, shapes, dim_sizes)
        except CannotGenerate as reason:
            if "would take" not in str(reason):  # not a size problem: no other size helps
                raise
            too_large = too_large or reason
            continue
        generated = True
        yield feeds
    if not generated and too_large is not None:
        raise too_large


def symbolic_size_attempts(model: ModelProto, given: dict[str, tuple[int, ...]]) -> list[tuple[int, dict[str, int]]]:
    """The (default size, size per dim name) pairs to generate inputs with, in order, until the original
    model accepts them: every name at SYMBOLIC_SIZES[0]; then one name at a time at another size, the
    others kept (a name's candidates: the sums of two other names' sizes first, as a total length is a
    past length plus a new one, then SYMBOLIC_SIZES); then every name at each of SYMBOLIC_SIZES, as
    before names were kept apart. At most MAX_SIZE_ATTEMPTS."""
    fixed = given_dim_sizes(model, given)
    if not any(_static_size(dim) is None and dim.dim_param not in fixed for dim in _fed_tensor_dims(model, given)):
        return [(SYMBOLIC_SIZES[0], {})]
    names = symbolic_dim_names(model, given)
    start = {name: SYMBOLIC_SIZES[0] for name in names}
    attempts = [(SYMBOLIC_SIZES[0], start)]
    for name in names:
        others = [start[other] for other in names if other != name]
        sums = sorted({a + b for i, a in enumerate(others) for b in others[i + 1:]})
        for size in dict.fromkeys(sums + list(SYMBOLIC_SIZES[1:])):
            if size != start[name]:
                attempts.append((SYMBOLIC_SIZES[0], {**start, name: size}))
    attempts += [(size, {name: size for name in names}) for size in SYMBOLIC_SIZES[1:]]
    if len(attempts) > MAX_SIZE_ATTEMPTS:  # keep the every-name-alike tail: it was the whole search before
        attempts = attempts[:MAX_SIZE_ATTEMPTS - len(SYMBOLIC_SIZES) + 1] + attempts[-(len(SYMBOLIC_SIZES) - 1):]
    return attempts


def _input_shapes(model: ModelProto, symbolic_size: int, given: dict[str, tuple[int, ...]],
                  dim_sizes: dict[str, int] | None = None) -> dict[str, list[int]]:
    shapes = {}
    fed = set(feed_names(model))
    dim_sizes = {**(dim_sizes or {}), **given_dim_sizes(model, given)}  # what the user's shapes fix wins
    for value in model.graph.input:
        if value.name not in fed:
            continue
        if not value.type.HasField("tensor_type"):
            kind = value.type.WhichOneof("value") or "unknown"
            raise CannotGenerate(f"input {value.name!r} is a {kind.replace('_type', '')}, not a tensor: give "
                                 f"--load-inputs (generated inputs are tensors only)")
        if value.name in given:
            shapes[value.name] = list(given[value.name])
        elif not value.type.tensor_type.HasField("shape"):
            raise CannotGenerate(f"input {value.name!r} has no declared shape: give --input-shapes {value.name}:[...]")
        else:
            shapes[value.name] = [dim_sizes.get(d.dim_param, symbolic_size) if (size := _static_size(d)) is None
                                  else size for d in value.type.tensor_type.shape.dim]
    return shapes


def generated_inputs(model: ModelProto, seed: int = 0, symbolic_size: int = 3,
                     given_shapes: dict[str, tuple[int, ...]] | None = None,
                     dim_sizes: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs (a dict from input name to array) for a model without test data; index inputs of gathers
    stay in range. Symbolic dims named in ``dim_sizes`` take that size, the others ``symbolic_size``;
    ``given_shapes``: input shapes given by the user.

    Raises:
        CannotGenerate: an input is not a tensor, has no shape, or would be too large."""
    shapes = _input_shapes(model, symbolic_size, given_shapes or {}, dim_sizes)
    types = {value.name: value.type.tensor_type.elem_type for value in model.graph.input}
    dtypes = {name: np.dtype(object) if types[name] == TensorProto.STRING else
              helper.tensor_dtype_to_np_dtype(types[name]) for name in shapes}
    needed = sum(prod(shape) * (8 if dtypes[name] == object else dtypes[name].itemsize)
                 for name, shape in shapes.items())
    if needed > GENERATED_BYTES_LIMIT:
        largest = max(shapes, key=lambda name: prod(shapes[name]))
        raise CannotGenerate(f"the generated inputs would take {needed / 2**30:.1f} GiB (input {largest!r} "
                             f"{shapes[largest]}): give smaller --input-shapes or --load-inputs")
    rng = np.random.default_rng(seed)
    bounds = index_bounds(model, shapes)
    feeds = {}
    for name, shape in shapes.items():
        dtype = dtypes[name]
        if name in bounds:
            values: np.ndarray = rng.integers(-bounds[name], bounds[name], shape)
        elif dtype == object:
            values = rng.integers(0, 100, shape).astype(str)
        elif dtype == bool:
            values = rng.random(shape) < 0.5
        elif dtype.kind in "iu":
            values = rng.integers(0, 2, shape)
        else:
            values = rng.standard_normal(shape)
        feeds[name] = np.asarray(values).astype(dtype)  # a 0-d array, never a NumPy scalar, for rank 0
    return feeds
