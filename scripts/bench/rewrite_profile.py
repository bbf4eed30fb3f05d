"""Where ``gathermultiaxis rewrite``'s time goes: the command under cProfile in a fresh process, its time
grouped by part (reading, ORT's loads, inference, the visits, the rank rules, the load check, saving)."""

from __future__ import annotations

import pstats
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# A part's terms: (file, function, only the calls from this function or None, sign); files end so in the package.
Term = tuple[str, str, "str | None", int]
PARTS: tuple[tuple[str, tuple[Term, ...]], ...] = (
    ("read the input (onnx.load)", (("graphs/modelfile.py", "read_model", "load_model", 1),)),
    ("ORT loads the input (the input check, where ORT's types do not prove it)",
     (("graphs/modelfile.py", "ort_load_error", "load_model", 1),)),
    ("ORT's types of the replaced outputs (the input check too)", (("graphs/ort_types.py", "ort_value_types", None, 1),)),
    ("inference: typing copy, onnx infer_shapes, layer 1", (("graphs/ranks/typing_copy.py", "typing_copy", "_run", 1),
                                                             ("graphs/ranks/shape_inference.py", "inferred", "_run", 1),
                                                             ("graphs/passes/scopes.py", "of", "_run", 1))),
    ("rewrite visits (replacements, provenance, value_info)", (("graphs/rewrite/rewrite_pass.py", "visit", None, 1),)),
    ("rank rules (layer 3, per node)", (("graphs/rewrite/rewrite_pass.py", "observe", None, 1),)),
    ("splice", (("graphs/passes/driver.py", "splice", None, 1),)),
    ("load check (changed_part)", (("graphs/load_check.py", "changed_part", None, 1),)),
    ("ORT loads the changed part", (("graphs/modelfile.py", "ort_load_error", "loads_in_ort", 1),)),
    ("save (without the load check)", (("graphs/modelfile.py", "save_model", None, 1),
                                      ("graphs/modelfile.py", "loads_in_ort", None, -1))),
)
PASS = ("graphs/passes/driver.py", "run_node_pass")  # the whole pass: what no part above names is "other pass work"
PASS_PARTS = ("inference", "rewrite visits", "rank rules", "splice")

_PROFILED = ("import cProfile, runpy, sys\n"
             "out = sys.argv[1]; sys.argv = ['gathermultiaxis', *sys.argv[2:]]\n"
             "profiler = cProfile.Profile(); profiler.enable()\n"
             "try:\n"
             "    runpy.run_module('gathermultiaxis', run_name='__main__')\n"
             "except SystemExit as stop:\n"
             "    if stop.code not in (0, None): raise\n"
             "finally:\n"
             "    profiler.disable(); profiler.dump_stats(out)\n")


@dataclass
class RewriteProfile:
    total: float                          # profiled seconds of the whole process
    parts: list[tuple[str, float]]        # (part, profiled seconds), PARTS' order, then the pass's other work
    top: list[tuple[str, int, float]]     # (function, calls, own profiled seconds), the costliest first


def _matches(key: tuple, file: str, function: str) -> bool:
    return key[2] == function and key[0].replace("\\", "/").endswith(file)


def term_seconds(stats: dict, term: Term) -> float:
    """The cumulative profiled seconds of a term's function (only its calls from ``caller`` where one is named)."""
    file, function, caller, sign = term
    seconds = 0.0
    for key, (_, _, _, cumulative, callers) in stats.items():
        if _matches(key, file, function):
            seconds += cumulative if caller is None else sum(
                timing[3] for caller_key, timing in callers.items() if caller_key[2] == caller)
    return sign * seconds


def summarize(stats: pstats.Stats, top: int = 12) -> RewriteProfile:
    """Group ``stats`` (a profile of the ``rewrite`` command) by ``PARTS``."""
    table: dict = stats.stats  # type: ignore[attr-defined]  # pstats' own table: key -> (cc, nc, tt, ct, callers)
    parts = [(label, sum(term_seconds(table, term) for term in terms)) for label, terms in PARTS]
    whole_pass = term_seconds(table, (*PASS, None, 1))
    inside = sum(seconds for label, seconds in parts if label.startswith(PASS_PARTS))
    parts.append(("other pass work (the copy, names, scopes, dead nodes)", max(0.0, whole_pass - inside)))
    costliest = sorted(table.items(), key=lambda item: -item[1][2])[:top]
    return RewriteProfile(stats.total_tt, parts,  # type: ignore[attr-defined]
                          [(f"{Path(key[0]).name}:{key[1]}({key[2]})", value[1], value[2]) for key, value in costliest])


def profile_rewrite(source: Path, environment: dict[str, str] | None = None, top: int = 12) -> RewriteProfile:
    """``gathermultiaxis rewrite source`` under cProfile in a fresh process, grouped by part.

    Args:
        source: the model.
        environment: the child's environment (None: this process's).
        top: how many of the costliest functions to list.

    Returns:
        The profile's total, its parts and its costliest functions.
    """
    with tempfile.TemporaryDirectory(prefix="gathermultiaxis-profile-") as scratch:
        stats_path, target = Path(scratch) / "rewrite.prof", Path(scratch) / "rewritten.onnx"
        command = [sys.executable, "-c", _PROFILED, str(stats_path), "rewrite", str(source), "-o", str(target),
                   "--force", "-q"]
        child = subprocess.run(command, capture_output=True, text=True, env=environment)
        if child.returncode != 0:
            raise RuntimeError(f"rewrite under cProfile failed (exit {child.returncode}): {child.stderr.strip()[-500:]}")
        return summarize(pstats.Stats(str(stats_path)), top)


def format_profile(profile: RewriteProfile) -> str:
    """The profile as a Markdown table of parts and one of the costliest functions."""
    lines = [f"cProfile of `rewrite`: {profile.total:.2f} profiled seconds (cProfile slows Python code more than "
             "C code such as ORT's: read the shares, not the seconds)",
             "| part | profiled seconds | share |", "|---|---|---|"]
    for label, seconds in profile.parts:
        lines.append(f"| {label} | {seconds:.2f} | {seconds / profile.total:.0%} |")
    rest = profile.total - sum(seconds for _, seconds in profile.parts)
    lines.append(f"| the rest (imports, the command, the report) | {rest:.2f} | {rest / profile.total:.0%} |")
    lines += ["", "| function | calls | own profiled seconds |", "|---|---|---|"]
    lines += [f"| {name} | {calls} | {seconds:.2f} |" for name, calls, seconds in profile.top]
    return "\n".join(lines)


__all__ = ["PARTS", "RewriteProfile", "format_profile", "profile_rewrite", "summarize", "term_seconds"]
