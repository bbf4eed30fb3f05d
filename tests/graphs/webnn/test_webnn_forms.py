"""graphs/webnn/webnn_forms.py: each single-gather form, or the reason it does not fit."""

import numpy as np
from webnn_models import gather_multiaxis_model

from gathermultiaxis.graphs.lower import LowerReport
from gathermultiaxis.graphs.webnn.webnn_facts import WebNNLowering, node_facts
from gathermultiaxis.graphs.webnn.webnn_forms import gather_elements_form, gather_form, gather_nd_form, index_bounds


def _facts(data_shape, indices_shape, axes, mode="error"):
    model = gather_multiaxis_model(data_shape, indices_shape, axes, mode)
    lowering = WebNNLowering(model, LowerReport())
    return lowering, node_facts(lowering, model.graph.node[-1])


def test_gather_clamps_int32_indices():
    lowering, facts = _facts((5, 3), (2, 1), [0])
    low, high = index_bounds(facts)
    assert (int(low), int(high)) == (-5, 4)
    nodes, form = gather_form(lowering, facts)
    ops = [node.op_type for node in nodes if node.op_type != "Constant"]
    assert form == "Gather" and ops == ["Reshape", "Min", "Max", "Cast", "Gather"]


def test_several_axes_take_gather_nd():
    lowering, facts = _facts((4, 5, 3), (2, 1, 2), [0, 1])
    assert gather_form(lowering, facts) == "not one Gather: several axes"
    assert gather_elements_form(lowering, facts) == "not one GatherElements: several axes"
    nodes, form = gather_nd_form(lowering, facts)
    assert form == "GatherND" and nodes[-1].op_type == "GatherND" and nodes[-1].output[0] == "y"
    assert not any(node.op_type == "Cast" for node in nodes)  # int64 tuples: GatherND's one index type
    assert np.dtype(facts.index_dtype) == np.int64
