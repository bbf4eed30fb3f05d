"""ops/runtime/bind/preparation.py: prepare_model, the bind step as the session runs it."""

from onnx import TensorProto, helper
from support import gather_multiaxis_model, make_model

from gathermultiaxis.ops.runtime.bind.bind_pass import BindOptions, BindPass
from gathermultiaxis.ops.runtime.bind.preparation import bind_sequence, prepare_model


def test_every_gather_multiaxis_node_takes_the_run_token():
    prepared = prepare_model(gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64), float16_outputs=False)
    assert prepared.tokened and [node.op_type for node in prepared.model.graph.node] == ["GatherMultiaxisRun"]
    assert list(prepared.model.graph.node[0].input)[-1] == prepared.token
    assert prepared.crossings == 1 and prepared.tables == {}


def test_a_model_without_the_op_is_left_as_it_is():
    value = helper.make_tensor_value_info
    model = make_model([helper.make_node("Identity", ["x"], ["y"])], [value("x", TensorProto.FLOAT, [1])],
                       [value("y", TensorProto.FLOAT, [1])])
    prepared = prepare_model(model, float16_outputs=False)
    assert prepared.model is model and not prepared.tokened and prepared.crossings == 0


def step_names(binding):
    return [type(step).__name__ for step in bind_sequence(binding).passes]


def test_the_steps_follow_the_options():
    assert step_names(BindPass(None, True, False)) == [
        "BindPass", "DropValueInfo", "RemoveDeadFeeders", "GroupSharedIndices", "RemoveRecordedAlignments",
        "DropUnreadConstants", "CopyScanBodyOutputs", "ShareBoundInitializers", "CountCrossings"]
    assert "GroupSharedIndices" not in step_names(BindPass(None, True, False, BindOptions(group_shared_indices=False)))
    assert "RemoveRecordedAlignments" not in step_names(BindPass(None, True, False, BindOptions(recorded_form=False)))
    assert step_names(BindPass(None, False, False)) == [
        "BindPass", "DropValueInfo", "RemoveRecordedAlignments", "DropUnreadConstants", "CopyScanBodyOutputs",
        "CountCrossings"]
