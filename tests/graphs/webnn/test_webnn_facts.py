"""graphs/webnn/webnn_facts.py: a node's static facts, the value range of integer tensors, the zero modes."""

import numpy as np
import pytest
from onnx import helper, numpy_helper
from webnn_models import gather_multiaxis_model

from gathermultiaxis.graphs.lower import LowerReport
from gathermultiaxis.graphs.webnn.webnn_facts import (EmptyOutput, NotLoweredForWebNN, WebNNLowering, node_facts,
                                                      reads_zero, value_range, zero_fills)
from gathermultiaxis.ops import Mode


def test_only_zero_reads_zero():
    assert [mode for mode in Mode if zero_fills(mode)] == [Mode.ZERO]
    assert reads_zero("zero") and not reads_zero("clamp") and not reads_zero(None) and not reads_zero("wrap")


def test_value_range_through_arithmetic():
    nodes = [helper.make_node("Add", ["c", "d"], ["s"]), helper.make_node("Concat", ["s", "c"], ["i"], axis=0)]
    model = gather_multiaxis_model((5,), (4,), [0], nodes=nodes,
                                   initializers=[numpy_helper.from_array(np.array([0, 2], np.int64), "c"),
                                                 numpy_helper.from_array(np.array([1, -1], np.int64), "d")])
    model.graph.input.pop()  # i is computed
    lowering = WebNNLowering(model, LowerReport())
    assert value_range(lowering, "s") == (-1, 3) and value_range(lowering, "i") == (-1, 3)
    facts = node_facts(lowering, model.graph.node[-1])
    assert facts.axes == (0,) and facts.out == (4,) and facts.mode == Mode.ERROR


def test_facts_refuse_what_webnn_has_not():
    model = gather_multiaxis_model((2, 1, 1, 1, 1, 3), (2, 1, 1, 1, 1, 1), [5])
    with pytest.raises(NotLoweredForWebNN, match="rank 6 > 5"):
        node_facts(WebNNLowering(model, LowerReport()), model.graph.node[-1])
    empty = gather_multiaxis_model((2, 3), (1, 0), [1])
    with pytest.raises(EmptyOutput):
        node_facts(WebNNLowering(empty, LowerReport()), empty.graph.node[-1])
