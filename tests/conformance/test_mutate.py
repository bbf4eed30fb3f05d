"""The mutation fuzzer (``gathermultiaxis.conformance.mutate``, ``check --mutate``): rewritten models edited after
the rewrite, run by the default session, the kernel path and lowered, must agree bit for bit."""

from __future__ import annotations

import collections
import types
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from gathermultiaxis.cli import main
from gathermultiaxis.conformance import check, mutate
from gathermultiaxis.ops.contract import DOMAIN, MODES, OP_TYPE

DATA = Path(__file__).resolve().parents[1] / "data"
BASES = (mutate.EXAMPLE, str(DATA / "tiny_bert.onnx"), str(DATA / "torch_gathers.onnx"))
CI_SEEDS = 400  # about a minute on 2 cores; the slow test runs 5,000


def run_seeds(count: int, seed: int = 0):
    report = check.run(check.mutation_sources(count, seed, BASES), jobs=2, mode=check.CheckMode.MUTATIONS)
    failed = [f"{r.name}: {r.detail}" for r in report.results if r.verdict != "passed"]
    raised = sum(r.both_raised for r in report.results)
    return report, failed, raised


def test_mutated_rewrites_agree_three_ways(report_line):
    report, failed, raised = run_seeds(CI_SEEDS)
    assert len(report.results) == CI_SEEDS
    report_line(f"mutation fuzzer: {CI_SEEDS} seeds (fuzz models, the bundled example, tests/data), "
                f"{CI_SEEDS - len(failed)} agreed ({raised} raising on every side), {len(failed)} mismatches")
    assert not failed, "\n".join(failed[:20])


@pytest.mark.slow
def test_mutated_rewrites_agree_three_ways_over_5000_seeds(report_line):
    report, failed, raised = run_seeds(5000, seed=CI_SEEDS)
    report_line(f"mutation fuzzer (slow): 5000 seeds from {CI_SEEDS}, {5000 - len(failed)} agreed ({raised} raising "
                f"on every side), {len(failed)} mismatches")
    assert not failed, "\n".join(failed[:20])


def test_every_mutation_is_drawn_and_takes_effect():
    bases = mutate.bases_from(BASES)
    seen = collections.Counter()
    for seed in range(200):
        case = mutate.mutation_case(seed, bases)
        for what in case.mutations:
            seen[what.split(":")[0]] += 1
        gathers = [n for n in case.model.graph.node if n.op_type == OP_TYPE and n.domain == DOMAIN]
        produced = {output for n in case.model.graph.node for output in n.output}
        for node in gathers:  # an edit that rewired a node left nothing dangling
            assert all(not name or name in produced or name in {i.name for i in case.model.graph.input}
                       or name in {t.name for t in case.model.graph.initializer} for name in node.input[:2]), case.description
    assert set(seen) >= {*mutate.MUTATIONS, "stale_record"}, seen


def test_an_op_inserted_on_the_data_input_is_what_the_node_reads():
    bases = mutate.bases_from((mutate.EXAMPLE,))
    for seed in range(100):
        case = mutate.mutation_case(seed, bases)
        for what in case.mutations:
            if what.startswith("data_op"):
                readers = [n for n in case.model.graph.node if n.op_type == OP_TYPE and n.domain == DOMAIN
                           and any(i.startswith("mutation/") for i in n.input[:1])]
                assert readers, case.description
                return
    pytest.fail("no data_op in 100 seeds")


def test_the_comparison_finds_what_differs():
    bits = np.array([0x7E01], np.uint16).view(np.float16)
    quiet = np.array([0x7E00], np.uint16).view(np.float16)
    assert mutate.compare_sides({"default": [bits], "kernel": [bits], "lowered": [bits]}).equal
    assert not mutate.compare_sides({"default": [quiet], "kernel": [bits], "lowered": [bits]}).equal
    strings = np.array(["a", "b"], dtype=object)
    assert not mutate.compare_sides({"default": [strings], "kernel": [strings], "lowered": [strings[::-1]]}).equal
    error = RuntimeError("out of range")
    assert mutate.compare_sides({"default": error, "kernel": error, "lowered": error}).equal
    only = mutate.compare_sides({"default": [bits], "kernel": error, "lowered": [bits]})
    assert not only.equal and "only kernel raised" in only.detail


def test_check_mutate_from_the_command_line(capsys):
    assert main(["check", "--mutate", "4", "--seed", "11", "--jobs", "1", "-q"]) == 0
    assert "4 passed, 0 failed" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--mutate", "2", "--fuzz", "2"], "run them separately"),
    (["--mutate", "2", "--lowered"], "takes no --lowered"),
])
def test_check_mutate_refuses_other_runs(argv, message, capsys):
    assert main(["check", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("seed", [3385, 3915])
def test_float16_through_expand_dims_keeps_nan_payloads_on_every_side(seed):
    """float16 data moved through com.microsoft ExpandDims: the lowering types it float16 by its rank rules and
    narrows, so the kernel path must narrow it too (NaN payloads differed on these seeds)."""
    report, failed, _ = run_seeds(1, seed=seed)
    assert "ExpandDims" in report.results[0].detail
    assert not failed, failed


def test_attribute_change_takes_a_mode_that_is_not_utf8():
    """A mode of bytes that are not UTF-8 is read escaped (never a UnicodeDecodeError): another mode is set."""
    node = helper.make_node(OP_TYPE, ["x", "i", "a"], ["y"], domain=DOMAIN, mode=b"\xffclamp", name="g")
    g = types.SimpleNamespace(rng=np.random.default_rng(0), rank=lambda name: None)  # no rank: the mode changes
    assert "mode" in mutate.attribute_change(g, node)
    assert node.attribute[0].s.decode() in MODES
