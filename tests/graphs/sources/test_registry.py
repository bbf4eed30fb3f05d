"""graphs.sources.registry: the rules alone, ``TensorInfo`` in, ``Replacement`` out, no ORT. Each replacement's
alignment, applied with NumPy and the kernel, must give what NumPy's own gather gives."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.rewrite.replacement import emit_replacement
from gathermultiaxis.graphs.sources.registry import RULES
from gathermultiaxis.graphs.sources.source_gather import Replacement
from gathermultiaxis.ops import Mode, gather_multiaxis
from gathermultiaxis.ops.alignment import AlignmentError

F = TensorProto.FLOAT


def apply(replacement: Replacement, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """The replacement as the rewritten graph computes it (Slice, Unsqueeze, GatherMultiaxis, Squeeze)."""
    alignment = replacement.alignment
    if replacement.slice_data_except is not None:
        data = data[tuple(slice(None) if d == replacement.slice_data_except else slice(0, size)
                          for d, size in enumerate(indices.shape))]
    data = np.expand_dims(data, alignment.data_unsqueeze) if alignment.data_unsqueeze else data
    indices = np.expand_dims(indices, alignment.indices_unsqueeze) if alignment.indices_unsqueeze else indices
    output = gather_multiaxis(data, indices, list(alignment.axes), replacement.mode)
    return np.squeeze(output, alignment.output_squeeze) if alignment.output_squeeze else output


def info(array: np.ndarray, symbolic: bool = False) -> TensorInfo:
    return TensorInfo(F, tuple(f"d{i}" for i in range(array.ndim)) if symbolic else array.shape)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_gather_rule(data):
    rank = data.draw(st.integers(1, 4))
    shape = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    axis = data.draw(st.integers(-rank, rank - 1))
    indices_shape = data.draw(st.lists(st.integers(0, 3), min_size=0, max_size=3))
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    i = np.random.default_rng(0).integers(-shape[axis], shape[axis], indices_shape)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)
    replacement = RULES["Gather"](node, info(x, data.draw(st.booleans())), info(i))
    assert replacement.mode == Mode.ERROR and replacement.slice_data_except is None
    np.testing.assert_array_equal(apply(replacement, x, i), np.take(x, i, axis=axis))


@pytest.mark.parametrize("indices_shape, declared, sliced", [
    ((2, 3, 4), "static", False),     # same sizes, known: no Slice
    ((2, 2, 4), "static", True),      # smaller on a non-axis dim: the data is cut first
    ((2, 3, 4), "symbolic", True),    # equal names are not equal sizes to ORT: cut anyway
])
def test_gather_elements_rule(indices_shape, declared, sliced):
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    i = np.random.default_rng(1).integers(-5, 5, indices_shape)
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=-1)
    replacement = RULES["GatherElements"](node, info(x, declared == "symbolic"), info(i, declared == "symbolic"))
    assert (replacement.slice_data_except is not None) == sliced and replacement.alignment.axes == (2,)
    crop = x[:, :indices_shape[1], :]
    np.testing.assert_array_equal(apply(replacement, x, i), np.take_along_axis(crop, np.where(i < 0, i + 5, i), -1))


@pytest.mark.parametrize("batch_dims, data_shape, indices_shape", [
    (0, (3, 4, 5), (2, 2)), (0, (3, 4, 5), (6, 3)), (1, (2, 4, 5), (2, 3, 1)), (2, (2, 3, 4, 5), (2, 3, 2)),
])
def test_gather_nd_rule(batch_dims, data_shape, indices_shape):
    x = np.arange(np.prod(data_shape), dtype=np.float32).reshape(data_shape)
    k = indices_shape[-1]
    rng = np.random.default_rng(2)
    i = np.stack([rng.integers(0, data_shape[batch_dims + j], indices_shape[:-1]) for j in range(k)], -1) \
        if k else np.zeros(indices_shape, np.int64)
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)
    replacement = RULES["GatherND"](node, info(x, True), TensorInfo(TensorProto.INT64, (*("n",) * (len(i.shape) - 1), k)))
    assert replacement.mode == Mode.ERROR_NONEMPTY
    # NumPy's own GatherND: over the batch dims, index the next k dims by each coordinate tuple
    b = batch_dims
    flat_x = x.reshape(-1, *data_shape[b:])
    flat_i = i.reshape(flat_x.shape[0], -1, k)
    rows = [xb[tuple(ib[:, j] for j in range(k))] for xb, ib in zip(flat_x, flat_i)]
    expected = np.stack(rows).reshape(*indices_shape[:-1], *data_shape[b + k:])
    np.testing.assert_array_equal(apply(replacement, x, i), expected)


def test_gather_nd_rule_needs_a_known_nonzero_coordinate_size():
    """A symbolic k goes to the run-time alignment; k = 0 (whole slices) has no static alignment."""
    node = helper.make_node("GatherND", ["x", "i"], ["y"])
    with pytest.raises(Exception, match="coordinate size"):
        RULES["GatherND"](node, TensorInfo(F, (3, 4)), TensorInfo(TensorProto.INT64, (2, "k")))
    with pytest.raises(AlignmentError, match="empty coordinate tuples"):
        RULES["GatherND"](node, TensorInfo(F, (3, 4)), TensorInfo(TensorProto.INT64, (5, 0)))


def test_gather_block_quantized_is_the_opt_in_rule_of_the_table():
    """GatherBlockQuantized is an entry of RULES like the ONNX gathers, applied only when asked for; its
    rule is used alone too: TensorInfo in, the replacement's nodes and output type out, no ORT."""
    from gathermultiaxis.graphs import GATHER_OPS, OPT_IN_OPS, LeftUnchanged
    from gathermultiaxis.graphs.ir.builder import NameScope, NodeBuilder
    from gathermultiaxis.graphs.sources.source_gather import OptInRule

    assert GATHER_OPS == ("Gather", "GatherElements", "GatherND") and OPT_IN_OPS == ("GatherBlockQuantized",)
    rule = RULES["GatherBlockQuantized"]
    assert isinstance(rule, OptInRule) and rule.domain == "com.microsoft"
    infos = {"data": TensorInfo(TensorProto.UINT8, (6, 16)), "indices": TensorInfo(TensorProto.INT64, ("n", 3)),
             "scales": TensorInfo(TensorProto.FLOAT16, (6, 1))}
    node = helper.make_node("GatherBlockQuantized", ["data", "indices", "scales"], ["out"], domain="com.microsoft",
                            gather_axis=0, quantize_axis=1, block_size=32, bits=4)
    builder = NodeBuilder(13, NameScope({"data", "indices", "scales", "out"}), "gbq")
    output = rule.emit(node, infos, builder, emit_replacement)
    assert output == TensorInfo(TensorProto.FLOAT16, ("n", 3, 32))  # 16 bytes of two 4-bit codes each
    assert builder.nodes[-1].output[0] == "out"
    assert sum(n.op_type == "GatherMultiaxis" for n in builder.nodes) == 3  # data rows, scale rows, scale per code
    refused = helper.make_node("GatherBlockQuantized", ["data", "indices", "scales"], ["out"], domain="com.microsoft",
                               block_size=24)
    with pytest.raises(LeftUnchanged, match="block_size 24 is not a power of 2"):
        rule.emit(refused, infos, NodeBuilder(13, NameScope(set()), "gbq"), emit_replacement)


def test_every_backend_table_is_derived_from_the_sources():
    """A source op is one record plus one line in SOURCES: the rewrite's, the rank layers' and the lowering's
    tables hold exactly what the records say, and nothing else."""
    from gathermultiaxis.graphs import GATHER_OPS, OPT_IN_OPS, RULES as PUBLIC_RULES, provenance
    from gathermultiaxis.graphs.lower import recorded_form
    from gathermultiaxis.graphs.rewrite import rank_layers
    from gathermultiaxis.graphs.sources import registry
    from gathermultiaxis.graphs.sources.source_gather import Rewrite

    sources = registry.SOURCES
    assert len({(s.domain, s.op_type) for s in sources}) == len(sources)  # each op registered once
    assert PUBLIC_RULES is registry.RULES and GATHER_OPS is registry.GATHER_OPS and OPT_IN_OPS is registry.OPT_IN_OPS
    assert list(registry.RULES) == [s.op_type for s in sources if s.rule is not None]
    assert GATHER_OPS == tuple(s.op_type for s in sources if s.rewrite is Rewrite.DEFAULT)
    assert OPT_IN_OPS == tuple(s.op_type for s in sources if s.rewrite is Rewrite.OPT_IN)
    assert set(registry.INTERNAL_GATHERS) == {(s.domain, s.op_type) for s in sources if s.rewrite is not Rewrite.DEFAULT}
    for source in sources:
        key = (source.domain, source.op_type)
        if source.rewrite is Rewrite.DEFAULT:
            assert registry.RULES[source.op_type] is source.align and source.align_at_run_time is not None
            assert source.mode is not None and source.recorded_attributes
        if source.rewrite is Rewrite.OPT_IN:
            assert registry.RULES[source.op_type] is source.opt_in and source.why_not
        if source.rewrite is Rewrite.NEVER:
            assert source.rule is None and source.why_not
            assert registry.INTERNAL_GATHERS[key] == source.why_not
        if source.rank_rule is not None:
            assert rank_layers.RANK_RULES[key] is source.rank_rule
        if source.recorded_attributes:  # what lower gives back
            assert recorded_form.OP_OPSET[source.op_type] == source.first_opset
            assert provenance.RECORDED_ATTRIBUTES[source.op_type] == source.recorded_attributes
    assert set(recorded_form.OP_OPSET) == set(provenance.RECORDED_ATTRIBUTES) == {
        s.op_type for s in sources if s.recorded_attributes}


def test_source_of_finds_a_node_s_record():
    from gathermultiaxis.graphs.sources.registry import source_of

    assert source_of(helper.make_node("GatherND", ["x", "i"], ["y"], domain="ai.onnx")).op_type == "GatherND"
    internal = source_of(helper.make_node("GatherND", ["x", "i"], ["y"], domain="com.microsoft"))
    assert internal is not None and "training" in internal.why_not
    assert source_of(helper.make_node("Gather", ["x", "i"], ["y"], domain="com.example")) is None
