"""graphs/webnn/webnn_ops.py: the WebNN EP's op table and the inputs it needs constant."""

from onnx import TensorProto

from gathermultiaxis.graphs.webnn.webnn_ops import CONSTANT_INPUTS, NO_WEBNN_TYPES, RESHAPES, WEBNN_OPS
from gathermultiaxis.ops.alignment import GATHER, GATHER_ELEMENTS, GATHER_ND


def test_the_three_gathers_map_onto_webnn_ops():
    assert [WEBNN_OPS[op] for op in (GATHER, GATHER_ELEMENTS, GATHER_ND)] == ["gather", "gatherElements", "gatherND"]
    assert "GatherMultiaxis" not in WEBNN_OPS and RESHAPES <= set(WEBNN_OPS)


def test_constant_inputs_cover_every_reduction():
    assert CONSTANT_INPUTS["Reshape"] == (1,) and CONSTANT_INPUTS["ReduceSum"] == (1,)
    assert all(op in WEBNN_OPS for op in CONSTANT_INPUTS)
    assert TensorProto.STRING in NO_WEBNN_TYPES and TensorProto.FLOAT16 not in NO_WEBNN_TYPES
