"""graphs/webnn/flat_offsets.py: the general form, one gather of the flat data, bit for bit the kernel's."""

import numpy as np
import pytest
from webnn_models import gather_multiaxis_model

from gathermultiaxis.graphs.lower import LowerReport
from gathermultiaxis.graphs.webnn.flat_offsets import flat_offsets
from gathermultiaxis.graphs.webnn.webnn_facts import WebNNLowering, node_facts
from gathermultiaxis.harness import make_session
from gathermultiaxis.ops import gather_multiaxis


@pytest.mark.parametrize("mode", ["clamp", "zero"])
def test_flat_offsets_read_what_the_kernel_reads(mode):
    model = gather_multiaxis_model((3, 4, 5), (3, 1, 2), [0, 2], mode)
    lowering = WebNNLowering(model, LowerReport())
    nodes = flat_offsets(lowering, node_facts(lowering, model.graph.node[-1]))
    assert nodes[-1].op_type == "Gather" and nodes[-1].output[0] == "y"
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    del model.opset_import[1:]
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    i = np.array([[[0, 9]], [[-1, 2]], [[5, -7]]], np.int64)
    (got,) = make_session(model, custom=False).run(None, {"x": x, "i": i})
    assert np.array_equal(got, gather_multiaxis(x, i, [0, 2], mode))
