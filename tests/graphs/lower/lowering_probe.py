"""The lowering tests' shared helpers: a Constant node, and a probe pass that records what a look at each
GatherMultiaxis node says (the node is left unchanged)."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from gathermultiaxis.graphs.passes import NodePass, NotChanged

CONTRIB = helper.make_opsetid("ai.onnx.contrib", 1)


def constant(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype), name))


class Probe(NodePass[None]):
    """A pass that visits every GatherMultiaxis node and records what ``look(node, scope)`` says."""

    def __init__(self, look):
        from gathermultiaxis.graphs.lower import LowerReport

        self.look, self.report, self.seen = look, LowerReport(), []

    def targets(self, node):
        return node.op_type == "GatherMultiaxis"

    def visit(self, node, scope):
        self.seen.append(self.look(node, scope))
        raise NotChanged("probe")

    def outcome(self, node, path, detail, reason):
        from gathermultiaxis.graphs.lower import LoweredNode

        return LoweredNode(node.name, path, False, reason)


def probe(model, look):
    visitor = Probe(look)
    visitor(model)
    return visitor.seen

