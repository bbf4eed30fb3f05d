"""tf.gather and tf.gather_nd's shape rules (against TensorFlow: tests/peers/test_variants.py)."""

import numpy as np

from gathermultiaxis.ops.variants import tf_gathers as v

X = np.arange(24).reshape(2, 3, 4)


def test_gather_axis_defaults_to_batch_dims():
    indices = np.array([[2, 0], [1, 1]])
    np.testing.assert_array_equal(v.tf_gather(X, indices, batch_dims=1), np.stack([X[0, [2, 0]], X[1, [1, 1]]]))
    np.testing.assert_array_equal(v.tf_gather(X, indices, axis=2, batch_dims=-1),
                                  v.tf_gather(X, indices, axis=2, batch_dims=1))


def test_gather_nd_shape():
    indices = np.zeros((5, 2), np.int64)
    assert v.tf_gather_nd(X, indices).shape == (5, 4)
    assert v.tf_gather_nd(X, np.zeros((2, 5, 1), np.int64), batch_dims=1).shape == (2, 5, 4)
