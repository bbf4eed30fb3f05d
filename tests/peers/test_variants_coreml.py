"""coreml_gather, coreml_gather_along_axis, coreml_gather_nd against coremltools' own MIL ops: a
``mb.program`` over constants, whose ops compute their values at build time (``value_inference``) and
their shapes (``type_inference``). gather_nd has no value inference in coremltools (any opset): its
shapes come from MIL, its values from ORT's builtin GatherND (the same rule, negative indices included).
Where coremltools contradicts itself or crashes, the behaviour is pinned here and listed in the README's
"Upstream problems found"."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from sessions import builtin_session
from support import assert_bit_identical, make_model

from gathermultiaxis.ops import GatherIndexError, GatherShapeError
from gathermultiaxis.ops import variants as v

ct = pytest.importorskip("coremltools", reason="coremltools is not installed (pip install -e '.[peers]')")
from coremltools.converters.mil import Builder as mb  # noqa: E402

EXAMPLES = 150
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
INDEX_DTYPES = (np.int32, np.int16, np.int8, np.uint16, np.uint8)  # iOS17's index types (iOS16: no 8-bit)


def mil(opset, build):
    """Build a one-op MIL program over constants; return the op's output (value or None, shape)."""
    output = {}

    @mb.program(input_specs=[], opset_version=opset)
    def program():
        output["var"] = build()
        return output["var"]

    return output["var"].val, tuple(output["var"].shape)


def opset_for(index_dtype):
    return ct.target.iOS17 if np.dtype(index_dtype).itemsize == 1 else ct.target.iOS16


@st.composite
def arrays(draw, shape, low, high, dtype):
    seed = draw(st.integers(0, 2**32 - 1))
    return np.random.default_rng(seed).integers(low, high, shape, endpoint=False).astype(dtype)


@st.composite
def data_arrays(draw, min_rank=1):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=min_rank, max_size=4)))
    dtype = draw(st.sampled_from((np.float32, np.float16, np.int32)))
    return draw(arrays(shape, -100, 100, dtype))


def index_values(draw, shape, size, index_dtype, negative):
    low = -size if negative and np.dtype(index_dtype).kind == "i" else 0
    return draw(arrays(shape, low, size, index_dtype))


@st.composite
def gather_cases(draw):
    x = draw(data_arrays())
    r = x.ndim
    axis = draw(st.integers(-r, r - 1))
    batch_dims = draw(st.integers(0, axis % r))
    extra = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    index_dtype = draw(st.sampled_from(INDEX_DTYPES))
    negative = draw(st.booleans())
    indices = index_values(draw, x.shape[:batch_dims] + extra, x.shape[axis], index_dtype, negative)
    return x, indices, axis, batch_dims


def test_gather_against_mil_value_inference(report_line):
    counts = Counter()

    @SETTINGS
    @given(gather_cases())
    def check(case):
        x, indices, axis, batch_dims = case
        ours = v.coreml_gather(x, indices, axis, batch_dims)
        if axis < 0 and batch_dims > 0:
            # coremltools' value inference reads axis - batch_dims of each batch slice, wrong for a negative
            # axis (its type inference is right): it crashes or computes another gather. Count that, then
            # compare with the same call on the non-negative axis.
            counts["negative axis with batch_dims (coremltools wrong, pinned)"] += 1
            try:
                value, shape = mil(opset_for(indices.dtype), lambda: mb.gather(
                    x=x, indices=indices, axis=np.int32(axis), batch_dims=np.int32(batch_dims)))
                if np.shape(value) != shape or not np.array_equal(value, ours):
                    counts["... of which coremltools' value was wrong"] += 1
            except IndexError as error:  # NumPy's AxisError is an IndexError too
                counts[f"... of which coremltools raised {type(error).__name__}"] += 1
            axis %= x.ndim
        value, shape = mil(opset_for(indices.dtype), lambda: mb.gather(
            x=x, indices=indices, axis=np.int32(axis), batch_dims=np.int32(batch_dims)))
        assert ours.shape == shape  # MIL's type inference
        assert_bit_identical(ours, np.asarray(value, x.dtype).reshape(shape))
        counts["cases"] += 1
        counts["batch_dims > 0"] += batch_dims > 0
        counts["with negative indices"] += bool((indices < 0).any())
        counts["scalar indices"] += indices.ndim == 0

    check()
    report_line("CoreML gather vs coremltools MIL value inference: "
                + ", ".join(f"{n} {what}" for what, n in counts.items()))
    assert counts["batch_dims > 0"] and counts["with negative indices"]


@st.composite
def along_axis_cases(draw):
    x = draw(data_arrays())
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    shape = list(x.shape)
    shape[axis] = draw(st.integers(0, 4))
    index_dtype = draw(st.sampled_from(INDEX_DTYPES))
    return x, index_values(draw, tuple(shape), x.shape[axis], index_dtype, draw(st.booleans())), axis


def test_gather_along_axis_against_mil_value_inference(report_line):
    counts = Counter()

    @SETTINGS
    @given(along_axis_cases())
    def check(case):
        x, indices, axis = case
        ours = v.coreml_gather_along_axis(x, indices, axis)
        value, shape = mil(opset_for(indices.dtype), lambda: mb.gather_along_axis(x=x, indices=indices,
                                                                                 axis=np.int32(axis)))
        assert ours.shape == shape
        assert_bit_identical(ours, np.asarray(value, x.dtype).reshape(shape))
        counts["cases"] += 1
        counts["with negative indices"] += bool((indices < 0).any())
        counts["negative axis"] += axis < 0

    check()
    report_line("CoreML gather_along_axis vs coremltools MIL value inference: "
                + ", ".join(f"{n} {what}" for what, n in counts.items()))
    assert counts["with negative indices"]


@st.composite
def gather_nd_cases(draw):
    x = draw(data_arrays())
    batch_dims = draw(st.integers(0, x.ndim - 1))
    k = draw(st.integers(1, x.ndim - batch_dims))
    middle = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    index_dtype = draw(st.sampled_from(INDEX_DTYPES))
    negative = draw(st.booleans())
    columns = [index_values(draw, x.shape[:batch_dims] + middle + (1,), x.shape[batch_dims + j], index_dtype,
                            negative) for j in range(k)]
    return x, np.concatenate(columns, axis=-1), batch_dims


def ort_gather_nd(x, indices, batch_dims):
    element = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
               np.dtype(np.int32): TensorProto.INT32}[x.dtype]
    node = helper.make_node("GatherND", ["x", "indices"], ["y"], batch_dims=batch_dims)
    model = make_model([node], [helper.make_tensor_value_info("x", element, list(x.shape)),
                                helper.make_tensor_value_info("indices", TensorProto.INT64, list(indices.shape))],
                       [helper.make_tensor_value_info("y", element, None)], opset=13)
    return builtin_session(model).run(None, {"x": x, "indices": indices.astype(np.int64)})[0]


def test_gather_nd_against_mil_shapes_and_ort_values(report_line):
    counts = Counter()

    @SETTINGS
    @given(gather_nd_cases())
    def check(case):
        x, indices, batch_dims = case
        ours = v.coreml_gather_nd(x, indices, batch_dims)
        value, shape = mil(opset_for(indices.dtype), lambda: mb.gather_nd(x=x, indices=indices,
                                                                         batch_dims=np.int32(batch_dims)))
        assert value is None  # coremltools has no value inference for gather_nd: when it has, compare with it
        assert ours.shape == shape
        assert_bit_identical(ours, ort_gather_nd(x, indices, batch_dims))
        counts["cases"] += 1
        counts["batch_dims > 0"] += batch_dims > 0
        counts["with negative indices"] += bool((indices < 0).any())

    check()
    report_line("CoreML gather_nd vs coremltools MIL shapes + ORT GatherND values: "
                + ", ".join(f"{n} {what}" for what, n in counts.items()))
    assert counts["batch_dims > 0"] and counts["with negative indices"]


def test_gather_iOS15_without_batch_dims():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    indices = np.array([[2, -1], [0, -3]], np.int32)
    value, shape = mil(ct.target.iOS15, lambda: mb.gather(x=x, indices=indices, axis=np.int32(1)))
    assert_bit_identical(v.coreml_gather(x, indices, 1), np.asarray(value).reshape(shape))


# -- where coremltools contradicts itself or crashes: pinned ------------------------------------------

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_negative_indices_wrap_in_value_inference_but_fail_validate_indices():
    """The iOS17 gather docs say both "negative values are considered out-of-bound" and "Indices values
    may be negative": its value inference wraps them (np.take), its validate_indices check refuses them.
    coreml_gather does the same: wraps by default, raises with validate_indices=True."""
    indices = np.array([-1, 0], np.int32)
    value, _ = mil(ct.target.iOS17, lambda: mb.gather(x=X, indices=indices, axis=np.int32(2)))
    assert_bit_identical(v.coreml_gather(X, indices, 2), value)
    with pytest.raises(IndexError, match="out of bounds"):
        mil(ct.target.iOS17, lambda: mb.gather(x=X, indices=indices, axis=np.int32(2), validate_indices=True))
    with pytest.raises(GatherIndexError, match="negative"):
        v.coreml_gather(X, indices, 2, validate_indices=True)


def test_negative_axis_with_batch_dims_gives_a_value_of_the_wrong_shape():
    """coremltools 9.0 value inference (compute_gather) passes axis - batch_dims to each batch slice: for
    axis=-1, batch_dims=1 it reads the slice's axis -2. Its type inference says [2, 3, 2]."""
    indices = np.array([[0, 1], [1, 2]], np.int32)
    value, shape = mil(ct.target.iOS17, lambda: mb.gather(x=X, indices=indices, axis=np.int32(-1),
                                                          batch_dims=np.int32(1)))
    assert shape == (2, 3, 2) and value.shape == (2, 2, 4)
    assert v.coreml_gather(X, indices, -1, 1).shape == (2, 3, 2)


def test_batch_dims_beyond_axis_is_accepted_with_a_value_of_the_wrong_shape():
    """MIL checks batch_dims < rank(x) and <= rank(indices), not batch_dims <= axis: axis=0, batch_dims=1
    builds, with type [2, 3, 4] and a value of shape [2, 3, 2]. coreml_gather refuses it."""
    indices = np.array([[0, 1], [1, 2]], np.int32)
    value, shape = mil(ct.target.iOS17, lambda: mb.gather(x=X, indices=indices, axis=np.int32(0),
                                                          batch_dims=np.int32(1)))
    assert shape == (2, 3, 4) and value.shape == (2, 3, 2)
    with pytest.raises(ValueError, match="batch_dims"):
        v.coreml_gather(X, indices, 0, 1)


def test_gather_nd_validate_indices_checks_the_wrong_dims():
    """iOS17 gather_nd's validate_indices compares the coordinates with x.shape broadcast from the
    left (not x.shape[batch_dims:batch_dims + k]): with batch_dims=1 it refuses the valid index 2 of a
    size-3 dim (it compares it with dim 0, of size 2), and with fewer coordinates than x's rank it
    crashes on the broadcast (a NumPy ValueError). The negative-index guard pass has the same wrong dim
    (below)."""
    indices = np.array([[[0], [1]], [[0], [2]]], np.int32)
    with pytest.raises(IndexError, match="out of bounds"):
        mil(ct.target.iOS17, lambda: mb.gather_nd(x=X, indices=indices, batch_dims=np.int32(1),
                                                  validate_indices=True))
    assert v.coreml_gather_nd(X, indices, 1, validate_indices=True).shape == (2, 2, 4)
    with pytest.raises(ValueError, match="broadcast"):
        mil(ct.target.iOS17, lambda: mb.gather_nd(x=X, indices=np.array([[0, 1]], np.int32), validate_indices=True))
    assert_bit_identical(v.coreml_gather_nd(X, np.array([[0, 1]], np.int32), validate_indices=True), X[0:1, 1])


def test_gather_along_axis_refuses_smaller_indices():
    """MIL's gather_along_axis asserts equal sizes off the axis (an AssertionError; coremltools PR 2841:
    torch.gather with smaller indices fails it), although its value inference (np.take_along_axis) would
    broadcast. coreml_gather_along_axis refuses them too, with a GatherShapeError."""
    indices = np.zeros((1, 3, 1), np.int32)
    with pytest.raises(AssertionError, match="same size"):
        mil(ct.target.iOS17, lambda: mb.gather_along_axis(x=X, indices=indices, axis=np.int32(2)))
    with pytest.raises(GatherShapeError, match="sizes"):
        v.coreml_gather_along_axis(X, indices, 2)


def test_out_of_range_indices_raise():
    """CoreML leaves them undefined (validate_indices=False); coremltools' value inference raises NumPy's
    IndexError, coreml_gather a GatherIndexError."""
    with pytest.raises(IndexError):
        mil(ct.target.iOS17, lambda: mb.gather(x=X, indices=np.array([3], np.int32), axis=np.int32(1)))
    for call in (lambda: v.coreml_gather(X, np.array([3], np.int32), 1),
                 lambda: v.coreml_gather_along_axis(X, np.full((2, 1, 4), -4, np.int8), 1),
                 lambda: v.coreml_gather_nd(X, np.array([[2]], np.int16))):
        with pytest.raises(GatherIndexError):
            call()


def test_negative_index_guard_pass_offsets_gather_nd_from_the_wrong_dim():
    """coremltools' pass common::guard_negative_gather_indices (which rewrites negative indices for iOS17)
    adds x.shape[j] to coordinate j of gather_nd, not x.shape[batch_dims + j] (coremltools PR 2794): with
    batch_dims=1 on x [2, 5, 3], -1 becomes 1 instead of 4. coreml_gather_nd reads row 4."""
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

    x = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    indices = np.array([[[-1], [0]], [[-1], [1]]], np.int32)

    @mb.program(input_specs=[], opset_version=ct.target.iOS17)
    def program():
        return mb.gather_nd(x=x, indices=indices, batch_dims=np.int32(1))

    PASS_REGISTRY["common::guard_negative_gather_indices"](program)
    PASS_REGISTRY["common::const_elimination"](program)
    (gather_nd,) = [op for op in program.functions["main"].operations if op.op_type == "gather_nd"]
    guarded = gather_nd.indices.val
    assert guarded.tolist() == [[[1], [0]], [[1], [1]]]  # the right offsets would give [[[4], [0]], [[4], [1]]]
    assert_bit_identical(v.coreml_gather_nd(x, indices, 1), v.coreml_gather_nd(x, indices % 5, 1))
    assert not np.array_equal(v.coreml_gather_nd(x, guarded, 1), v.coreml_gather_nd(x, indices, 1))


def test_wide_unsigned_indices_are_refused_or_range_checked_as_coremltools_does():
    """coremltools refuses uint32 indices (type domain) in every opset; a uint64 constant it narrows to
    int32 by clamping, so 2**32 + 1 and 2**64 - 1 are out of bounds (value inference: IndexError). The
    variants used to wrap them (astype(int32)) to rows 1 and -1."""
    for opset in (ct.target.iOS15, ct.target.iOS17):
        with pytest.raises(ValueError, match="dtype"):
            mil(opset, lambda: mb.gather(x=X, indices=np.array([1], np.uint32), axis=np.int32(1)))
        for index in (2**32 + 1, 2**64 - 1):
            indices = np.array([index, 0], np.uint64)
            with pytest.raises(IndexError, match="out of bounds"):
                mil(opset, lambda: mb.gather(x=X, indices=indices, axis=np.int32(1)))
            with pytest.raises(IndexError, match="out of bounds"):
                mil(opset, lambda: mb.gather_along_axis(x=X, indices=np.full((2, 3, 1), index, np.uint64),
                                                        axis=np.int32(2)))
    for index in (2**32 + 1, 2**64 - 1):
        for check in (False, True):
            with pytest.raises(GatherIndexError, match="out of range"):
                v.coreml_gather(X, np.array([index, 0], np.uint64), 1, validate_indices=check)
            with pytest.raises(GatherIndexError, match="out of range"):
                v.coreml_gather_along_axis(X, np.full((2, 3, 1), index, np.uint64), 2, validate_indices=check)
            with pytest.raises(GatherIndexError, match="out of range"):
                v.coreml_gather_nd(X, np.array([[index]], np.uint64), validate_indices=check)
    with pytest.raises(TypeError, match="uint32"):
        v.coreml_gather(X, np.array([1], np.uint32), 1)
    assert_bit_identical(v.coreml_gather(X, np.array([2, 0], np.uint64), 1),
                         mil(ct.target.iOS17, lambda: mb.gather(x=X, indices=np.array([2, 0], np.uint64),
                                                                axis=np.int32(1)))[0])
