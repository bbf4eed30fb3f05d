"""The conformance runner: rewritten models against ORT's builtin gathers, bit for bit.

For every case: rewrite the model, run the original on plain ORT and the rewrite with the
GatherMultiaxis op on the same inputs, and compare every output (dtype, shape, bytes: NaN payloads
and the sign of zero count). Each case runs in a child process (``isolation.Worker``) with a timeout,
so that a crash or a hang is that case's verdict and the run goes on.

Verdicts (``VERDICTS``):

* ``passed``: compared on at least one data set, and bit-identical on every one;
* ``failed``: an output differs, only one side raised, the rewrite could not be made or loaded, or
  the rewrite crashed or hung;
* ``not compared``: no data set could be compared: every one raised on both sides (inputs the
  original model refuses), or none could be made (a sequence input, an input too large to generate);
* ``not runnable``: ORT cannot load or run the original model (its reason is kept);
* ``builtin wrong``: builtin and rewrite differ, and ONNX's reference evaluator agrees with the
  rewrite bit for bit (ORT's own kernel is wrong, e.g. its string Gather);
* ``no gather``: nothing was rewritten, so there is nothing to compare: the model holds no gather, or
  only gathers the rewriter leaves (e.g. inside com.microsoft ops; the detail lists them), or (with
  ``--ort-optimize``) ORT's optimizer folded all of them away (``folded_by_ort``);
* ``nondeterministic`` (``--runtime``): two compilations of the original model on that
  runtime give different outputs on inputs ORT accepts: the runtime's own, so the form is not judged.

With ``--runtime R`` (``--lowered`` or ``--webnn``; ``conformance.runtimes``) both the original and the
lowered or WebNN form run on R as its users run it (ORT: default optimizations), the original twice (two
compilations), and compare as above:
R refusing the original is ``not runnable`` (R's message), R refusing the form or computing something else
is ``failed``, and ``builtin wrong`` means R's kernel (onnx's reference evaluator gives what the form
gives). Data sets ORT refuses on the original (an index out of range) are out of spec: not run on R, whose
behaviour there is its own (some runtimes read out of bounds or abort the process). A WebNN form that R
refuses or computes otherwise is also run against the original with the WebNN lowering's two gather-free
steps (input shapes fixed, shape arithmetic folded): refused alike is ``not runnable``, equal is a pass (an
optimizing runtime folds and fuses more with static shapes; the detail says so).

A ``passed`` case that also has gathers left (inside contrib ops, unsupported types) names them in
its detail.

A mutation case (``MutationSeed``, ``check --mutate``) is compared three ways instead: the edited rewrite's
default session, kernel path and lowered model (``conformance.mutate``); passed when they agree bit for bit
(raising on every side agrees too), else failed.

``run(sources, ...) -> Report``; ``Report.exit_status()`` maps the verdicts to the command's exit
status (see ``gathermultiaxis.cli``).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Union, cast

import numpy as np
from onnx import ModelProto

from ..graphs import holds_gather, lower_model, rewrite_model
from ..graphs.modelfile import one_line
from ..graphs.walk import node_holders
from ..ops.contract import DOMAIN, OP_TYPE
from ..graphs.ort_optimizer import OrtOptimizeError, ort_optimize
from ..harness import bit_identical, difference, make_session, session_options, versions
from . import fuzz, mutate
from .cases import (DEFAULT_SUITE_SOURCES, CannotGenerate, CheckCase, DataSet, FileSource, InputOptions, default_suite_case, load_case,
                    describe_feeds, sized_inputs)
from .isolation import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, Outcome, Worker, WorkerPool, report_phase

VERDICTS = ("passed", "failed", "not compared", "not runnable", "builtin wrong", "no gather", "nondeterministic")


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception (``stop_on_sigterm``) so that it ends a run the way Ctrl-C does."""


class SigtermGuard:
    """What ``stop_on_sigterm`` yields: ``defer()`` once the run is over, so that a SIGTERM while the
    report is printed and written is only noted (``received``) instead of losing the report."""

    def __init__(self):
        self.deferred = self.received = False

    def defer(self) -> None:
        """From now on a SIGTERM is only noted.

        Returns:
            None.
        """
        self.deferred = True

    def handle(self, number, frame) -> None:
        """The SIGTERM handler: note the signal, and raise Terminated unless deferred.

        Args:
            number: the signal number (from ``signal``).
            frame: the interrupted frame (from ``signal``).

        Returns:
            None.

        Raises:
            Terminated: before ``defer()``.
        """
        self.received = True
        if not self.deferred:
            raise Terminated()


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[SigtermGuard]:
    """Within: SIGTERM raises Terminated in the main thread (``run`` then stops its child and returns
    the partial report, exit status 143). Outside the main thread it does nothing (Python allows
    signal handlers only there).

    Returns:
        A context manager yielding the ``SigtermGuard``.
    """
    guard = SigtermGuard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous = signal.signal(signal.SIGTERM, guard.handle)
    try:
        yield guard
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    inputs: str = ""  # what the compared data set fed each input, and from where (``cases.describe_feeds``)
    source: str = ""
    folded_by_ort: bool = False  # "no gather" because ORT's optimizer (--ort-optimize) removed every gather
    case: str = ""  # which case of the run this is (``case_keys``): what ``--resume`` matches on


@dataclass(frozen=True)
class FuzzSeed:
    """Fuzz case ``seed`` (``fuzz.fuzz_case``); a failing one is saved under ``save_dir``."""

    seed: int
    save_dir: str | None = None

    @property
    def name(self) -> str:
        return f"fuzz seed {self.seed}"


@dataclass(frozen=True)
class MutationSeed:
    """Mutation case ``seed`` (``mutate.mutation_case``) from the fuzz models and the real models at ``bases``
    (``mutate.bases_from``); a failing one is saved under ``save_dir``."""

    seed: int
    bases: tuple[str, ...] = (mutate.EXAMPLE,)
    save_dir: str | None = None

    @property
    def name(self) -> str:
        return f"mutation seed {self.seed}"


@dataclass(frozen=True)
class SuiteCase:
    """A case of the default suite by its name, read where it runs (a cluster node): what a cluster is
    sent instead of the CheckCase and its model."""

    name: str


def _runtime_flag(runtime: str | None) -> str:
    return "" if runtime is None else f" --runtime {runtime}"


Source = Union[CheckCase, FileSource, FuzzSeed, MutationSeed, SuiteCase]


# -- one case (in the child process) -------------------------------------------------------------

def _agreement(outputs: list[np.ndarray], expected: list[np.ndarray]) -> str:
    if all(bit_identical(o, e) for o, e in zip(outputs, expected)):
        return "exact"
    try:
        for o, e in zip(outputs, expected):
            if o.dtype == object or e.dtype == object:
                if o.tolist() != e.tolist():
                    return "differs"
            else:  # the tolerance of ONNX's own backend tests
                np.testing.assert_allclose(o.astype(np.float64), e.astype(np.float64), rtol=1e-3, atol=1e-7)
        return "close"
    except AssertionError:
        return "differs"


def _reference_sides_with_rewrite(model: ModelProto, feeds, got, differing: list[int]) -> bool:
    """Whether onnx's reference evaluator gives exactly the rewrite's values where builtin and rewrite
    differ (a builtin kernel bug). Any failure of the evaluator counts as no."""
    from onnx.reference import ReferenceEvaluator  # slow to import; needed only when sides differ

    try:
        # cast: run returns a dict only for intermediate=True
        reference = cast(list, ReferenceEvaluator(model).run(None, feeds))
    except Exception:  # noqa: BLE001
        return False
    return all(bit_identical(got[i], np.asarray(reference[i], dtype=np.asarray(got[i]).dtype)) for i in differing)


def _run(sess, feeds) -> tuple[list | None, BaseException | None]:
    return _call(lambda: sess.run(None, feeds))


def _call(call: Callable[[], list]) -> tuple[list | None, BaseException | None]:
    # Not timed: one cold run of cases checked side by side says nothing of speed (bench end-to-end does)
    try:
        return call(), None
    except Exception as error:  # noqa: BLE001
        return None, error


class _WebNNSessions:
    """The rewritten model lowered for WebNN with each data set's input shapes (WebNN graphs are static),
    run on plain ORT with graph optimizations off. WebNN cannot raise, so a data set the original refuses
    is not compared (``compare`` counts it as both raising, never as a pass); a node the lowering emitted
    that webnn_check flags fails the case (a tensor type WebNN lacks, bfloat16 say, is the model's own:
    ``webnn-check`` lists it)."""

    def __init__(self, rewritten, external_data_folder: str | None = None):
        self.rewritten, self.sessions = rewritten, dict[tuple, Any]()
        self.external_data_folder = external_data_folder  # the model's folder: its external data

    def run(self, output_names, feeds):
        """Run the WebNN lowering for the feeds' shapes (lowered and its session made once per shape set).

        Args:
            output_names: the outputs to compute, or None for all (as ``onnxruntime.InferenceSession.run``).
            feeds: a dict from input name to value.

        Returns:
            The outputs, a list of arrays.

        Raises:
            AssertionError: the lowering emitted a node outside WebNN's subset (the case fails).
        """
        from ..graphs.webnn import lower_for_webnn, lowering_findings

        shapes = {name: np.asarray(value).shape for name, value in feeds.items()}
        key = tuple(sorted(shapes.items()))
        if key not in self.sessions:
            lowered, report = lower_for_webnn(self.rewritten, shapes, self.external_data_folder)
            outside = lowering_findings(lowered, report, shapes, self.external_data_folder)
            if outside:
                raise AssertionError(f"the WebNN lowering emitted {outside[0].op_type} {outside[0].node!r} outside "
                                     f"WebNN's subset: {outside[0].reason}")
            self.sessions[key] = make_session(lowered, custom=False, external_data_folder=self.external_data_folder,
                                              intra_op_threads=CASE_THREADS)
        return self.sessions[key].run(output_names, feeds)


class _Comparison:
    """Runs data sets on both sessions and keeps the verdict."""

    def __init__(self, case: CheckCase, builtin, custom, result: CheckResult):
        self.case, self.builtin, self.custom, self.result = case, builtin, custom, result
        self.agreements: list[str] = []

    def run_builtin(self, number: int, data_set: DataSet):
        """Run one data set on the original model (builtin kernels).

        Args:
            number: the data set's number (for the progress phase).
            data_set: the data set.

        Returns:
            A tuple ``(outputs, error)``: the outputs, or None and the exception ORT raised.
        """
        report_phase(f"running the original model on ORT (data set {number})")
        return _run(self.builtin, data_set.feeds)

    def compare(self, number: int, data_set: DataSet, want, want_error) -> bool:
        """Compare one data set; returns False when the case has failed (stop).

        Args:
            number: the data set's number (named in the verdict's detail).
            data_set: the data set.
            want: the original model's outputs (None when it raised).
            want_error: the exception the original model raised, or None.

        Returns:
            True to go on with the next data set, False when the case has failed.
        """
        result, where = self.result, f"data set {number}: "
        report_phase(f"running the rewritten model (data set {number})")
        got, got_error = _run(self.custom, data_set.feeds)
        if want_error is not None and isinstance(self.custom, _WebNNSessions):
            # a WebNN graph cannot raise (what WebNN cannot take fell back to the standard lowering, which
            # may): the original's refusal is never compared
            result.both_raised += 1
            result.detail = f"the original raises ({one_line(want_error)}); a WebNN graph cannot"
            return True
        if want_error is not None:
            if got_error is None:
                result.verdict = "failed"
                result.detail = where + f"builtin raised ({one_line(want_error)}) but the rewrite did not"
                return False
            result.both_raised += 1
            result.compared += data_set.raising_compares
            result.detail = f"both raise: builtin {one_line(want_error)} | rewrite {one_line(got_error)}"
            return True
        if got_error is not None:
            result.verdict, result.detail = "failed", where + f"the rewrite raised: {one_line(got_error)}"
            return False
        assert got is not None  # _run returns outputs or an error
        differing = [i for i, (g, w) in enumerate(zip(got, want)) if not bit_identical(g, w)]
        if differing:
            detail = where + f"output {differing[0]}: rewritten vs builtin {difference(got[differing[0]], want[differing[0]])}"
            report_phase("asking ONNX's reference evaluator")
            if _reference_sides_with_rewrite(self.case.model, data_set.feeds, got, differing):
                result.verdict = "builtin wrong"
                result.detail = detail + "; the ONNX reference evaluator agrees with the rewrite"
                result.compared += 1
                return True
            result.verdict, result.detail = "failed", detail
            return False
        result.compared += 1
        if data_set.expected is not None:
            self.agreements.append(_agreement(got, data_set.expected))
        return True


# ORT's intra-op threads of a case's sessions (both sides of a comparison alike). One: each case runs one
# small model in its own child process, often several at once (--jobs), and ORT's default pool (a thread
# per core) spins after each run, taking the cores the other workers need. Measured, --fuzz 2000 --seed 7
# on 2 quiet cores: --jobs 1 58.6 s -> 46.3 s, --jobs 2 51.5 s -> 22.0 s; the same verdicts.
CASE_THREADS = 1


def _already_rewritten(model: ModelProto) -> bool:
    """Whether a GatherMultiaxis node is in ``model`` (a newcomer checks the file ``rewrite`` wrote)."""
    return any(node.op_type == OP_TYPE and node.domain == DOMAIN for holder in node_holders(model)
               for node in holder.node)


def check_case(case: CheckCase, options: InputOptions = InputOptions(),
               mode: CheckMode = CheckMode.DEFAULT, runtime: str | None = None) -> CheckResult:
    """The verdict on one case (see the module docstring), comparing as ``mode`` says.

    Args:
        case: the case (a model, its data sets and its external data folder).
        options: how inputs are made (``--input-shapes``, ``--load-inputs``, the seed).
        mode: what the model is compared as (``CheckMode``: rewritten, ORT-optimized, lowered, WebNN, session).
        runtime: where the original and the form both run (``conformance.runtimes.RUNTIMES``, only with
            ``CheckMode.LOWERED`` or ``CheckMode.WEBNN``); None: the original and the form on ORT with graph
            optimizations off, as ``mode`` says.

    Returns:
        The ``CheckResult``.
    """
    result = CheckResult(case.name, "passed", source=case.source)
    report_phase("rewriting")
    rewritten_data_folder = case.external_data_folder
    try:
        model, optimize = case.model, mode.ort_optimize_rewrite
        if optimize and case.external_data_folder:  # ORT's optimizer needs the folder: it reads the data in
            model = ort_optimize(model, case.external_data_folder, session_options=session_options)
            optimize, rewritten_data_folder = False, None
        rewritten, report = rewrite_model(model, ort_optimize=optimize, session_options=session_options)
    except OrtOptimizeError as error:  # ORT cannot even load the original
        return CheckResult(case.name, "not runnable", detail=one_line(error), source=case.source)
    except Exception as error:  # noqa: BLE001
        return CheckResult(case.name, "failed", detail=f"rewrite raised: {one_line(error)}", source=case.source)
    result.rewritten, result.left = report.rewritten, report.left
    result.left_reasons = [f"{o.op_type} {o.node!r}: {o.reason}" for o in report.outcomes if not o.rewritten]
    if not report.rewritten:
        result.verdict = "no gather"
        result.folded_by_ort = mode.ort_optimize_rewrite and not report.left and holds_gather(case.model)
        result.detail = ("nothing to compare: " + (
            f"{report.left} gather(s) left: {'; '.join(result.left_reasons)}" if report.left else
            "ONNX Runtime's optimizer folded every gather of the model away" if result.folded_by_ort else
            "the model holds GatherMultiaxis nodes, no gather: it is already rewritten; check the original "
            "model (the check rewrites it itself)" if _already_rewritten(case.model) else
            "the model holds no gather"))
        return result
    if runtime is not None:
        return _check_on_runtime(case, options, mode, runtime, rewritten, rewritten_data_folder, result)
    report_phase("loading the original model on ORT")
    try:
        builtin = make_session(case.model, custom=False, optimized=mode.optimized, intra_op_threads=CASE_THREADS,
                               external_data_folder=case.external_data_folder)
    except Exception as error:  # noqa: BLE001
        result.verdict, result.detail = "not runnable", one_line(error)
        return result
    if mode is CheckMode.LOWERED:
        lowered = _lowered(rewritten, rewritten_data_folder, result)
        if lowered is None:
            return result
        rewritten = lowered
    report_phase("loading the rewritten model")
    try:
        custom = _WebNNSessions(rewritten, rewritten_data_folder) if mode is CheckMode.WEBNN else make_session(
            rewritten, custom=mode is not CheckMode.LOWERED, optimized=mode.optimized,
            external_data_folder=rewritten_data_folder, intra_op_threads=CASE_THREADS,
            run_builtin_gathers=mode is CheckMode.SESSION)
    except Exception as error:  # noqa: BLE001
        result.verdict, result.detail = "failed", f"the rewritten model does not load: {one_line(error)}"
        return result
    comparison = _Comparison(case, builtin, custom, result)
    given = case.data_sets or list(options.loaded)
    try:
        if given:
            result.inputs = describe_feeds(case.model, given[0].feeds,
                                           case.data_sets_origin if case.data_sets else "loaded by --load-inputs")
            if len(given) > 1:
                result.inputs += f"; and {len(given) - 1} more data set(s)"
            for number, data_set in enumerate(given):
                if not comparison.compare(number, data_set, *comparison.run_builtin(number, data_set)):
                    return result
        else:
            first_refused, accepted, attempts = None, False, 0
            for feeds in sized_inputs(case.model, options.seed, options.shapes):
                data_set, attempts = DataSet(feeds), attempts + 1
                want, want_error = comparison.run_builtin(0, data_set)
                if want_error is None:
                    result.inputs = describe_feeds(case.model, feeds, "generated", options.shapes)
                    if not comparison.compare(0, data_set, want, None):
                        return result
                    accepted = True
                    break
                first_refused = first_refused or (data_set, want_error)
            # the original refused every attempt: the rewrite must refuse the first one too
            if not accepted and first_refused:
                result.inputs = describe_feeds(case.model, first_refused[0].feeds, "generated", options.shapes)
                if attempts > 1:
                    result.inputs += f"; the first of {attempts} sizes tried, all refused"
                if not comparison.compare(0, first_refused[0], None, first_refused[1]):
                    return result
    except CannotGenerate as reason:
        result.verdict, result.detail = "not compared", str(reason)
        return result
    if comparison.agreements:
        result.expected = min(comparison.agreements, key=["differs", "close", "exact"].index)
    if result.verdict == "passed" and report.left:  # not silently: the gathers the comparison did not cover
        result.detail = f"{report.left} gather(s) left: {'; '.join(result.left_reasons)}"
    if result.compared == 0 and result.verdict == "passed":
        result.verdict = "not compared"
        result.detail = ("every data set raised on both sides, so nothing was compared (" + result.detail +
                         f"); inputs: {result.inputs}; give inputs the model accepts with --input-shapes or "
                         "--load-inputs")
    return result


def _lowered(rewritten: ModelProto, data_folder: str | None, result: CheckResult) -> ModelProto | None:
    """``lower``'s model of ``rewritten``, or None with ``result`` failed (the lowering raised or left a node)."""
    report_phase("lowering the rewritten model")
    try:
        lowered, lowering = lower_model(rewritten, data_folder)
    except Exception as error:  # noqa: BLE001
        result.verdict, result.detail = "failed", f"lowering raised: {one_line(error)}"
        return None
    if lowering.left:  # no other runtime could load it
        reasons = "; ".join(f"{o.node!r}: {o.reason}" for o in lowering.outcomes if not o.lowered)
        result.verdict, result.detail = "failed", f"lowering left {lowering.left} GatherMultiaxis node(s): {reasons}"
        return None
    return lowered


def _with_data(model: ModelProto, data_folder: str | None) -> ModelProto:
    """``model`` with its external tensors read in (other runtimes get the model as bytes)."""
    if not data_folder:
        return model
    from onnx.external_data_helper import load_external_data_for_model

    copy = ModelProto()
    copy.CopyFrom(model)
    load_external_data_for_model(copy, data_folder)
    return copy


def _runtime_data_sets(case: CheckCase, options: InputOptions, oracle) -> list[DataSet]:
    """The data sets to run on another runtime: the case's or loaded ones, else the first generated one ORT
    accepts (the first generated one when ORT cannot run the original)."""
    given = case.data_sets or list(options.loaded)
    if given:
        return given
    first = None
    for feeds in sized_inputs(case.model, options.seed, options.shapes):
        first = first or DataSet(feeds)
        if oracle is None or _run(oracle, feeds)[1] is None:
            return [DataSet(feeds)]
    return [first] if first else []


def _static_original(target, case: CheckCase, shapes: dict[str, tuple[int, ...]], feeds) -> Any:
    """The original with the WebNN lowering's two gather-free steps (input shapes fixed, shape arithmetic
    folded) run on ``target``: its outputs, the runtime's ``Refused``, or None when it cannot be made or
    raises. Static shapes change what an optimizing runtime does (it folds and fuses more), so a WebNN form
    is also judged against this."""
    from . import runtimes
    from ..graphs.webnn import FOLD_ROUNDS, fix_input_shapes, fold_shape_arithmetic

    report_phase("running the original with its input shapes fixed (the WebNN form's baseline)")
    try:
        model = ModelProto()
        model.CopyFrom(case.model)
        fix_input_shapes(model, shapes)
        for _ in range(FOLD_ROUNDS):
            if not fold_shape_arithmetic(model, case.external_data_folder):
                break
        return target.load(_with_data(model, case.external_data_folder)).run(feeds)
    except runtimes.Refused as refused:
        return refused
    except Exception:  # noqa: BLE001 - no baseline: the form is judged against the original alone
        return None


def _check_on_runtime(case: CheckCase, options: InputOptions, mode: CheckMode, name: str, rewritten: ModelProto,
                      rewritten_data_folder: str | None, result: CheckResult) -> CheckResult:
    """The verdict with the original and the lowered or WebNN form both on runtime ``name`` (see the
    module docstring); ORT with optimizations off only says which data sets are in spec."""
    from . import runtimes
    from ..graphs.webnn import lower_for_webnn, lowering_findings

    if mode not in (CheckMode.LOWERED, CheckMode.WEBNN):
        raise ValueError(f"--runtime {name} goes with --lowered or --webnn, not {mode.value}")
    target = runtimes.runtime(name)
    form_name = "WebNN form" if mode is CheckMode.WEBNN else "lowered model"
    lowered = None
    if mode is CheckMode.LOWERED:
        lowered = _lowered(rewritten, rewritten_data_folder, result)
        if lowered is None:
            return result
        lowered = _with_data(lowered, rewritten_data_folder)
    report_phase("loading the original model on ORT (which inputs are in spec)")
    try:
        oracle = make_session(case.model, custom=False, external_data_folder=case.external_data_folder,
                              intra_op_threads=CASE_THREADS)
    except Exception:  # noqa: BLE001 - ORT cannot run it (bfloat16 kernels, say): every data set counts
        oracle = None
    original = _with_data(case.model, case.external_data_folder)
    report_phase(f"loading the original model on {name} (two compilations)")
    try:
        first, second = target.load(original), target.load(original)
    except runtimes.Refused as error:
        result.verdict, result.detail = "not runnable", f"{name} refuses the original: {error}"
        return result
    forms: dict[tuple, Any] = {}  # input shapes -> the form loaded on the runtime
    out_of_spec = original_raised = 0
    try:
        data_sets = _runtime_data_sets(case, options, oracle)
    except CannotGenerate as reason:
        result.verdict, result.detail = "not compared", str(reason)
        return result
    for number, data_set in enumerate(data_sets):
        where, feeds = f"data set {number}: ", data_set.feeds
        if oracle is not None and _run(oracle, feeds)[1] is not None:
            out_of_spec += 1
            continue
        try:
            report_phase(f"running the original model on {name} (data set {number}, first compilation)")
            want, raised = _call(lambda: first.run(feeds))
            if raised is not None:
                raise raised
            report_phase(f"running the original model on {name} (data set {number}, second compilation)")
            again = second.run(feeds)
        except runtimes.Refused as error:
            result.verdict, result.detail = "not runnable", f"{name} refuses the original: {error}"
            return result
        except Exception as error:  # noqa: BLE001 - the original raises on inputs ORT accepts: R's limit
            original_raised += 1
            result.detail = f"the original raises on {name} on inputs ORT accepts: {one_line(error)}"
            continue
        assert want is not None
        unequal = [i for i, (a, b) in enumerate(zip(want, again)) if not bit_identical(a, b)]
        if unequal:
            result.verdict = "nondeterministic"
            result.detail = (where + f"two compilations of the original on {name} differ, output {unequal[0]}: "
                             f"{difference(again[unequal[0]], want[unequal[0]])} ({name}'s own; the form is not judged)")
            return result
        shapes = {key: np.asarray(value).shape for key, value in feeds.items()}
        key = tuple(sorted(shapes.items()))
        try:
            if key not in forms:
                if lowered is None:  # WebNN: lowered for these shapes
                    report_phase(f"lowering for WebNN (data set {number})")
                    form, report = lower_for_webnn(rewritten, shapes, rewritten_data_folder)
                    outside = lowering_findings(form, report, shapes, rewritten_data_folder)
                    if outside:
                        result.verdict = "failed"
                        result.detail = (where + f"the WebNN lowering emitted {outside[0].op_type} {outside[0].node!r} "
                                         f"outside WebNN's subset: {outside[0].reason}")
                        return result
                    form = _with_data(form, rewritten_data_folder)
                else:
                    form = lowered
                report_phase(f"loading the {form_name} on {name}")
                forms[key] = target.load(form)
            report_phase(f"running the {form_name} on {name} (data set {number})")
            got, raised = _call(lambda: forms[key].run(feeds))
            if raised is not None:
                raise raised
        except runtimes.Refused as error:
            baseline = _static_original(target, case, shapes, feeds) if lowered is None else None
            if isinstance(baseline, runtimes.Refused):
                result.verdict = "not runnable"
                result.detail = (where + f"{name} refuses the WebNN form ({error}) and the original with its input "
                                 f"shapes fixed and shape arithmetic folded alike ({baseline}): not the gathers'")
                return result
            result.verdict, result.detail = "failed", where + f"{name} refuses the {form_name}: {error}"
            return result
        except Exception as error:  # noqa: BLE001
            result.verdict, result.detail = "failed", where + f"the {form_name} raised on {name}: {one_line(error)}"
            return result
        assert got is not None
        differing = [i for i, (g, w) in enumerate(zip(got, want)) if not bit_identical(g, w)]
        if differing:
            detail = (where + f"output {differing[0]} on {name}: {form_name} vs original "
                      f"{difference(got[differing[0]], want[differing[0]])}")
            baseline = _static_original(target, case, shapes, feeds) if lowered is None else None
            if isinstance(baseline, list) and all(bit_identical(g, b) for g, b in zip(got, baseline)):
                result.compared += 1
                result.detail = (detail + f"; bit-identical to the original with its input shapes fixed and shape "
                                 f"arithmetic folded: {name}'s optimizer, not the gathers")
                continue
            report_phase("asking ONNX's reference evaluator")
            if _reference_sides_with_rewrite(original, feeds, got, differing):
                result.verdict = "builtin wrong"
                result.detail = detail + f"; ONNX's reference evaluator agrees with the {form_name} ({name}'s kernel)"
                result.compared += 1
                continue
            result.verdict, result.detail = "failed", detail
            return result
        result.compared += 1
    if result.compared == 0 and result.verdict == "passed":
        result.verdict = "not compared"
        result.detail = "; ".join(
            [f"{out_of_spec} data set(s) out of spec (ORT refuses the original: not run on {name})"] * bool(out_of_spec)
            + [result.detail] * bool(original_raised)) or "no data set"
    return result


def check_mutation_seed(source: MutationSeed) -> CheckResult:
    """The verdict on one mutation case: passed when its default session, kernel path and lowered model agree
    bit for bit (raising on every side agrees too), else failed, with what differs.

    Args:
        source: the MutationSeed.

    Returns:
        The ``CheckResult`` (``rewritten``: the edited model's GatherMultiaxis nodes).
    """
    report_phase("mutating a rewritten model")
    try:
        case = mutate.mutation_case(source.seed, mutate.bases_from(source.bases))
    except Exception as error:  # noqa: BLE001
        return CheckResult(source.name, "failed", detail=f"the mutated case could not be made: {one_line(error)}")
    comparison = mutate.compare_sides(mutate.run_sides(case.model, case.feeds))
    gathers = sum(node.op_type == OP_TYPE and node.domain == DOMAIN for holder in node_holders(case.model)
                  for node in holder.node)
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
    """The child process's task: read the source, then check it.

    Args:
        task: a tuple ``(source, mode, options)`` or ``(source, mode, options, runtime)``: a ``SuiteCase``,
            ``FuzzSeed``, ``FileSource`` or ``CheckCase``; the ``CheckMode``; the ``InputOptions``; the
            runtime's name (default None: ORT as ``mode`` says).

    Returns:
        The ``CheckResult`` (a file that cannot be read: "not runnable").
    """
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
            flag = {CheckMode.DEFAULT: "", CheckMode.ORT_OPTIMIZED: " --ort-optimize", CheckMode.LOWERED: " --lowered",
                    CheckMode.WEBNN: " --webnn", CheckMode.SESSION: " --session"}
            result.detail += (f" (replay: gathermultiaxis check --fuzz 1 --seed {source.seed}{flag[mode]}"
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


# -- the run -------------------------------------------------------------------------------------

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
        """How many cases got each verdict.

        Returns:
            A dict from each of ``VERDICTS`` to its count.
        """
        return {verdict: sum(r.verdict == verdict for r in self.results) for verdict in VERDICTS}

    def summary_line(self) -> str:
        """The counts in one line (``"... passed, ... failed, ..."``; "no gather" and "nondeterministic" only
        when there is one).

        Returns:
            The line, with " (interrupted)" when the run was.
        """
        counts = self.counts()
        # "no gather" only when it happened: the five-verdict line users and the README quote stays as it was
        line = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v not in ("no gather", "nondeterministic") or counts[v])
        if self.interrupted:
            line += " (interrupted)"
        return line

    def exit_status(self, allowed: Iterable[str] = ()) -> int:
        """0 when every case passed (or found ORT wrong); 1 on any failure; 3 on any case not compared,
        not runnable or nondeterministic, else 4 on any case with no gather, unless that verdict is ``allowed``; when
        interrupted, 130 (Ctrl-C) or 143 (SIGTERM), the shell's codes for a death by those signals.

        Args:
            allowed: verdicts that do not make the status 3 or 4.

        Returns:
            The exit status, an int.
        """
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
        """The report as written to ``--json``.

        Returns:
            A JSON-ready dict: summary, counts, interrupted, stopped_by, mode, command, versions and results.
        """
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
    """What a cluster is sent for ``source``: a default-suite case by name; files and fuzz seeds are
    references already."""
    if isinstance(source, CheckCase):
        if source.source not in DEFAULT_SUITE_SOURCES:
            raise ValueError(f"case {source.name!r} is a model made in Python: a cluster takes files, fuzz seeds "
                             f"and default-suite cases (save it with onnx.save_model and pass its path)")
        return SuiteCase(source.name)
    return source


def case_keys(sources: list[Source]) -> list[str]:
    """What names each source in a report, for ``--resume``: a fuzz case's seed ("fuzz seed 7"), a file's
    path, a default-suite case's name; a key met again gets " #2", " #3".

    Args:
        sources: the run's sources, in order.

    Returns:
        One key per source, in the same order.
    """
    keys, seen = list[str](), dict[str, int]()
    for source in sources:
        key = source.name if isinstance(source, (FuzzSeed, MutationSeed, CheckCase, SuiteCase)) else source.path
        seen[key] = seen.get(key, 0) + 1
        keys.append(key if seen[key] == 1 else f"{key} #{seen[key]}")
    return keys


# Runtimes whose cases that did not pass run again in a fresh child: OpenVINO 2026.4 corrupts memory (a
# GatherElements with indices smaller than the data off the axis), and later cases in the same child crash.
FRESH_RETRY = ("openvino",)


def run(sources: Iterable[Source], *, options: InputOptions = InputOptions(), timeout: float = DEFAULT_TIMEOUT_S,
        fail_fast: bool = False, on_result: Callable[[CheckResult], None] | None = None,
        command: list[str] | None = None, isolate: bool = True, mode: CheckMode = CheckMode.DEFAULT,
        jobs: int = 1, finished: Iterable[CheckResult] = (), cluster: str | None = None,
        cluster_timeout: float = DEFAULT_CONNECT_TIMEOUT_S, runtime: str | None = None) -> Report:
    """Check every source, each in a child process with ``timeout`` seconds, ``jobs`` at a time
    (``isolate=False``: one after another in this process, without timeout). The report lists the cases
    in the order of ``sources`` whatever ``jobs`` is; ``on_result`` is called (in this thread) as each
    case finishes. ``finished``: results of an earlier run of the same sources (``--resume``, matched by
    their ``case``), kept instead of running those cases again. Ctrl-C (KeyboardInterrupt), or SIGTERM
    within ``stop_on_sigterm()``, ends the run early: the children are stopped, and the report holds what
    ran and says it was interrupted.

    ``cluster``: the address of a Dask scheduler (``"local"``: a LocalCluster of ``jobs`` workers started
    for this run), to which every case is sent by reference (``conformance.cluster``).

    Args:
        sources: the cases: ``CheckCase``, ``FileSource``, ``FuzzSeed`` or ``SuiteCase`` objects.
        options: how inputs are made (``InputOptions``).
        timeout: seconds each case may take in its child process.
        fail_fast: stop at the first failed case (later cases are not reported).
        on_result: called with each ``CheckResult`` as it finishes, or None.
        command: the command line, recorded in the report.
        isolate: run each case in a child process (False: in this process, without timeout).
        mode: what the models are compared as (``CheckMode``).
        jobs: how many cases run at a time.
        finished: results of an earlier run to keep (``--resume``).
        cluster: a Dask scheduler's address, "local", or None (no cluster).
        cluster_timeout: seconds the scheduler at ``cluster`` may take to answer.
        runtime: where the original and the lowered or WebNN form both run (``conformance.runtimes.RUNTIMES``,
            with ``mode`` LOWERED or WEBNN, without ``cluster``), or None (ORT as ``mode`` says). On OpenVINO a case that
            did not pass is checked again in a fresh child process: OpenVINO corrupts its process's memory
            on some models, and the damage shows on later, innocent cases.

    Returns:
        The ``Report``.

    Raises:
        ValueError: with ``cluster``, a case that is a model made in Python (not a file, fuzz seed or
            default-suite case), or ``cluster`` with a runtime.
        cluster.NoScheduler: no Dask scheduler answers at ``cluster`` within ``cluster_timeout`` seconds.
    """
    if cluster is not None and runtime is not None:
        raise ValueError(f"--runtime {runtime} runs on this machine only, not with --cluster")
    sources = list(sources)
    keys = case_keys(sources)
    report = Report(command=list(command or []), mode=mode.value, runtime=runtime or "")
    if runtime is not None:
        from .runtimes import runtime_version

        report.versions[runtime] = runtime_version(runtime)
    done: dict[int, CheckResult] = {}
    earlier = {result.case: result for result in finished}
    for number, key in enumerate(keys):
        if key in earlier:
            done[number] = earlier[key]
    cutoff = len(sources)  # with fail_fast: the first failed case; the cases after it are not reported
    for number, result in done.items():
        if fail_fast and result.verdict == "failed":
            cutoff = min(cutoff, number)
    tasks = [(number, (source, mode, options, runtime)) for number, source in enumerate(sources)
             if number not in done and number < cutoff]

    def finish(number: int, source: Source, outcome: Outcome) -> None:
        nonlocal cutoff
        if runtime in FRESH_RETRY and isolate and (outcome.status != "done" or outcome.value.verdict != "passed"):
            with Worker() as fresh:
                outcome = fresh.run(check_source, (source, mode, options, runtime), timeout)
        result = outcome.value if outcome.status == "done" else _isolated_failure(source, outcome)
        result.case = keys[number]
        done[number] = result
        if on_result is not None:
            on_result(result)
        if fail_fast and result.verdict == "failed" and number < cutoff:
            cutoff = number

    try:
        if not isolate:
            for number, task in tasks:
                if number < cutoff:
                    finish(number, sources[number], Outcome(check_source(task)))
        elif cluster is not None:
            from .cluster import DaskPool  # Dask is an extra: imported only here

            by_reference = [(number, (_reference(sources[number]), mode)) for number, _ in tasks]
            with DaskPool(cluster, jobs, cluster_timeout) as pool:
                for number, outcome in pool.outcomes(check_source, by_reference, timeout, shared=options):
                    if number < cutoff and outcome.status != "cancelled":  # cancelled: after the cutoff
                        finish(number, sources[number], outcome)
                        pool.cancel(lambda key: key < cutoff)
        else:
            with WorkerPool(jobs) as worker_pool:
                for number, outcome in worker_pool.outcomes(check_source, tasks, timeout):
                    if number < cutoff:
                        finish(number, sources[number], outcome)
                        worker_pool.cancel(lambda key: key < cutoff)
    except KeyboardInterrupt as stop:
        report.interrupted = True
        report.stopped_by = "SIGTERM" if isinstance(stop, Terminated) else "SIGINT"
    report.results = [done[number] for number in sorted(done) if number <= cutoff]
    return report


def fuzz_sources(count: int, seed: int, save_dir: str | Path | None = None) -> list[FuzzSeed]:
    """Fuzz cases ``seed`` to ``seed + count - 1``; failing ones are saved under ``save_dir`` (default:
    a new temporary folder).

    Args:
        count: how many fuzz cases.
        seed: the first case's seed.
        save_dir: the folder for reproducers of failing cases, or None.

    Returns:
        A list of ``FuzzSeed``.
    """
    return [FuzzSeed(seed + offset, str(save_dir) if save_dir else None) for offset in range(count)]


def mutation_sources(count: int, seed: int, bases: tuple[str, ...] = (mutate.EXAMPLE,),
                     save_dir: str | Path | None = None) -> list[MutationSeed]:
    """Mutation cases ``seed`` to ``seed + count - 1`` from the fuzz models and the real models at ``bases``
    (``mutate.EXAMPLE`` or model files); failing ones are saved under ``save_dir`` (default: a new temporary
    folder).

    Args:
        count: how many cases.
        seed: the first case's seed.
        bases: the real models mutated besides the fuzz models.
        save_dir: the folder for the edited models of failing cases, or None.

    Returns:
        A list of ``MutationSeed``.
    """
    return [MutationSeed(seed + offset, tuple(bases), str(save_dir) if save_dir else None) for offset in range(count)]


def format_table(results: list[CheckResult]) -> str:
    """The results as a text table: one line per case, then its detail (when it did not pass) and the gathers
    it left.

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
