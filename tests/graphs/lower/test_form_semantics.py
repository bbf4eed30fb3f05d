"""graphs/lower/form_semantics.py: the role of each dimension off the axes, from the statically known sizes."""

import pytest
from onnx import TensorProto

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.lower.form_semantics import NoForm, Role, Semantics, refuse_unknown_roles
from gathermultiaxis.ops import Mode


def _semantics(data, indices, axes, mode=Mode.ERROR):
    return Semantics(len(data), tuple(axes), mode, TensorInfo(TensorProto.FLOAT, tuple(data)),
                     TensorInfo(TensorProto.INT64, tuple(indices)))


def test_roles_from_known_sizes():
    semantics = _semantics((1, 4, 1, 5, 6, "n"), (1, 1, 3, 5, 7, 2), [4])
    assert semantics.roles() == {0: Role.ONE, 1: Role.COPY, 2: Role.INDEX, 3: Role.BATCH, 5: Role.UNKNOWN}
    with pytest.raises(NoForm, match="dimension 5 are not known"):
        refuse_unknown_roles(semantics.roles())


def test_the_last_dimension_holds_the_tuples():
    semantics = _semantics((3, 4, 1), (1, 1, 6), [0, 1])
    assert semantics.indices_size(2) == 6 and semantics.logical_size(2) == 3 and semantics.role(2) == Role.INDEX
    assert semantics.copy_sizes_nonzero([0, 1]) and not _semantics((0, 4), (1, 1), [1]).copy_sizes_nonzero([0])
