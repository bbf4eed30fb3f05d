"""``check`` with no path: the narrowed node-test collection (cases.NODE_TEST_MODULES) finds the same cases,
in the same order, as onnx's full ``collect_testcases`` filtered the same way."""

import json
import subprocess
import sys

import pytest

# In a fresh process: another test of this session may already have imported every node-test module,
# and then the narrowed collection would see all their cases and could not fail.
_COMPARE = """
import json
from gathermultiaxis.conformance.cases import default_suite
narrowed = [case.name for case in default_suite()]
full = [case.name for case in default_suite(None)]
print(json.dumps([narrowed, full]))
"""


@pytest.mark.slow
def test_default_suite_matches_the_full_collection():
    child = subprocess.run([sys.executable, "-c", _COMPARE], capture_output=True, text=True, timeout=1800)
    assert child.returncode == 0, child.stderr[-2000:]
    narrowed, full = json.loads(child.stdout.strip().splitlines()[-1])
    assert narrowed == full
    assert len(narrowed) >= 80 and narrowed[-1] == "bundled example"
    assert {"test_gather_0", "test_gather_elements_0", "test_gathernd_example_float32"} <= set(narrowed)
