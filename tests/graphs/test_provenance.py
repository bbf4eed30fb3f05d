"""graphs.provenance: the record a GatherMultiaxis node carries of the gather it replaced, and the model note."""

import json

from onnx import helper

from gathermultiaxis import __version__
from gathermultiaxis.graphs.provenance import (KEY, MODEL_KEY, ReplacedGather, carry_metadata, mark_rewritten,
                                               model_note, record, replaced_gather, unmark_rewritten)


def test_record_round_trips_and_carries_metadata():
    replaced = helper.make_node("Gather", ["table", "ids"], ["rows"], name="embed", axis=1, doc_string="from torch")
    replaced.metadata_props.add(key="pkg.torch.source", value="model.py:3")
    replaced.metadata_props.add(key=KEY, value="an old record")
    node = helper.make_node("GatherMultiaxis", ["a", "b", "c"], ["rows"], domain="ai.onnx.contrib")
    record(node, replaced)
    assert [e.key for e in node.metadata_props].count(KEY) == 1
    assert node.doc_string == "from torch"
    got = replaced_gather(node)
    assert got == ReplacedGather("Gather", "table", "ids", "rows", {"axis": 1}, "embed", None)
    target = helper.make_node("Gather", ["table", "ids"], ["rows"])
    carry_metadata(node, target)
    assert [(e.key, e.value) for e in target.metadata_props] == [("pkg.torch.source", "model.py:3")]


def test_records_that_are_not_records_are_ignored():
    good = {"op_type": "GatherND", "inputs": ["d", "i"], "output": "o", "attributes": {"batch_dims": 1}}
    assert ReplacedGather.from_text(json.dumps(good)) is not None
    for bad in ({**good, "op_type": "Slice"}, {**good, "attributes": {"axis": 1}},
                {**good, "attributes": {"batch_dims": True}}, {**good, "attributes": {"batch_dims": 2**63}},
                {**good, "domain": "com.microsoft"}, {**good, "inputs": ["d", ""]}):
        assert ReplacedGather.from_text(json.dumps(bad)) is None
    assert ReplacedGather.from_text("not json") is None
    node = helper.make_node("GatherMultiaxis", ["a", "b", "c"], ["o"])
    node.metadata_props.add(key=KEY, value=json.dumps(good))
    node.metadata_props.add(key=KEY, value=json.dumps(good))
    assert replaced_gather(node) is None  # two records on one node


def test_mark_and_unmark_rewritten():
    model = helper.make_model(helper.make_graph([], "g", [], []))
    for key, value in (("a", "1"), (MODEL_KEY, "old"), ("b", "2"), (MODEL_KEY, "older")):
        model.metadata_props.add(key=key, value=value)
    mark_rewritten(model)
    assert [(e.key, e.value) for e in model.metadata_props] == [("a", "1"), (MODEL_KEY, model_note()), ("b", "2")]
    assert __version__ in model_note()
    assert unmark_rewritten(model) is True
    assert [e.key for e in model.metadata_props] == ["a", "b"]
    assert unmark_rewritten(model) is False
