"""graphs/lower/form_emitter.py: a planned form's nodes; constant indices are prepared into one constant."""

import numpy as np
from onnx import TensorProto

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.ir.builder import NameScope
from gathermultiaxis.graphs.lower.form_emitter import FormEmitter, emit_form
from gathermultiaxis.graphs.lower.form_plans import GatherPlan, NDPlan
from gathermultiaxis.graphs.lower.form_semantics import Semantics
from gathermultiaxis.graphs.lower.lowering_builder import LoweringBuilder
from gathermultiaxis.ops import Mode


def _emitter(data, indices, axes, mode, constants):
    semantics = Semantics(len(data), tuple(axes), mode, TensorInfo(TensorProto.FLOAT, data),
                          TensorInfo(TensorProto.INT64, indices))
    builder = LoweringBuilder(17, NameScope({"x", "i"}), "n")
    return FormEmitter(builder, semantics, "x", "i", constants, TensorProto.FLOAT), semantics


def test_gather_of_constant_indices_squeezes_them_into_one_constant():
    emitter, semantics = _emitter((5, 3), (2, 1), [0], Mode.ERROR, {"i": np.array([[4], [-5]])})
    plan = GatherPlan.of(semantics)
    assert plan == GatherPlan(0, (), (1,))
    emit_form(plan, emitter)
    assert [node.op_type for node in emitter.b.nodes] == ["Constant", "Gather"]
    assert emitter.folded[emitter.idx].tolist() == [4, -5]


def test_clamp_bounds_the_indices_with_max_and_min():
    emitter, semantics = _emitter((5, 3), (2, 1), [0], Mode.CLAMP, {})
    emit_form(GatherPlan.of(semantics), emitter)
    assert [node.op_type for node in emitter.b.nodes if node.op_type != "Constant"] == ["Max", "Min", "Squeeze",
                                                                                       "Gather"]


def test_gather_nd_in_mode_zero_masks_the_tuples():
    emitter, semantics = _emitter((4, 5), (2, 2), [0, 1], Mode.ZERO, {})
    plan = NDPlan.of(semantics, 17)
    emit_form(plan, emitter)
    op_types = [node.op_type for node in emitter.b.nodes]
    assert op_types[-1] == "Where" and op_types.index("GatherND") > op_types.index("ReduceMax") and "Unsqueeze" in op_types
