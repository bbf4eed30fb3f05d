"""Shared pytest options and the end-of-run summary of counts that tests report."""

import pytest

_SUMMARY: list[str] = []


def pytest_addoption(parser):
    parser.addoption("--property-cases", type=int, default=2000,
                     help="cases of the kernel-vs-ORT-builtin property run (default 2000)")


@pytest.fixture
def report_line():
    """Call with a line to show it in the summary at the end of the run (counts of long tests)."""
    return _SUMMARY.append


def pytest_terminal_summary(terminalreporter):
    if _SUMMARY:
        terminalreporter.section("gathermultiaxis counts")
        for line in _SUMMARY:
            terminalreporter.write_line(line)
