"""One case's verdict (``check_results.VERDICTS``), in the runner's child process: the rewrite (or the
form ``mode`` names) against the original on ORT, every output compared bit for bit (dtype, shape, bytes).

With ``runtime`` (``--runtime R``, with ``--lowered`` or ``--webnn``) the original (compiled twice) and the
form both run on R as its users run it: R refusing the original is ``not runnable``, refusing the form or
computing otherwise ``failed``, ``builtin wrong`` R's kernel. Data sets ORT refuses on the original are
out of spec and not run on R. A WebNN form R refuses or computes otherwise is also judged against the
original with its input shapes fixed and shape arithmetic folded (an optimizing runtime folds more)."""

from __future__ import annotations

from typing import Any, Callable, NoReturn, cast

import numpy as np
from onnx import ModelProto

from ..graphs import RewriteReport, holds_gather, lower_model, rewrite_model
from ..graphs.modelfile import one_line
from ..graphs.rewrite.ort_optimizer import OrtOptimizeError, ort_optimize
from ..graphs.ir.walk import any_node
from ..harness import bit_identical, difference, make_session, session_options
from ..ops.contract import is_gather_multiaxis
from .cases import CannotGenerate, CheckCase, DataSet, InputOptions
from .check_results import CheckMode, CheckResult
from .input_generation import describe_feeds, sized_inputs
from .isolation import report_phase

# ORT's intra-op threads of a case's sessions (both sides of a comparison alike). One: each case runs one
# small model in its own child process, often several at once (--jobs), and ORT's default pool (a thread
# per core) spins after each run, taking the cores the other workers need (docs/conformance.md has the times).
CASE_THREADS = 1


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
    """Whether onnx's reference evaluator gives exactly the rewrite's values where the two sides differ."""
    from onnx.reference import ReferenceEvaluator  # slow to import; needed only when sides differ

    try:
        # cast: run returns a dict only for intermediate=True
        reference = cast(list, ReferenceEvaluator(model).run(None, feeds))
    except Exception:  # noqa: BLE001 - any failure of the evaluator counts as no
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


def _webnn_form(rewritten: ModelProto, shapes: dict, data_folder: str | None) -> tuple[ModelProto, str]:
    """The WebNN lowering for ``shapes``, and what it emitted outside WebNN's subset ("" when nothing)."""
    from ..graphs.webnn import lower_for_webnn, lowering_findings

    lowered, report = lower_for_webnn(rewritten, shapes, data_folder)
    outside = lowering_findings(lowered, report, shapes, data_folder)
    if not outside:
        return lowered, ""
    return lowered, (f"the WebNN lowering emitted {outside[0].op_type} {outside[0].node!r} outside WebNN's subset: "
                     f"{outside[0].reason}")


class WebNNSessions:
    """The rewritten model lowered for WebNN with each data set's input shapes (WebNN graphs are static),
    run on plain ORT with graph optimizations off. WebNN cannot raise, so a data set the original refuses
    is not compared (``Comparison.compare`` counts it as both raising, never as a pass); a node the lowering
    emitted that webnn_check flags fails the case (a tensor type WebNN lacks, bfloat16 say, is the model's
    own: ``webnn-check`` lists it)."""

    def __init__(self, rewritten, external_data_folder: str | None = None):
        self.rewritten, self.sessions = rewritten, dict[tuple, Any]()
        self.external_data_folder = external_data_folder  # the model's folder: its external data

    def run(self, output_names, feeds):
        """As ``onnxruntime.InferenceSession.run``; raises AssertionError on a node outside WebNN's subset."""
        shapes = {name: np.asarray(value).shape for name, value in feeds.items()}
        key = tuple(sorted(shapes.items()))
        if key not in self.sessions:
            lowered, outside = _webnn_form(self.rewritten, shapes, self.external_data_folder)
            if outside:
                raise AssertionError(outside)
            self.sessions[key] = make_session(lowered, custom=False, external_data_folder=self.external_data_folder,
                                              intra_op_threads=CASE_THREADS)
        return self.sessions[key].run(output_names, feeds)


class Comparison:
    """Runs data sets on both sessions and keeps the verdict."""

    def __init__(self, case: CheckCase, builtin, custom, result: CheckResult):
        self.case, self.builtin, self.custom, self.result = case, builtin, custom, result
        self.agreements: list[str] = []

    def run_builtin(self, number: int, data_set: DataSet):
        """The original model's ``(outputs, error)`` on data set ``number`` (builtin kernels)."""
        report_phase(f"running the original model on ORT (data set {number})")
        return _run(self.builtin, data_set.feeds)

    def compare(self, number: int, data_set: DataSet, want, want_error) -> bool:
        """Compare data set ``number`` with the original's ``want`` or ``want_error``; False: the case failed."""
        result, where = self.result, f"data set {number}: "
        report_phase(f"running the rewritten model (data set {number})")
        got, got_error = _run(self.custom, data_set.feeds)
        if want_error is not None and isinstance(self.custom, WebNNSessions):
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

    def given(self, given: list[DataSet], origin: str) -> None:
        """Compare every given data set (the case's, or loaded by --load-inputs), up to the first failure."""
        result = self.result
        result.inputs = describe_feeds(self.case.model, given[0].feeds, origin)
        if len(given) > 1:
            result.inputs += f"; and {len(given) - 1} more data set(s)"
        for number, data_set in enumerate(given):
            if not self.compare(number, data_set, *self.run_builtin(number, data_set)):
                return

    def generated(self, options: InputOptions) -> None:
        """Compare the first generated data set the original accepts, else the first one it refuses."""
        model, result = self.case.model, self.result
        first_refused, attempts = None, 0
        for feeds in sized_inputs(model, options.seed, options.shapes):
            data_set, attempts = DataSet(feeds), attempts + 1
            want, want_error = self.run_builtin(0, data_set)
            if want_error is None:
                result.inputs = describe_feeds(model, feeds, "generated", options.shapes)
                self.compare(0, data_set, want, None)
                return
            first_refused = first_refused or (data_set, want_error)
        # the original refused every attempt: the rewrite must refuse the first one too
        if first_refused:
            result.inputs = describe_feeds(model, first_refused[0].feeds, "generated", options.shapes)
            if attempts > 1:
                result.inputs += f"; the first of {attempts} sizes tried, all refused"
            self.compare(0, first_refused[0], None, first_refused[1])


def _already_rewritten(model: ModelProto) -> bool:
    """Whether a GatherMultiaxis node is in ``model`` (a newcomer checks the file ``rewrite`` wrote)."""
    return any_node(model, is_gather_multiaxis)


def _rewritten(case: CheckCase, mode: CheckMode) -> tuple[ModelProto, RewriteReport, str | None] | CheckResult:
    """The rewrite as ``mode`` makes it, its report and its data folder; or the verdict when it cannot be made."""
    report_phase("rewriting")
    data_folder = case.external_data_folder
    try:
        model, optimize = case.model, mode.ort_optimize_rewrite
        if optimize and case.external_data_folder:  # ORT's optimizer needs the folder: it reads the data in
            model = ort_optimize(model, case.external_data_folder, session_options=session_options)
            optimize, data_folder = False, None
        rewritten, report = rewrite_model(model, ort_optimize=optimize, session_options=session_options)
    except OrtOptimizeError as error:  # ORT cannot even load the original
        return CheckResult(case.name, "not runnable", detail=one_line(error), source=case.source)
    except Exception as error:  # noqa: BLE001
        return CheckResult(case.name, "failed", detail=f"rewrite raised: {one_line(error)}", source=case.source)
    return rewritten, report, data_folder


def _no_gather(case: CheckCase, mode: CheckMode, report: RewriteReport, result: CheckResult) -> CheckResult:
    """The "no gather" verdict, saying why nothing was rewritten."""
    result.verdict = "no gather"
    result.folded_by_ort = mode.ort_optimize_rewrite and not report.left and holds_gather(case.model)
    result.detail = ("nothing to compare: " + (
        f"{report.left} gather(s) left: {'; '.join(result.left_reasons)}" if report.left else
        "ONNX Runtime's optimizer folded every gather of the model away" if result.folded_by_ort else
        "the model holds GatherMultiaxis nodes, no gather: it is already rewritten; check the original "
        "model (the check rewrites it itself)" if _already_rewritten(case.model) else
        "the model holds no gather"))
    return result


def _comparison(case: CheckCase, mode: CheckMode, rewritten: ModelProto, data_folder: str | None,
                result: CheckResult) -> Comparison | None:
    """Both sides loaded on ORT as ``mode`` says, or None with ``result`` holding why not."""
    report_phase("loading the original model on ORT")
    try:
        builtin = make_session(case.model, custom=False, optimized=mode.optimized, intra_op_threads=CASE_THREADS,
                               external_data_folder=case.external_data_folder)
    except Exception as error:  # noqa: BLE001
        result.verdict, result.detail = "not runnable", one_line(error)
        return None
    if mode is CheckMode.LOWERED:
        lowered = lowered_model(rewritten, data_folder, result)
        if lowered is None:
            return None
        rewritten = lowered
    report_phase("loading the rewritten model")
    try:
        custom = WebNNSessions(rewritten, data_folder) if mode is CheckMode.WEBNN else make_session(
            rewritten, custom=mode is not CheckMode.LOWERED, optimized=mode.optimized,
            external_data_folder=data_folder, intra_op_threads=CASE_THREADS,
            run_builtin_gathers=mode is CheckMode.SESSION)
    except Exception as error:  # noqa: BLE001
        result.verdict, result.detail = "failed", f"the rewritten model does not load: {one_line(error)}"
        return None
    return Comparison(case, builtin, custom, result)


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
    made = _rewritten(case, mode)
    if isinstance(made, CheckResult):
        return made
    rewritten, report, data_folder = made
    result = CheckResult(case.name, "passed", source=case.source)
    result.rewritten, result.left = report.rewritten, report.left
    result.left_reasons = [f"{o.op_type} {o.node!r}: {o.reason}" for o in report.outcomes if not o.rewritten]
    if not report.rewritten:
        return _no_gather(case, mode, report, result)
    if runtime is not None:
        return check_on_runtime(case, options, mode, runtime, rewritten, data_folder, result)
    comparison = _comparison(case, mode, rewritten, data_folder, result)
    if comparison is None:
        return result
    try:
        if case.data_sets:
            comparison.given(case.data_sets, case.data_sets_origin)
        elif options.loaded:
            comparison.given(list(options.loaded), "loaded by --load-inputs")
        else:
            comparison.generated(options)
    except CannotGenerate as reason:
        result.verdict, result.detail = "not compared", str(reason)
        return result
    if result.verdict not in ("passed", "builtin wrong"):
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


def lowered_model(rewritten: ModelProto, data_folder: str | None, result: CheckResult) -> ModelProto | None:
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
    """The case's or loaded data sets, else the first generated one ORT accepts (or the first one)."""
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
    from ..graphs.webnn.static_shapes import FOLD_ROUNDS, fix_input_shapes, fold_shape_arithmetic

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


class _Decided(Exception):
    """The case's verdict is in its result: no further data set is run."""


class _RuntimeCheck:
    """The original and the lowered or WebNN form of one case, both on runtime ``name``."""

    def __init__(self, case: CheckCase, mode: CheckMode, name: str, rewritten: ModelProto,
                 data_folder: str | None, result: CheckResult):
        from . import runtimes

        self.case, self.mode, self.name, self.result = case, mode, name, result
        self.rewritten, self.data_folder = rewritten, data_folder
        self.target = runtimes.runtime(name)
        self.form_name = "WebNN form" if mode is CheckMode.WEBNN else "lowered model"
        self.lowered: ModelProto | None = None  # the lowered model (None: WebNN, lowered per shape set)
        self.forms: dict[tuple, Any] = {}  # input shapes -> the form loaded on the runtime
        self.out_of_spec = self.original_raised = 0

    def load_originals(self) -> None:
        """ORT's session of the original (which data sets are in spec) and two compilations on the runtime."""
        from . import runtimes

        if self.mode is CheckMode.LOWERED:
            lowered = lowered_model(self.rewritten, self.data_folder, self.result)
            if lowered is None:
                raise _Decided()
            self.lowered = _with_data(lowered, self.data_folder)
        report_phase("loading the original model on ORT (which inputs are in spec)")
        try:
            self.oracle = make_session(self.case.model, custom=False, intra_op_threads=CASE_THREADS,
                                       external_data_folder=self.case.external_data_folder)
        except Exception:  # noqa: BLE001 - ORT cannot run it (bfloat16 kernels, say): every data set counts
            self.oracle = None
        self.original = _with_data(self.case.model, self.case.external_data_folder)
        report_phase(f"loading the original model on {self.name} (two compilations)")
        try:
            self.first, self.second = self.target.load(self.original), self.target.load(self.original)
        except runtimes.Refused as error:
            self.decide("not runnable", f"{self.name} refuses the original: {error}")

    def decide(self, verdict: str, detail: str) -> NoReturn:
        """End the case with ``verdict``."""
        self.result.verdict, self.result.detail = verdict, detail
        raise _Decided()

    def original_outputs(self, number: int, feeds) -> list | None:
        """The original's outputs on the runtime (None: it raised on inputs ORT accepts, the runtime's limit)."""
        from . import runtimes

        name = self.name
        try:
            report_phase(f"running the original model on {name} (data set {number}, first compilation)")
            want = self.first.run(feeds)
            report_phase(f"running the original model on {name} (data set {number}, second compilation)")
            again = self.second.run(feeds)
        except runtimes.Refused as error:
            self.decide("not runnable", f"{name} refuses the original: {error}")
        except Exception as error:  # noqa: BLE001 - the original raises on inputs ORT accepts: R's limit
            self.original_raised += 1
            self.result.detail = f"the original raises on {name} on inputs ORT accepts: {one_line(error)}"
            return None
        unequal = [i for i, (a, b) in enumerate(zip(want, again)) if not bit_identical(a, b)]
        if unequal:
            self.decide("nondeterministic",
                        f"data set {number}: two compilations of the original on {name} differ, output {unequal[0]}: "
                        f"{difference(again[unequal[0]], want[unequal[0]])} ({name}'s own; the form is not judged)")
        return want

    def form_outputs(self, number: int, feeds, shapes: dict) -> list:
        """The form's outputs on the runtime (the form made and loaded once per shape set)."""
        from . import runtimes

        where, name, form_name = f"data set {number}: ", self.name, self.form_name
        key = tuple(sorted(shapes.items()))
        try:
            if key not in self.forms:
                form = self.lowered
                if form is None:  # WebNN: lowered for these shapes
                    report_phase(f"lowering for WebNN (data set {number})")
                    form, outside = _webnn_form(self.rewritten, shapes, self.data_folder)
                    if outside:
                        self.decide("failed", where + outside)
                    form = _with_data(form, self.data_folder)
                report_phase(f"loading the {form_name} on {name}")
                self.forms[key] = self.target.load(form)
            report_phase(f"running the {form_name} on {name} (data set {number})")
            return self.forms[key].run(feeds)
        except runtimes.Refused as error:
            baseline = _static_original(self.target, self.case, shapes, feeds) if self.lowered is None else None
            if isinstance(baseline, runtimes.Refused):
                self.decide("not runnable", where + f"{name} refuses the WebNN form ({error}) and the original with "
                            f"its input shapes fixed and shape arithmetic folded alike ({baseline}): not the gathers'")
            self.decide("failed", where + f"{name} refuses the {form_name}: {error}")
        except _Decided:
            raise
        except Exception as error:  # noqa: BLE001
            self.decide("failed", where + f"the {form_name} raised on {name}: {one_line(error)}")

    def compare(self, number: int, data_set: DataSet) -> None:
        """Run data set ``number`` on both sides and count it, or decide the case."""
        feeds, name, result = data_set.feeds, self.name, self.result
        if self.oracle is not None and _run(self.oracle, feeds)[1] is not None:
            self.out_of_spec += 1
            return
        want = self.original_outputs(number, feeds)
        if want is None:
            return
        shapes = {key: np.asarray(value).shape for key, value in feeds.items()}
        got = self.form_outputs(number, feeds, shapes)
        differing = [i for i, (g, w) in enumerate(zip(got, want)) if not bit_identical(g, w)]
        if differing:
            detail = (f"data set {number}: output {differing[0]} on {name}: {self.form_name} vs original "
                      f"{difference(got[differing[0]], want[differing[0]])}")
            baseline = _static_original(self.target, self.case, shapes, feeds) if self.lowered is None else None
            if isinstance(baseline, list) and all(bit_identical(g, b) for g, b in zip(got, baseline)):
                result.compared += 1
                result.detail = (detail + f"; bit-identical to the original with its input shapes fixed and shape "
                                 f"arithmetic folded: {name}'s optimizer, not the gathers")
                return
            report_phase("asking ONNX's reference evaluator")
            if not _reference_sides_with_rewrite(self.original, feeds, got, differing):
                self.decide("failed", detail)
            result.verdict = "builtin wrong"
            result.detail = detail + f"; ONNX's reference evaluator agrees with the {self.form_name} ({name}'s kernel)"
        result.compared += 1


def check_on_runtime(case: CheckCase, options: InputOptions, mode: CheckMode, name: str, rewritten: ModelProto,
                     rewritten_data_folder: str | None, result: CheckResult) -> CheckResult:
    """The verdict with the original and the lowered or WebNN form both on runtime ``name`` (see the
    module docstring); ORT with optimizations off only says which data sets are in spec."""
    if mode not in (CheckMode.LOWERED, CheckMode.WEBNN):
        raise ValueError(f"--runtime {name} goes with --lowered or --webnn, not {mode.value}")
    check = _RuntimeCheck(case, mode, name, rewritten, rewritten_data_folder, result)
    try:
        check.load_originals()
        try:
            data_sets = _runtime_data_sets(case, options, check.oracle)
        except CannotGenerate as reason:
            check.decide("not compared", str(reason))
        for number, data_set in enumerate(data_sets):
            check.compare(number, data_set)
    except _Decided:
        return result
    if result.compared == 0 and result.verdict == "passed":
        result.verdict = "not compared"
        result.detail = "; ".join(
            [f"{check.out_of_spec} data set(s) out of spec (ORT refuses the original: not run on {name})"]
            * bool(check.out_of_spec) + [result.detail] * bool(check.original_raised)) or "no data set"
    return result
