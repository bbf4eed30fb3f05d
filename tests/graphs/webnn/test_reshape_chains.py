"""graphs/webnn/reshape_chains.py: the values a tensor is a reshape of, and reshapes' static output shapes."""

import numpy as np
from onnx import helper, numpy_helper
from webnn_models import gather_multiaxis_model

from gathermultiaxis.graphs.lower import LowerReport
from gathermultiaxis.graphs.webnn.reshape_chains import reshape_chain, reshaped_shape
from gathermultiaxis.graphs.webnn.webnn_facts import WebNNLowering


def test_reshaped_shapes():
    lowering = WebNNLowering(gather_multiaxis_model((2,), (1,), [0]), LowerReport())
    assert reshaped_shape(lowering, helper.make_node("Flatten", ["a"], ["b"], axis=2), (2, 3, 4)) == (6, 4)
    assert reshaped_shape(lowering, helper.make_node("Squeeze", ["a"], ["b"]), (1, 3, 1)) == (3,)
    assert reshaped_shape(lowering, helper.make_node("Unsqueeze", ["a"], ["b"], axes=[0, -1]), (3,)) == (1, 3, 1)


def test_the_chain_of_reshapes_behind_a_value():
    nodes = [helper.make_node("Reshape", ["j", "shape"], ["i"])]
    model = gather_multiaxis_model((5, 3), (2, 1), [0], nodes=nodes,
                                   initializers=[numpy_helper.from_array(np.array([2, 1], np.int64), "shape")])
    model.graph.input[1].name = "j"
    model.graph.input[1].type.tensor_type.shape.dim.pop()
    lowering = WebNNLowering(model, LowerReport())
    assert reshape_chain(lowering, "i") == [("i", (2, 1)), ("j", (2,))]
