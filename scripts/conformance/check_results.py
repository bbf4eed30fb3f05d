"""What a conformance check reports: modes, verdicts, results and the text table (light: no ONNX, no ORT).

The verdicts (``VERDICTS``) are defined by the verdicts table of the conformance runner's page
(docs/conformance.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

VERDICTS = ("passed", "failed", "not compared", "not runnable", "builtin wrong", "no gather", "nondeterministic")
DEFAULT_TIMEOUT_S = 600.0  # a case's time in its child before it counts as hung (check --timeout)


class CheckMode(Enum):
    """What is compared with what (see the README's table of guarantees)."""

    DEFAULT = "default"              # rewrite vs original, both with graph optimizations off
    GATHERS = "default"              # an alias of DEFAULT (the mode that compares the gathers themselves)
    ORT_OPTIMIZED = "ort-optimized"  # the --ort-optimize rewrite vs original, both with ORT's defaults
    LOWERED = "lowered"              # rewrite then lower, on plain ORT (no custom op library), vs original
    WEBNN = "webnn"                  # rewrite then lower --target webnn per data set's shapes, on plain ORT
    SESSION = "session"              # rewrite in InferenceSession as users run it (builtin gathers where
    #                                  one computes a node, the kernel elsewhere) vs original, ORT's defaults
    MUTATIONS = "mutations"          # rewrites edited after the rewrite: default session vs kernel vs lowered
    #                                  (conformance.mutate; the cases are MutationSeed sources)

    @property
    def optimized(self) -> bool:
        """Both sides run with ORT's default graph optimizations (else all off)."""
        return self in (CheckMode.ORT_OPTIMIZED, CheckMode.SESSION)

    @property
    def ort_optimize_rewrite(self) -> bool:
        """The rewrite of ORT's optimized model (``rewrite --ort-optimize``)."""
        return self is CheckMode.ORT_OPTIMIZED


# the command-line flag that selects each mode (a failing fuzz case's replay line)
MODE_FLAGS = {CheckMode.DEFAULT: "", CheckMode.ORT_OPTIMIZED: " --ort-optimize", CheckMode.LOWERED: " --lowered",
              CheckMode.WEBNN: " --webnn", CheckMode.SESSION: " --session"}


@dataclass
class CheckResult:
    name: str
    verdict: str
    rewritten: int = 0
    left: int = 0
    detail: str = ""
    expected: str = ""  # agreement with the expected outputs: exact / close / differs / "" (none given)
    compared: int = 0  # data sets compared (both sides ran, or both raised on inputs made to raise)
    both_raised: int = 0  # data sets on which both sides raised (not a comparison, unless made to raise)
    left_reasons: list[str] = field(default_factory=list)
    inputs: str = ""  # what the compared data set fed each input, and from where (``input_generation.describe_feeds``)
    source: str = ""
    folded_by_ort: bool = False  # "no gather" because ORT's optimizer (--ort-optimize) removed every gather
    case: str = ""  # which case of the run this is (``check.case_keys``): what ``--resume`` matches on


@dataclass(frozen=True)
class FuzzSeed:
    """Fuzz case ``seed`` (``fuzz.fuzz_case``); a failing one is saved under ``save_dir``."""

    seed: int
    save_dir: str | None = None

    @property
    def name(self) -> str:
        return f"fuzz seed {self.seed}"


@dataclass(frozen=True)
class SuiteCase:
    """A default-suite case by name, read where it runs: what a cluster is sent instead of the CheckCase."""

    name: str


def format_table(results: list[CheckResult]) -> str:
    """The results as a text table: a line per case, then its detail (unless passed) and the gathers it left.

    Args:
        results: the results to list.

    Returns:
        The table as one string.
    """
    width = max([len(r.name) for r in results] + [5])
    lines = [f"{'model':<{width}}  {'rewritten':>9} {'left':>4}  {'verdict':<13} expected"]
    for r in results:
        lines.append(f"{r.name:<{width}}  {r.rewritten:>9} {r.left:>4}  {r.verdict:<13} {r.expected or '-'}")
        if r.verdict != "passed" and r.detail:  # failures, reasons, builtin bugs
            lines.append(f"{'':<{width}}    {r.detail}")
        lines.extend(f"{'':<{width}}    left {reason}" for reason in r.left_reasons)
    return "\n".join(lines)
