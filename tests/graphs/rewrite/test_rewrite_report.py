"""graphs.rewrite.rewrite_report: counts per op type, the text table, and holds_gather."""

from onnx import helper

from gathermultiaxis.graphs.rewrite.rewrite_report import NodeOutcome, RewriteReport, holds_gather, is_target


def test_report_counts_and_table():
    report = RewriteReport(outcomes=[NodeOutcome("Gather", "a", "main", True),
                                     NodeOutcome("GatherND", "b", "main", True, "k unknown", runtime_aligned=True),
                                     NodeOutcome("Gather", "c", "main", False, "a string")])
    assert report.counts() == {"Gather": {"rewritten": 1, "left": 1}, "GatherND": {"rewritten": 1, "left": 0}}
    assert (report.rewritten, report.left, report.runtime_aligned) == (2, 1, 1)
    lines = report.table().splitlines()
    assert lines[-2:] == ["  aligned at run time: GatherND 'b' in main: k unknown", "  left Gather 'c' in main: a string"]
    assert report.as_dict()["by_op"] == report.counts()


def test_holds_gather_looks_in_the_onnx_domain_only():
    node = helper.make_node("Gather", ["x", "i"], ["y"])
    graph = helper.make_graph([node], "g", [], [])
    assert holds_gather(helper.make_model(graph))
    assert not is_target(helper.make_node("Gather", ["x", "i"], ["y"], domain="com.example"), ("Gather",))
