"""jax_gather (StableHLO gather) as one gatherMultiaxis call: the StableHLO specification's examples, fill
and clip, and bad calls refused as JAX refuses them. Against JAX itself: tests/peers/test_variants_jax.py."""

import re
import subprocess
import sys

import numpy as np
import pytest
from support import assert_bit_identical

from gathermultiaxis.ops import GatherShapeError
from gathermultiaxis.ops.variants import jax_gathers as v
from gathermultiaxis.ops.variants import variant_steps

# -- the StableHLO specification's examples (docs/spec.md, stablehlo/tests/interpret/gather.mlir) ---

SPEC_OPERAND_3x4x2 = np.arange(1, 25).reshape(3, 4, 2)
SPEC_EXAMPLES = {
    # interpret/gather.mlir @gather_op_test: index_vector_dim = 2 (the last), [0, 9] is clamped to [0, 2]
    "gather_op_test": (
        SPEC_OPERAND_3x4x2, [[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
        v.GatherDimensionNumbers(offset_dims=(2, 3), collapsed_slice_dims=(0,), start_index_map=(1, 0)),
        (1, 2, 2),
        [[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
         [[[9, 10], [11, 12]], [[11, 12], [13, 14]], [[17, 18], [19, 20]]]]),
    # spec.md's example of gather (= interpret/gather.mlir @gather_op_with_batching_dim_test), index_vector_dim = 3
    "spec_with_batching_dims": (
        np.arange(1, 49).reshape(2, 3, 4, 2),
        [[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]], [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]],
        v.GatherDimensionNumbers(offset_dims=(3, 4), collapsed_slice_dims=(1,), start_index_map=(2, 1),
                                 operand_batching_dims=(0,), start_indices_batching_dims=(1,)),
        (1, 1, 2, 2),
        [[[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
          [[[33, 34], [35, 36]], [[35, 36], [37, 38]], [[41, 42], [43, 44]]]],
         [[[[1, 2], [3, 4]], [[13, 14], [15, 16]], [[21, 22], [23, 24]]],
          [[[43, 44], [45, 46]], [[33, 34], [35, 36]], [[27, 28], [29, 30]]]]]),
}


@pytest.mark.parametrize("name", sorted(SPEC_EXAMPLES))
def test_stablehlo_spec_examples(name):
    operand, start_indices, dimension_numbers, slice_sizes, expected = SPEC_EXAMPLES[name]
    for dtype in (np.int32, np.int64):
        result = v.jax_gather(operand.astype(dtype), np.array(start_indices), dimension_numbers, slice_sizes)
        assert_bit_identical(result, np.array(expected, dtype))


def test_fill_mode_fills_whole_windows_that_leave_the_operand():
    operand = np.arange(12, dtype=np.float32).reshape(4, 3)
    numbers = v.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0,))
    result = v.jax_gather(operand, np.array([[0], [2], [3], [-1]]), numbers, (2, 3), mode="fill")
    expected = np.stack([operand[0:2], operand[2:4], np.full((2, 3), np.nan, np.float32),
                         np.full((2, 3), np.nan, np.float32)])
    assert_bit_identical(result, expected)
    clipped = v.jax_gather(operand, np.array([[3], [-1]]), numbers, (2, 3))
    assert_bit_identical(clipped, np.stack([operand[2:4], operand[0:2]]))


def test_fill_defaults():
    numbers = v.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    for dtype, fill in [(np.float32, np.nan), (np.complex64, np.nan), (np.int8, -128), (np.int64, -2**63),
                        (np.uint16, 65535), (np.bool_, True)]:
        result = v.jax_gather(np.zeros(3, dtype), np.array([[5]]), numbers, (1,), mode="fill")
        assert_bit_identical(result, np.array([fill], dtype))
        assert_bit_identical(v.jax_gather(np.zeros(3, dtype), np.array([[5]]), numbers, (1,), "fill", 1),
                             np.array([1], dtype))
    assert_bit_identical(v.jax_gather(np.ones(3), np.array([[5], [2]]), numbers, (1,), "drop"), np.array([np.nan, 1]))


@pytest.mark.parametrize("mode", [None, "promise_in_bounds", "one_hot", "wrap"])
def test_modes_other_than_clip_and_fill_are_refused(mode):
    numbers = v.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    with pytest.raises(ValueError, match="clip"):
        v.jax_gather(np.zeros(3), np.array([[1]]), numbers, (1,), mode=mode)


def test_one_gather_multiaxis_call_per_jax_gather():
    operand, start_indices, dimension_numbers, slice_sizes, _ = SPEC_EXAMPLES["spec_with_batching_dims"]
    for mode in ("clip", "fill"):
        with variant_steps.trace() as steps:
            v.jax_gather(operand, np.array(start_indices), dimension_numbers, slice_sizes, mode)
        assert [step.variant for step in steps] == [f"jax_gather ({mode})"]


# -- bad input: each refused with a message naming the problem, as JAX refuses it -------------------

def _numbers(offset=(), collapsed=(0,), start_index_map=(0,), operand_batching=(), indices_batching=()):
    return v.GatherDimensionNumbers(offset, collapsed, start_index_map, operand_batching, indices_batching)


BAD_CALLS = {  # operand shape, start_indices, dimension numbers, slice sizes, words of the message
    "slice larger than dim": ((3, 4), [[0]], _numbers(offset=(1,)), (1, 5), "outside [0, 4]"),
    "offset_dims unsorted": ((3, 4, 5), [[0]], _numbers(offset=(2, 1)), (1, 4, 5), "must be sorted"),
    "offset_dims out of range": ((3, 4), [[0]], _numbers(offset=(2,)), (1, 4), "not a dimension of the rank-2"),
    "index vector too long": ((3, 4), [[0, 1]], _numbers(offset=(1,)), (1, 4), "start_index_map has 1"),
    "start_index_map repeats": ((3, 4), [[0, 0]], _numbers(offset=(1,), start_index_map=(0, 0)), (1, 4),
                                "twice"),
    "collapsed slice not 1": ((3, 4), [[0]], _numbers(offset=(1,)), (2, 4), "slice size 1"),
    "missing offset dim": ((3, 4), [[0]], _numbers(), (1, 4), "offset_dims must name"),
    "batching sizes differ": ((2, 4), [[0], [1], [2]], _numbers(collapsed=(1,), start_index_map=(1,),
                                                                operand_batching=(0,), indices_batching=(0,)),
                              (1, 1), "equal sizes"),
    "batching dim indexed": ((2, 4), [[0], [1]], _numbers(collapsed=(), start_index_map=(0,), offset=(1,),
                                                          operand_batching=(0,), indices_batching=(0,)),
                             (1, 4), "disjoint"),
    "batching on index vector": ((2, 4), [[0], [1]], _numbers(collapsed=(1,), start_index_map=(1,),
                                                              operand_batching=(0,), indices_batching=(1,)),
                                 (1, 1), "not a dimension of start_indices"),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_calls_are_refused_like_jax(name):
    shape, start_indices, numbers, slice_sizes, words = BAD_CALLS[name]
    with pytest.raises(GatherShapeError, match=re.escape(words)):
        v.jax_gather(np.zeros(shape, np.float32), np.array(start_indices), numbers, slice_sizes)
    try:
        import jax
    except ImportError:
        return
    jax_numbers = jax.lax.GatherDimensionNumbers(*(getattr(numbers, f) for f in numbers.__dataclass_fields__))
    with pytest.raises((TypeError, ValueError)):
        jax.lax.gather(np.zeros(shape, np.float32), np.array(start_indices), jax_numbers, slice_sizes,
                       mode="clip")


def test_jax_is_never_imported():
    code = ("import sys, numpy as np\n"
            "from gathermultiaxis.ops import variants as v\n"
            "numbers = v.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))\n"
            "v.jax_gather(np.zeros(3), np.array([[7]]), numbers, (1,), 'fill')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib')))\n")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "[]"


def test_float_start_indices_are_refused():
    with pytest.raises(TypeError, match="integer dtype"):
        v.jax_gather(np.zeros(3), np.array([[1.0]]), _numbers(), (1,))


def test_layout_places_collapsed_dims_last_and_batching_dims_on_their_batch_dim():
    numbers = v.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1, 2),
                                       operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    layout = v.JaxGatherLayout.infer((2, 3, 4), (2, 5, 2), numbers, (1, 1, 2))
    assert layout.output_shape == (2, 5, 2) and layout.start_shape == (2, 5, 1, 1)
    assert layout.order == (0, 2, 1) and layout.missing == (1,) and layout.axes == (3, 2)
    assert layout.windows == (1, 2) and layout.upper_bounds == (2, 2)


def test_the_fill_value_of_a_dtype_jax_has_none_for():
    numbers = v.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    with pytest.raises(TypeError, match="no fill value"):
        v.jax_gather(np.array(["a", "b"]), np.array([[5]]), numbers, (1,), mode="fill")
