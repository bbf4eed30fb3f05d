"""Shared pytest options and the end-of-run summary of counts that tests report."""

import pytest

_SUMMARY: list[str] = []
_COUNT = "gathermultiaxis count"  # the user_properties key: xdist hands these back to the controller


def pytest_addoption(parser):
    parser.addoption("--property-cases", type=int, default=2000,
                     help="cases of the kernel-vs-ORT-builtin property run (default 2000)")


@pytest.fixture
def report_line(request):
    """Call with a line to show it in the summary at the end of the run (counts of long tests)."""
    return lambda line: request.node.user_properties.append((_COUNT, line))


def pytest_runtest_logreport(report):
    # Each phase's report carries the test's properties so far: the teardown's holds them all, once.
    if report.when == "teardown":
        _SUMMARY.extend(value for key, value in report.user_properties if key == _COUNT)


def pytest_terminal_summary(terminalreporter):
    if _SUMMARY:
        terminalreporter.section("gathermultiaxis counts")
        for line in _SUMMARY:
            terminalreporter.write_line(line)
