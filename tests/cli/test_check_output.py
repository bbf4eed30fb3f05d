"""What ``check`` prints: which cases the table lists at each verbosity, and the progress on stderr."""

import pytest

from gathermultiaxis.cli.check_output import LISTED_PASSES, CheckProgress, print_table
from gathermultiaxis.conformance.check import CheckResult


def listed(capsys, results, verbosity):
    print_table(results, verbosity)
    out = capsys.readouterr().out
    return [line.split()[0] for line in out.splitlines()[1:] if line.startswith("case")], out


def test_quiet_lists_only_failures(capsys):
    results = [CheckResult("case0", "passed"), CheckResult("case1", "failed", detail="differs"),
               CheckResult("case2", "not compared")]
    names, out = listed(capsys, results, -1)
    assert names == ["case1"] and "differs" in out
    names, _ = listed(capsys, results, 0)
    assert names == ["case0", "case1", "case2"]


def test_many_passes_are_counted_unless_verbose(capsys):
    results = [CheckResult(f"case{i}", "passed") for i in range(LISTED_PASSES)] + [CheckResult("caseX", "failed")]
    names, out = listed(capsys, results, 0)
    assert names == ["caseX"] and out.endswith(f"({LISTED_PASSES} passed cases not listed; -v lists them)\n")
    names, _ = listed(capsys, results, 1)
    assert len(names) == LISTED_PASSES + 1


def test_nothing_to_list(capsys):
    assert listed(capsys, [CheckResult("case0", "passed")], -1) == ([], "")


@pytest.mark.parametrize("verbosity, shown", [(-1, False), (0, True)])
def test_progress_without_a_terminal(capsys, verbosity, shown):
    pytest.importorskip("tqdm", reason="the progress line without a terminal is tqdm's: pip install '.[progress]'")
    progress = CheckProgress(verbosity, total=3, initial=1, period=0.0)
    progress.advance("a")
    progress.result_line("passed        a")
    progress.advance("b")
    progress.close()
    captured = capsys.readouterr()
    assert progress.done == 3 and captured.out == "passed        a\n"
    assert ("[3/3]" in captured.err) == shown and ("[2/3]" in captured.err) == shown, captured.err
