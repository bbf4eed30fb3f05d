"""graphs.lower.lower_report: the lowering's report, its forms and its text."""

from gathermultiaxis.graphs.lower import GENERAL, LoweredNode, LowerReport


def report():
    return LowerReport(outcomes=[
        LoweredNode("a", "main", True, form="Gather", source="rewrite record"),
        LoweredNode("b", "main", True, "no single gather computes it: x", GENERAL, "semantics"),
        LoweredNode("c", "main/body", False, "axes are not 1-D"),
        LoweredNode("d", "main", True, form="Gather", source="semantics"),
    ])


def test_forms_count_the_lowered_nodes_only_sorted_by_form():
    assert report().forms() == {"Gather": 2, GENERAL: 1}
    assert (report().lowered, report().left) == (3, 1)
    assert report().as_dict()["forms"] == {"Gather": 2, GENERAL: 1}


def test_the_table_names_the_general_form_and_the_left_nodes_with_their_reasons():
    assert report().table().splitlines() == [
        "GatherMultiaxis lowered: 3, left: 1",
        "  forms: Gather 2, general 1",
        "  general form for 'b' in main: no single gather computes it: x",
        "  left 'c' in main/body: axes are not 1-D",
    ]
