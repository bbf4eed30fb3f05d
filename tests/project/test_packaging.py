"""The packaging checks of tests/project/packaging_checks.py (fresh venvs, the package index, minutes each), run only when
GATHERMULTIAXIS_PACKAGING_TESTS=1: the oldest supported versions, and the sdist's tests and the wheel."""

import os
import sys

import pytest

import packaging_checks as checks  # pytest puts this file's folder on sys.path

pytestmark = pytest.mark.skipif(
    os.environ.get(checks.ENABLE_VARIABLE) != "1",
    reason=f"packaging checks build fresh venvs from the package index (minutes): set {checks.ENABLE_VARIABLE}=1")


def test_oldest_supported_versions_run_the_readme_commands_and_a_short_fuzz():
    assert checks.main(["oldest", "--python", sys.executable]) == 0


def test_sdist_tests_pass_and_the_wheel_runs_the_readme_commands():
    assert checks.main(["sdist", "--python", sys.executable]) == 0
