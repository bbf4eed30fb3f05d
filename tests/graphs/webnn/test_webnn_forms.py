"""graphs/webnn/webnn_forms.py: each single-gather form, or the reason it does not fit."""

import numpy as np
from webnn_models import gather_multiaxis_model

from gathermultiaxis.graphs.lower import LowerReport
from gathermultiaxis.graphs.webnn.webnn_facts import WebNNLowering, node_facts
from gathermultiaxis.graphs.lower.form_plans import WEBNN_TARGET, CoordinatesPlan, GatherPlan, form_choices
from gathermultiaxis.graphs.webnn.webnn_forms import emit_plan, index_bounds
from gathermultiaxis.graphs.webnn.webnn_pass import facts_semantics


def _facts(data_shape, indices_shape, axes, mode="error"):
    model = gather_multiaxis_model(data_shape, indices_shape, axes, mode)
    lowering = WebNNLowering(model, LowerReport())
    return lowering, node_facts(lowering, model.graph.node[-1])


def test_gather_clamps_int32_indices():
    lowering, facts = _facts((5, 3), (2, 1), [0])
    low, high = index_bounds(facts)
    assert (int(low), int(high)) == (-5, 4)
    plan = form_choices(facts_semantics(facts), lowering.opset, WEBNN_TARGET)[0]
    assert plan == GatherPlan(0, (), (1,))
    nodes = emit_plan(lowering, facts, plan)
    ops = [node.op_type for node in nodes if node.op_type != "Constant"]
    assert ops == ["Reshape", "Min", "Max", "Cast", "Gather"]


def test_several_axes_take_gather_nd():
    lowering, facts = _facts((4, 5, 3), (2, 1, 2), [0, 1])
    gather, elements, nd = form_choices(facts_semantics(facts), lowering.opset, WEBNN_TARGET)
    assert (gather, elements) == ("not one Gather: several axes", "not one GatherElements: several axes")
    assert nd == CoordinatesPlan(0, False)
    nodes = emit_plan(lowering, facts, nd)
    assert nodes[-1].op_type == "GatherND" and nodes[-1].output[0] == "y"
    assert not any(node.op_type == "Cast" for node in nodes)  # int64 tuples: GatherND's one index type
    assert np.dtype(facts.index_dtype) == np.int64
