"""The conformance runner: each case in a child process with a timeout, so that a crash or a hang is that
case's verdict and the run goes on."""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Union

from ..graphs.modelfile import one_line
from ..graphs.ir.walk import model_nodes
from ..harness import versions
from ..ops.contract import is_gather_multiaxis
from . import fuzz, mutate
from .cases import DEFAULT_SUITE_SOURCES, CheckCase, DataSet, FileSource, InputOptions, default_suite_case, load_case
from .check_case import check_case
from .check_results import DEFAULT_TIMEOUT_S, MODE_FLAGS, VERDICTS, CheckMode, CheckResult, FuzzSeed, SuiteCase
from .isolation import DEFAULT_CONNECT_TIMEOUT_S, Outcome, Worker, WorkerPool, report_phase


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception (``stop_on_sigterm``) so that it ends a run the way Ctrl-C does."""


class SigtermGuard:
    """What ``stop_on_sigterm`` yields: after ``defer()``, a SIGTERM is only noted (``received``), so that
    the report being printed and written is not lost."""

    def __init__(self):
        self.deferred = self.received = False

    def defer(self) -> None:
        """From now on a SIGTERM is only noted."""
        self.deferred = True

    def handle(self, number, frame) -> None:
        """The SIGTERM handler: note the signal, and raise Terminated unless deferred."""
        self.received = True
        if not self.deferred:
            raise Terminated()


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[SigtermGuard]:
    """Within: SIGTERM in the main thread raises Terminated (``run`` stops its child and returns the partial
    report, exit status 143); elsewhere a no-op (Python allows signal handlers only there). Yields the guard."""
    guard = SigtermGuard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous = signal.signal(signal.SIGTERM, guard.handle)
    try:
        yield guard
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True)
class MutationSeed:
    """Mutation case ``seed`` (``mutate.mutation_case``) on ``bases``; a failing one is saved under ``save_dir``."""

    seed: int
    bases: tuple[str, ...] = (mutate.EXAMPLE,)
    save_dir: str | None = None

    @property
    def name(self) -> str:
        return f"mutation seed {self.seed}"


def _runtime_flag(runtime: str | None) -> str:
    return "" if runtime is None else f" --runtime {runtime}"


Source = Union[CheckCase, FileSource, FuzzSeed, MutationSeed, SuiteCase]


def check_mutation_seed(source: MutationSeed) -> CheckResult:
    """One mutation case: passed when its three sides agree bit for bit (raising on all agrees too)."""
    report_phase("mutating a rewritten model")
    try:
        case = mutate.mutation_case(source.seed, mutate.bases_from(source.bases))
    except Exception as error:  # noqa: BLE001
        return CheckResult(source.name, "failed", detail=f"the mutated case could not be made: {one_line(error)}")
    comparison = mutate.compare_sides(mutate.run_sides(case.model, case.feeds))
    gathers = sum(is_gather_multiaxis(node) for node in model_nodes(case.model))
    result = CheckResult(source.name, "passed" if comparison.equal else "failed", rewritten=gathers, compared=1,
                         both_raised=int(all(comparison.raised.values())), source=case.base,
                         detail="; ".join(case.mutations) + (f" | {comparison.detail}" if comparison.detail else ""))
    if not comparison.equal:
        folder = fuzz.save_reproducer(CheckCase(case.description, case.model, [DataSet(case.feeds)]), source.save_dir,
                                      source.seed)
        paths = "".join(f" {path}" for path in source.bases if path != mutate.EXAMPLE)
        result.detail += (f" (replay: gathermultiaxis check --mutate 1 --seed {source.seed}{paths}; the edited model "
                          f"and its inputs: {folder})")
    return result


def check_source(task: tuple) -> CheckResult:
    """The child's task ``(source, mode, options[, runtime])``: read the source, then check it."""
    source, mode, options, *more = task
    runtime = more[0] if more else None
    if isinstance(source, MutationSeed):
        return check_mutation_seed(source)
    if isinstance(source, SuiteCase):
        report_phase("collecting the default suite")
        source = default_suite_case(source.name)
    if isinstance(source, FuzzSeed):
        case = fuzz.fuzz_case(source.seed)
        result = check_case(case, options, mode, runtime)
        if result.verdict == "failed":
            folder = fuzz.save_reproducer(case, source.save_dir, source.seed)
            result.detail += (f" (replay: gathermultiaxis check --fuzz 1 --seed {source.seed}{MODE_FLAGS[mode]}"
                              f"{_runtime_flag(runtime)}; "
                              f"reproducer: {folder})")
        return result
    if isinstance(source, FileSource):
        report_phase("reading the model")
        try:
            case = load_case(source)
        except Exception as error:  # noqa: BLE001 - protobuf raises several types for garbage
            return CheckResult(source.name, "not runnable", detail=f"cannot read: {one_line(error)}",
                               source=source.path)
        return check_case(case, options, mode, runtime)
    return check_case(source, options, mode, runtime)


@dataclass
class Report:
    results: list[CheckResult] = field(default_factory=list)
    interrupted: bool = False
    stopped_by: str = ""  # "SIGINT" (Ctrl-C) or "SIGTERM" when interrupted
    mode: str = CheckMode.DEFAULT.value
    runtime: str = ""  # where the lowered or WebNN form and the original both ran (--runtime; "": ORT as mode says)
    command: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=versions)

    def counts(self) -> dict[str, int]:
        """How many cases got each of ``VERDICTS``."""
        return {verdict: sum(r.verdict == verdict for r in self.results) for verdict in VERDICTS}

    def summary_line(self) -> str:
        """The counts in one line ("no gather" and "nondeterministic" only when there is one)."""
        counts = self.counts()
        # "no gather" only when it happened: the five-verdict line users and the README quote stays as it was
        line = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v not in ("no gather", "nondeterministic") or counts[v])
        if self.interrupted:
            line += " (interrupted)"
        return line

    def exit_status(self, allowed: Iterable[str] = ()) -> int:
        """0 when every case passed (or found ORT wrong); 1 on any failure; 3 on any case not compared,
        not runnable or nondeterministic, else 4 on any case with no gather, unless that verdict is in ``allowed``;
        when interrupted, 130 (Ctrl-C) or 143 (SIGTERM), the shell's codes for a death by those signals."""
        if self.interrupted:
            return 143 if self.stopped_by == "SIGTERM" else 130
        counts = self.counts()
        if counts["failed"]:
            return 1
        if any(counts[v] for v in ("not compared", "not runnable", "nondeterministic") if v not in set(allowed)):
            return 3
        if counts["no gather"] and "no gather" not in set(allowed):
            return 4
        return 0

    def as_dict(self) -> dict:
        """The report as written to ``--json``."""
        return {"summary": self.summary_line(), "counts": self.counts(), "interrupted": self.interrupted,
                "stopped_by": self.stopped_by,
                "mode": self.mode, "runtime": self.runtime, "command": self.command, "versions": self.versions,
                "results": [asdict(r) for r in self.results]}


def _isolated_failure(source: Source, outcome) -> CheckResult:
    """The verdict when the child crashed, hung or raised: blamed on the side it was running."""
    on_original = "original" in outcome.phase or "reading" in outcome.phase
    verdict = "not runnable" if on_original else "failed"
    what = {"crashed": "crashed", "timed out": "hung", "raised": "raised"}[outcome.status]
    detail = f"the check {what} while {outcome.phase or 'starting'}: {outcome.detail}"
    return CheckResult(source.name, verdict, detail=detail, source=getattr(source, "source", "") or getattr(source, "path", ""))


def _reference(source: Source) -> Source:
    """What a cluster is sent for ``source``: a default-suite case by name, anything else as it is."""
    if isinstance(source, CheckCase):
        if source.source not in DEFAULT_SUITE_SOURCES:
            raise ValueError(f"case {source.name!r} is a model made in Python: a cluster takes files, fuzz seeds "
                             f"and default-suite cases (save it with onnx.save_model and pass its path)")
        return SuiteCase(source.name)
    return source


def case_keys(sources: list[Source]) -> list[str]:
    """What names each source in a report, for ``--resume``; a key met again gets " #2", " #3"."""
    keys, seen = list[str](), dict[str, int]()
    for source in sources:
        key = source.name if isinstance(source, (FuzzSeed, MutationSeed, CheckCase, SuiteCase)) else source.path
        seen[key] = seen.get(key, 0) + 1
        keys.append(key if seen[key] == 1 else f"{key} #{seen[key]}")
    return keys


# Runtimes whose cases that did not pass run again in a fresh child: OpenVINO 2026.4 corrupts memory (a
# GatherElements with indices smaller than the data off the axis), and later cases in the same child crash.
FRESH_RETRY = ("openvino",)


@dataclass
class _Run:
    """One run's cases, the results so far and the cutoff (with fail_fast: the first failed case)."""

    sources: list[Source]
    mode: CheckMode
    options: InputOptions
    runtime: str | None
    timeout: float
    isolate: bool
    fail_fast: bool
    on_result: Callable[[CheckResult], None] | None
    done: dict[int, CheckResult] = field(default_factory=dict)

    def __post_init__(self):
        self.keys = case_keys(self.sources)
        self.cutoff = len(self.sources)  # the cases after it are not reported

    def resume(self, finished: Iterable[CheckResult]) -> list[tuple[int, tuple]]:
        """Keep the ``finished`` results of an earlier run; the tasks left to run."""
        earlier = {result.case: result for result in finished}
        for number, key in enumerate(self.keys):
            if key in earlier:
                self.done[number] = earlier[key]
        for number, result in self.done.items():
            if self.fail_fast and result.verdict == "failed":
                self.cutoff = min(self.cutoff, number)
        return [(number, (source, self.mode, self.options, self.runtime)) for number, source in enumerate(self.sources)
                if number not in self.done and number < self.cutoff]

    def finish(self, number: int, outcome: Outcome) -> None:
        """Record case ``number``'s outcome (retried in a fresh child on a FRESH_RETRY runtime)."""
        source, runtime = self.sources[number], self.runtime
        if runtime in FRESH_RETRY and self.isolate and (outcome.status != "done" or outcome.value.verdict != "passed"):
            with Worker() as fresh:
                outcome = fresh.run(check_source, (source, self.mode, self.options, runtime), self.timeout)
        result = outcome.value if outcome.status == "done" else _isolated_failure(source, outcome)
        result.case = self.keys[number]
        self.done[number] = result
        if self.on_result is not None:
            self.on_result(result)
        if self.fail_fast and result.verdict == "failed" and number < self.cutoff:
            self.cutoff = number

    def on_cluster(self, tasks: list[tuple[int, tuple]], cluster: str, jobs: int, cluster_timeout: float) -> None:
        """Send every task to the Dask scheduler at ``cluster``, by reference."""
        from .cluster import DaskPool  # Dask is an extra: imported only here

        by_reference = [(number, (_reference(self.sources[number]), self.mode)) for number, _ in tasks]
        with DaskPool(cluster, jobs, cluster_timeout) as pool:
            for number, outcome in pool.outcomes(check_source, by_reference, self.timeout, shared=self.options):
                if number < self.cutoff and outcome.status != "cancelled":  # cancelled: after the cutoff
                    self.finish(number, outcome)
                    pool.cancel(lambda key: key < self.cutoff)

    def on_workers(self, tasks: list[tuple[int, tuple]], jobs: int) -> None:
        """Run the tasks in ``jobs`` child processes."""
        with WorkerPool(jobs) as worker_pool:
            for number, outcome in worker_pool.outcomes(check_source, tasks, self.timeout):
                if number < self.cutoff:
                    self.finish(number, outcome)
                    worker_pool.cancel(lambda key: key < self.cutoff)


def run(sources: Iterable[Source], *, options: InputOptions = InputOptions(), timeout: float = DEFAULT_TIMEOUT_S,
        fail_fast: bool = False, on_result: Callable[[CheckResult], None] | None = None,
        command: list[str] | None = None, isolate: bool = True, mode: CheckMode = CheckMode.DEFAULT,
        jobs: int = 1, finished: Iterable[CheckResult] = (), cluster: str | None = None,
        cluster_timeout: float = DEFAULT_CONNECT_TIMEOUT_S, runtime: str | None = None) -> Report:
    """Check every source; the report lists the cases in the order of ``sources`` whatever ``jobs`` is. Ctrl-C,
    or SIGTERM within ``stop_on_sigterm()``, stops the children; the report holds what ran and says so.

    Args:
        sources: the cases: ``CheckCase``, ``FileSource``, ``FuzzSeed``, ``MutationSeed`` or ``SuiteCase`` objects.
        options: how inputs are made (``InputOptions``).
        timeout: seconds each case may take in its child process.
        fail_fast: stop at the first failed case (later cases are not reported).
        on_result: called with each ``CheckResult`` as it finishes, or None.
        command: the command line, recorded in the report.
        isolate: run each case in a child process (False: in this process, without timeout).
        mode: what the models are compared as (``CheckMode``).
        jobs: how many cases run at a time.
        finished: results of an earlier run, kept instead of running those cases again (``--resume``).
        cluster: a Dask scheduler's address, "local" (a LocalCluster of ``jobs`` workers), or None.
        cluster_timeout: seconds the scheduler at ``cluster`` may take to answer.
        runtime: where the original and the lowered or WebNN form both run (``runtimes.RUNTIMES``), or None.
            On OpenVINO a case that did not pass is checked again in a fresh child: OpenVINO corrupts its
            process's memory on some models, and the damage shows on later, innocent cases.

    Returns:
        The ``Report``.

    Raises:
        ValueError: with ``cluster``, a model made in Python, or a runtime.
        cluster.NoScheduler: no Dask scheduler answers at ``cluster`` within ``cluster_timeout`` seconds.
    """
    if cluster is not None and runtime is not None:
        raise ValueError(f"--runtime {runtime} runs on this machine only, not with --cluster")
    state = _Run(list(sources), mode, options, runtime, timeout, isolate, fail_fast, on_result)
    report = Report(command=list(command or []), mode=mode.value, runtime=runtime or "")
    if runtime is not None:
        from .runtimes import runtime_version

        report.versions[runtime] = runtime_version(runtime)
    tasks = state.resume(finished)
    try:
        if not isolate:
            for number, task in tasks:
                if number < state.cutoff:
                    state.finish(number, Outcome(check_source(task)))
        elif cluster is not None:
            state.on_cluster(tasks, cluster, jobs, cluster_timeout)
        else:
            state.on_workers(tasks, jobs)
    except KeyboardInterrupt as stop:
        report.interrupted = True
        report.stopped_by = "SIGTERM" if isinstance(stop, Terminated) else "SIGINT"
    report.results = [state.done[number] for number in sorted(state.done) if number <= state.cutoff]
    return report


def fuzz_sources(count: int, seed: int, save_dir: str | Path | None = None) -> list[FuzzSeed]:
    """Fuzz cases ``seed`` to ``seed + count - 1``; failing ones saved under ``save_dir`` (None: a temporary one)."""
    return [FuzzSeed(seed + offset, str(save_dir) if save_dir else None) for offset in range(count)]


def mutation_sources(count: int, seed: int, bases: tuple[str, ...] = (mutate.EXAMPLE,),
                     save_dir: str | Path | None = None) -> list[MutationSeed]:
    """Mutation cases ``seed`` to ``seed + count - 1`` on ``bases``, saved as ``fuzz_sources`` saves."""
    return [MutationSeed(seed + offset, tuple(bases), str(save_dir) if save_dir else None) for offset in range(count)]

