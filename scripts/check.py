"""``gathermultiaxis check``: rewritten models against ORT's builtin gathers, on real test suites.

For every model: rewrite it, run the original on plain ORT and the rewrite with ``session_options()``
on the same inputs, and compare bit for bit (dtype, shape, values, NaN positions). When the builtin run
raises, the rewritten one must raise too. Models plain ORT cannot load or run are "not runnable".

Both sessions run with graph optimizations off: with them on, ORT constant-folds shape arithmetic
that passes through a builtin Gather but not through a custom op, and the differently folded float
arithmetic can differ in the last bit although every gathered value is the same.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, helper, numpy_helper

from .graphs import GATHER_OPS, holds_gather
from .graphs.io import one_line


@dataclass
class CheckCase:
    name: str
    model: ModelProto
    data_sets: list[tuple[dict[str, np.ndarray], list[np.ndarray] | None]]  # (inputs, expected outputs)
    source: str = ""


@dataclass
class CheckResult:
    name: str
    verdict: str  # "passed", "failed", "not runnable"
    rewritten: int = 0
    left: int = 0
    detail: str = ""
    expected: str = ""  # agreement with the expected outputs: exact / close / differs / "" (none given)
    builtin_ms: float = 0.0
    rewritten_ms: float = 0.0
    left_reasons: list[str] = field(default_factory=list)
    both_raised: int = 0  # data sets on which builtin and rewrite both raised (a pass, counted apart)


# -- finding cases -------------------------------------------------------------------------------

def default_suite() -> list[CheckCase]:
    """ONNX's own node test cases holding a gather anywhere, plus the bundled example model."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    from .examples import EXAMPLE_PATH, example_inputs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        testcases = collect_testcases()
    cases = []
    for testcase in testcases:
        if testcase.model is None or not holds_gather(testcase.model):
            continue
        data_sets = []
        for inputs, outputs in testcase.data_sets:
            names = [value.name for value in testcase.model.graph.input]
            data_sets.append((dict(zip(names, inputs)), list(outputs)))
        cases.append(CheckCase(testcase.name, testcase.model, data_sets, "onnx node tests"))
    example = onnx.load_model(str(EXAMPLE_PATH))
    cases.append(CheckCase("bundled example", example, [(example_inputs(seed=s), None) for s in range(2)],
                           str(EXAMPLE_PATH)))
    return cases


def _read_tensor(path: Path) -> np.ndarray:
    tensor = TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


def _backend_folder_case(folder: Path) -> CheckCase:
    model = onnx.load_model(str(folder / "model.onnx"))
    names = [value.name for value in model.graph.input
             if value.name not in {init.name for init in model.graph.initializer}]
    data_sets = []
    for data_dir in sorted(folder.glob("test_data_set_*")):
        inputs = [_read_tensor(p) for p in sorted(data_dir.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))]
        outputs = [_read_tensor(p) for p in sorted(data_dir.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))]
        data_sets.append((dict(zip(names, inputs)), outputs or None))
    return CheckCase(folder.name, model, data_sets, str(folder))


def cases_from_paths(paths: list[str]) -> Iterator[CheckCase | CheckResult]:
    """Cases from .onnx files, backend-test folders, or folders holding many of either."""
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            yield _file_case(path)
        elif (path / "model.onnx").is_file():
            yield _guarded_case(path, _backend_folder_case)
        elif path.is_dir():
            found = False
            for child in sorted(path.rglob("*.onnx")):
                found = True
                if child.name == "model.onnx" and any(child.parent.glob("test_data_set_*")):
                    yield _guarded_case(child.parent, _backend_folder_case)
                elif not (child.name == "model.onnx" and any(child.parent.glob("test_data_set_*"))):
                    yield _file_case(child)
            if not found:
                yield CheckResult(str(path), "failed", detail="no .onnx file in this folder")
        else:
            yield CheckResult(str(path), "failed", detail="no such file or folder")


def _guarded_case(path: Path, make) -> CheckCase | CheckResult:
    try:
        return make(path)
    except Exception as error:  # noqa: BLE001
        return CheckResult(str(path), "failed", detail=f"cannot read: {one_line(error)}")


def _file_case(path: Path) -> CheckCase | CheckResult:
    return _guarded_case(path, lambda p: CheckCase(str(p), onnx.load_model(str(p)), [], str(p)))


# -- generated inputs ----------------------------------------------------------------------------

def _index_bounds(model: ModelProto, symbolic_size: int) -> dict[str, int]:
    """For graph inputs used directly as gather indices: the size of the axis they index (symbolic
    dims count as ``symbolic_size``, the size generated inputs give them)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001
        inferred = model
    shapes = {}
    for value in (*inferred.graph.input, *inferred.graph.value_info):
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [d.dim_value if d.HasField("dim_value") else symbolic_size for d in dims]
    for init in inferred.graph.initializer:
        shapes[init.name] = list(init.dims)
    bounds = {}
    for node in inferred.graph.node:
        if node.op_type not in GATHER_OPS or len(node.input) < 2:
            continue
        data_shape = shapes.get(node.input[0])
        if not data_shape:
            continue
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "GatherND":
            batch_dims = attributes.get("batch_dims", 0)
            size = min(data_shape[batch_dims:], default=None)  # every coordinate fits every indexed dim
        else:
            axis = attributes.get("axis", 0)
            size = data_shape[axis] if -len(data_shape) <= axis < len(data_shape) else None
        if size:
            bounds[node.input[1]] = min(size, bounds.get(node.input[1], size))
    return bounds


def generated_inputs(model: ModelProto, seed: int = 0, symbolic_size: int = 3) -> dict[str, np.ndarray]:
    """Seeded inputs for a model without test data; index inputs of gathers stay in range."""
    rng = np.random.default_rng(seed)
    initializers = {init.name for init in model.graph.initializer}
    bounds = _index_bounds(model, symbolic_size)
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else symbolic_size for d in tensor_type.shape.dim]
        dtype = np.dtype(object) if tensor_type.elem_type == TensorProto.STRING else \
            helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        if value.name in bounds:
            values = rng.integers(-bounds[value.name], bounds[value.name], shape)
        elif dtype == object:
            values = rng.integers(0, 100, shape).astype(str)
        elif dtype == bool:
            values = rng.random(shape) < 0.5
        elif dtype.kind in "iu":
            values = rng.integers(0, 2, shape)
        else:
            values = rng.standard_normal(shape)
        feeds[value.name] = np.asarray(values).astype(dtype)  # a 0-d array, never a NumPy scalar, for rank 0
    return feeds


# -- running -------------------------------------------------------------------------------------

def make_session(model: ModelProto, custom: bool, optimized: bool = False):
    """A CPU session of ``model``, with the GatherMultiaxis library when ``custom``. Comparisons run with
    graph optimizations off (see the module docstring); timings with ORT's defaults."""
    import onnxruntime as ort

    from .ops import session_options

    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # runs expected to fail would otherwise log errors to stderr
    if custom:
        options = session_options(options)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def bit_identical(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == object:
        return a.tolist() == b.tolist()
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


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
    from onnx.reference import ReferenceEvaluator

    try:
        reference = ReferenceEvaluator(model).run(None, feeds)
    except Exception:  # noqa: BLE001
        return False
    return all(bit_identical(got[i], np.asarray(reference[i], dtype=np.asarray(got[i]).dtype)) for i in differing)


def _timed_run(sess, feeds) -> tuple[list | None, BaseException | None, float]:
    start = time.perf_counter()
    try:
        return sess.run(None, feeds), None, (time.perf_counter() - start) * 1e3
    except Exception as error:  # noqa: BLE001
        return None, error, (time.perf_counter() - start) * 1e3


def check_case(case: CheckCase, seed: int = 0, lowered: bool = False) -> CheckResult:
    """With ``lowered``, the rewrite is lowered to standard ONNX (``graphs.lower_model``) and runs on
    plain ORT, no custom op library registered: the round trip of ``gathermultiaxis.roundtrip``."""
    from .graphs import rewrite_model

    result = CheckResult(case.name, "passed")  # or "builtin wrong", set below, which also counts apart
    try:
        rewritten, report = rewrite_model(case.model)
    except Exception as error:  # noqa: BLE001
        return CheckResult(case.name, "failed", detail=f"rewrite raised: {one_line(error)}")
    result.rewritten, result.left = report.rewritten, report.left
    result.left_reasons = [f"{o.op_type} {o.node!r}: {o.reason}" for o in report.outcomes if not o.rewritten]
    if lowered:
        from .roundtrip import lower_for_check

        rewritten, failure = lower_for_check(rewritten, result)
        if failure is not None:
            return failure
    try:
        builtin = make_session(case.model, custom=False)
    except Exception as error:  # noqa: BLE001
        result.verdict, result.detail = "not runnable", one_line(error)
        return result
    try:
        custom = make_session(rewritten, custom=not lowered)
    except Exception as error:  # noqa: BLE001
        result.verdict, result.detail = "failed", f"the rewritten model does not load: {one_line(error)}"
        return result
    data_sets = case.data_sets or [(generated_inputs(case.model, seed), None)]
    agreements = []
    for number, (feeds, expected) in enumerate(data_sets):
        want, want_error, builtin_ms = _timed_run(builtin, feeds)
        got, got_error, rewritten_ms = _timed_run(custom, feeds)
        result.builtin_ms += builtin_ms
        result.rewritten_ms += rewritten_ms
        where = f"data set {number}: "
        if want_error is not None:
            if got_error is None:
                result.verdict = "failed"
                result.detail = where + f"builtin raised ({one_line(want_error)}) but the rewrite did not"
                return result
            result.both_raised += 1
            result.detail = f"both raise: builtin {one_line(want_error)} | rewrite {one_line(got_error)}"
            continue
        if got_error is not None:
            result.verdict, result.detail = "failed", where + f"the rewrite raised: {one_line(got_error)}"
            return result
        differing = [i for i, (g, w) in enumerate(zip(got, want)) if not bit_identical(g, w)]
        if differing:
            index = differing[0]
            g, w = np.asarray(got[index]), np.asarray(want[index])
            detail = (f"output {index} differs: rewritten {g.dtype}{list(g.shape)} vs builtin "
                      f"{w.dtype}{list(w.shape)}")
            if _reference_sides_with_rewrite(case.model, feeds, got, differing):
                result.verdict = "builtin wrong"
                result.detail = where + detail + "; the ONNX reference evaluator agrees with the rewrite"
                continue
            result.verdict, result.detail = "failed", where + detail
            return result
        if expected is not None:
            agreements.append(_agreement(got, expected))
    if agreements:
        result.expected = min(agreements, key=["differs", "close", "exact"].index)
    return result


# -- reporting -----------------------------------------------------------------------------------

VERDICTS = ("passed", "failed", "not runnable", "builtin wrong")


def summary_line(results: list[CheckResult]) -> str:
    counts = {verdict: sum(r.verdict == verdict for r in results) for verdict in VERDICTS}
    line = f"{counts['passed']} passed, {counts['failed']} failed, {counts['not runnable']} not runnable"
    if counts["builtin wrong"]:
        line += f", {counts['builtin wrong']} where ORT's builtin kernel is wrong (the rewrite matches the ONNX reference)"
    raising = sum(r.both_raised > 0 for r in results if r.verdict == "passed")
    if raising:
        line += f"\n({raising} of the passes include a data set on which builtin and rewrite both raise)"
    return line


def format_table(results: list[CheckResult]) -> str:
    width = max([len(r.name) for r in results] + [5])
    lines = [f"{'model':<{width}}  {'rewritten':>9} {'left':>4}  {'verdict':<12} {'expected':<8} "
             f"{'builtin ms':>10} {'rewritten ms':>12}"]
    for r in results:
        lines.append(f"{r.name:<{width}}  {r.rewritten:>9} {r.left:>4}  {r.verdict:<12} {r.expected or '-':<8} "
                     f"{r.builtin_ms:>10.2f} {r.rewritten_ms:>12.2f}")
        if r.verdict != "passed" and r.detail:  # failures, not-runnable reasons, builtin bugs
            lines.append(f"{'':<{width}}    {r.detail}")
        lines.extend(f"{'':<{width}}    left {reason}" for reason in r.left_reasons)
    return "\n".join(lines)


class _Progress:
    def __init__(self, total: int | None, enabled: bool):
        self.total, self.enabled, self.done = total, enabled, 0

    def step(self, name: str) -> None:
        self.done += 1
        if self.enabled:
            of = f"/{self.total}" if self.total else ""
            sys.stderr.write(f"\r[{self.done}{of}] {name[:60]:<60}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            sys.stderr.write("\r" + " " * 80 + "\r")


def run_check(args) -> int:
    from .cli import write_text_atomic
    from .fuzz import fuzz_results

    if args.fuzz:
        results = fuzz_results(args.fuzz, args.seed, Path(args.save_dir) if args.save_dir else None,
                               progress=_Progress(args.fuzz, sys.stdout.isatty() and args.fuzz > 20),
                               lowered=args.lowered)
    else:
        items = list(cases_from_paths(args.paths)) if args.paths else default_suite()
        progress = _Progress(len(items), sys.stdout.isatty() and len(items) > 5)
        results = []
        for item in items:
            results.append(item if isinstance(item, CheckResult) else check_case(item, args.seed, args.lowered))
            progress.step(results[-1].name)
        progress.close()
    if not args.quiet or any(r.verdict == "failed" for r in results):
        shown = results if not args.quiet else [r for r in results if r.verdict == "failed"]
        print(format_table(shown))
    line = summary_line(results)
    print(line)
    if args.json:
        payload = {"summary": line, "results": [asdict(r) for r in results]}
        write_text_atomic(Path(args.json), json.dumps(payload, indent=2) + "\n", overwrite=True)
    return 1 if any(r.verdict == "failed" for r in results) else 0


def add_check_command(commands) -> None:
    check = commands.add_parser(
        "check", help="compare rewritten models with ORT's builtin gathers",
        description="Rewrite each model, run original (plain ORT) and rewrite (GatherMultiaxis) on the same "
                    "inputs and compare bit for bit. With no PATH: ONNX's own node tests that hold a gather, "
                    "plus the bundled example. Exit status 1 on any mismatch.")
    check.add_argument("paths", nargs="*", metavar="PATH",
                       help="an .onnx file, a backend-test folder (model.onnx + test_data_set_*), or a folder of them")
    check.add_argument("--fuzz", type=int, default=0, metavar="N", help="check N random single-node models instead")
    check.add_argument("--seed", type=int, default=0, help="seed of generated inputs and fuzz cases")
    check.add_argument("--save-dir", metavar="DIR", help="where --fuzz saves reproducers of failures (default: a temp dir)")
    check.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    check.add_argument("-q", "--quiet", action="store_true", help="print only failures and the summary")
    check.add_argument("--lowered", action="store_true",
                       help="run the rewrite lowered to standard ONNX on plain ORT (no custom op library)")
    check.set_defaults(run=run_check)
