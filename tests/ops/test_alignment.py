"""ops.alignment: each classic gather, aligned as the Alignment says and read by gatherMultiaxis, gives what
onnx's reference evaluator gives for the classic op."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from gathermultiaxis.ops.alignment import (GATHER, GATHER_ELEMENTS, GATHER_ND, AlignmentError, gather_alignment,
                                           gather_elements_alignment, gather_nd_alignment, normalized_axis)
from gathermultiaxis.ops.reference import reference_gather_multiaxis


def onnx_gather(op_type, data, indices, **attributes):
    node = helper.make_node(op_type, ["data", "indices"], ["output"], **attributes)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("data", TensorProto.FLOAT, None),
                                            helper.make_tensor_value_info("indices", TensorProto.INT64, None)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return ReferenceEvaluator(model).run(None, {"data": data, "indices": indices})[0]


def aligned(alignment, data, indices):
    data = np.expand_dims(data, alignment.data_unsqueeze) if alignment.data_unsqueeze else data
    indices = np.expand_dims(indices, alignment.indices_unsqueeze) if alignment.indices_unsqueeze else indices
    out = reference_gather_multiaxis(data, indices, alignment.axes)
    return np.squeeze(out, alignment.output_squeeze) if alignment.output_squeeze else out


def test_op_type_constants_are_the_onnx_names():
    assert (GATHER, GATHER_ELEMENTS, GATHER_ND) == ("Gather", "GatherElements", "GatherND")


@pytest.mark.parametrize("data_shape,indices_shape,axis", [
    ((5,), (3,), 0), ((4, 5), (2, 3), 1), ((4, 5, 2), (), 1), ((3, 4, 2), (2,), -1), ((3, 4), (2, 1, 2), 0)])
def test_gather_alignment_matches_onnx_gather(data_shape, indices_shape, axis):
    rng = np.random.default_rng(0)
    data = rng.standard_normal(data_shape).astype(np.float32)
    indices = rng.integers(0, data_shape[axis], indices_shape).astype(np.int64)
    alignment = gather_alignment(len(data_shape), len(indices_shape), axis)
    got = aligned(alignment, data, indices)
    np.testing.assert_array_equal(got, onnx_gather("Gather", data, indices, axis=axis))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_alignment_matches_onnx(axis):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 4, 2)).astype(np.float32)
    indices = rng.integers(0, data.shape[axis], (3, 4, 2)).astype(np.int64)
    alignment = gather_elements_alignment(3, 3, axis)
    assert alignment.axes == (axis % 3,)
    np.testing.assert_array_equal(aligned(alignment, data, indices),
                                  onnx_gather("GatherElements", data, indices, axis=axis))


@pytest.mark.parametrize("data_shape,lead,k,batch_dims", [
    ((4, 5), (3,), 2, 0), ((4, 5, 2), (3,), 1, 0), ((4, 5), (2, 3), 1, 0), ((2, 4, 5), (2,), 1, 1),
    ((2, 4, 5), (2, 3), 2, 1)])
def test_gather_nd_alignment_matches_onnx(data_shape, lead, k, batch_dims):
    rng = np.random.default_rng(2)
    data = rng.standard_normal(data_shape).astype(np.float32)
    columns = [rng.integers(0, data_shape[batch_dims + j], lead) for j in range(k)]
    indices = np.stack(columns, axis=-1).astype(np.int64)
    alignment = gather_nd_alignment(len(data_shape), indices.ndim, k, batch_dims)
    np.testing.assert_array_equal(aligned(alignment, data, indices),
                                  onnx_gather("GatherND", data, indices, batch_dims=batch_dims))


def test_invalid_ranks_and_attributes_raise():
    assert normalized_axis(-1, 3) == 2
    for call in (lambda: normalized_axis(3, 3), lambda: gather_alignment(0, 1, 0),
                 lambda: gather_alignment(2, 1, 0, batch_dims=1), lambda: gather_elements_alignment(2, 3, 0),
                 lambda: gather_nd_alignment(2, 0, 1), lambda: gather_nd_alignment(2, 2, 0),
                 lambda: gather_nd_alignment(2, 2, 3)):
        with pytest.raises(AlignmentError):
            call()
    assert issubclass(AlignmentError, ValueError)
