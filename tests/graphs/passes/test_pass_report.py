"""graphs.passes.pass_report: one outcome per target node, counted and serialised by the report's DONE name."""

from dataclasses import dataclass
from typing import ClassVar

from gathermultiaxis.graphs.passes.pass_report import LeftUnchanged, PassReport


@dataclass
class _Row:
    node: str
    changed: bool
    reason: str = ""


@dataclass
class _Report(PassReport):
    DONE: ClassVar[str] = "changed"


def test_counts_and_json():
    report = _Report([_Row("a", True), _Row("b", False, "why"), _Row("c", True)])
    assert report.done() == 2 and report.left == 1
    assert report.left_outcomes() == [_Row("b", False, "why")]
    assert report.as_dict() == {"changed": 2, "left": 1, "nodes": [
        {"node": "a", "changed": True, "reason": ""}, {"node": "b", "changed": False, "reason": "why"},
        {"node": "c", "changed": True, "reason": ""}]}


def test_left_unchanged_carries_the_reason():
    assert str(LeftUnchanged("no rank")) == "no rank"
