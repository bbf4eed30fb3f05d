"""``gathermultiaxis policies MODEL``: what each runtime's out-of-range policy makes of a model's gathers.

For a model and its inputs, every main-graph gather that receives an index outside ``[-dim, dim - 1]`` or a
negative one in range is listed, and the model is run under each of the operator's modes, compared with
``clamp``: ``error`` is ORT's builtin behaviour, ``zero`` OpenVINO Gather-8's, ``clamp`` Chromium's WebNN
backends' (each checked against the real one in the tests). Gathers inside If/Loop/Scan bodies run under
each policy too, but their indices are not listed (a body's values are not graph outputs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from onnx import ModelProto, helper

from ..graphs import rewrite_model
from ..graphs.ir.walk import model_nodes
from ..harness import bit_identical, make_session
from ..ops.contract import OP_TYPE, Mode, is_gather_multiaxis
from .cases import CannotGenerate
from .input_generation import SHAPE_ONLY_OPS, index_bounds, sized_inputs

# (runtime, what it does with an out-of-range index, the operator's mode that does the same or None)
RUNTIMES = (
    ("ONNX, ONNX Runtime", "error", Mode.ERROR),
    ("OpenVINO Gather-8", "zeros", Mode.ZERO),
    ("Chromium WebNN on TFLite and ORT", "clamp to [-N, N-1], then wrap negatives", Mode.CLAMP),
    ("Chromium WebNN on DirectML", "clamp", Mode.CLAMP),
    ("Chromium WebNN on CoreML", "undefined (validate_indices=false)", None),
    ("WebNN spec", "invalid (the caller must keep indices in range)", None),
)
# The operator's modes in the report: every policy's outputs are compared with clamp's (it never raises);
# error_nonempty is error's but where the output is empty, where no index is read
BASELINE = Mode.CLAMP
COMPARED = (Mode.ERROR, Mode.ZERO)
ROLE_TEXT = {BASELINE: "the baseline"}  # a mode's result in the table by its role, not by its outputs
NOT_RUN = "not run: no mode of the operator does that"


class RefusedInputs(Exception):
    """The model cannot run on the inputs even where no index can be out of range (mode clamp): wrong
    names, shapes or types. The message is ORT's."""


@dataclass
class GatherIndices:
    node: str
    op_type: str
    indices: int = 0             # index values the node received
    above: int = 0               # >= dim
    below: int = 0               # < -dim
    negative_in_range: int = 0   # in [-dim, -1]: counted from the end by every policy


@dataclass
class PolicyOutcome:
    mode: str
    error: str = ""                                          # the run raised (its message)
    differences: dict[str, tuple[int, float | None]] = field(default_factory=dict)  # output -> (elements, max |diff|)


@dataclass
class PolicyReport:
    gathers: list[GatherIndices] = field(default_factory=list)
    outcomes: list[PolicyOutcome] = field(default_factory=list)

    @property
    def out_of_range(self) -> int:
        return sum(g.above + g.below for g in self.gathers)

    def table(self) -> str:
        """The report as two Markdown tables: the indices each gather got, then each runtime's policy and what its
        outputs give against the baseline."""
        lines = ["| gather | op | indices | >= dim | < -dim | negative in range |", "|---|---|---|---|---|---|"]
        lines += [f"| {g.node} | {g.op_type} | {g.indices} | {g.above} | {g.below} | {g.negative_in_range} |"
                  for g in self.gathers]
        results: dict[Mode | None, str] = {
            Mode(o.mode): (not o.error and ROLE_TEXT.get(Mode(o.mode))) or _outcome_text(o) for o in self.outcomes}
        lines += ["", f"| runtime | out-of-range index | outputs, against {BASELINE.value} |", "|---|---|---|"]
        lines += [f"| {runtime} | {behaviour} | {results.get(mode, NOT_RUN)} |"
                  for runtime, behaviour, mode in RUNTIMES]
        return "\n".join(lines)


def _outcome_text(outcome: PolicyOutcome) -> str:
    """What a policy's run gives against the baseline: its error, or which outputs differ."""
    if outcome.error:
        return f"raises: {outcome.error}"
    return "; ".join(f"{name}: {count} elements differ" + (f" (max |diff| {diff:g})" if diff is not None else "")
                     for name, (count, diff) in outcome.differences.items() if count) or "no output differs"


def with_mode(model: ModelProto, mode: Mode) -> ModelProto:
    """A copy of a rewritten model whose every GatherMultiaxis node (subgraphs and functions too) has ``mode``."""
    copy = ModelProto()
    copy.CopyFrom(model)
    for node in model_nodes(copy):
        if is_gather_multiaxis(node):
            for attribute in node.attribute:
                if attribute.name == "mode":
                    attribute.s = mode.value.encode()
    return copy


def _captured(model: ModelProto) -> tuple[ModelProto, dict[str, tuple[str, ...]]]:
    """``model`` (rewritten) with each main-graph GatherMultiaxis node's indices, data shape and axes as
    extra graph outputs; by node name, the three output names."""
    copy = ModelProto()
    copy.CopyFrom(model)
    captures: dict[str, tuple[str, ...]] = {}
    for number, node in enumerate([n for n in copy.graph.node if is_gather_multiaxis(n)]):
        names = tuple(f"gathermultiaxis::policies/{number}/{what}" for what in ("indices", "shape", "axes"))
        copy.graph.node.extend([helper.make_node("Identity", [node.input[1]], [names[0]]),
                                helper.make_node("Shape", [node.input[0]], [names[1]]),
                                helper.make_node("Identity", [node.input[2]], [names[2]])])
        copy.graph.output.extend(helper.make_empty_tensor_value_info(name) for name in names)
        captures[node.name or f"#{number}"] = names
    return copy, captures


def _difference(got: np.ndarray, want: np.ndarray) -> tuple[int, float | None]:
    if bit_identical(got, want):
        return 0, None
    if got.shape != want.shape:
        return max(got.size, want.size), None
    differ = got != want
    if got.dtype.kind == "f":
        differ &= ~(np.isnan(got) & np.isnan(want))
    count = int(np.count_nonzero(differ))
    if got.dtype.kind in "fiub" and count:
        return count, float(np.max(np.abs(got[differ].astype(np.float64) - want[differ].astype(np.float64))))
    return count, None


def policy_report(model: ModelProto, feeds: dict[str, np.ndarray], external_data_folder: Path | None = None
                  ) -> PolicyReport:
    """The gathers of ``model`` that get an index out of range (or negative) on ``feeds``, and what
    running the model under each of the operator's modes gives (see the module docstring). Tensors kept
    in external files are read from ``external_data_folder``, the model's folder.

    Args:
        model: the original ``onnx.ModelProto`` (it is rewritten here).
        feeds: the inputs, a dict from input name to array.
        external_data_folder: the model's folder, or None.

    Returns:
        The ``PolicyReport``.

    Raises:
        RefusedInputs: the model does not run on ``feeds``.
    """
    rewritten, _ = rewrite_model(model)
    report = PolicyReport()
    captured, captures = _captured(with_mode(rewritten, BASELINE))
    session = make_session(captured, custom=True, external_data_folder=external_data_folder)
    try:
        values = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    except Exception as error:  # noqa: BLE001 - ORT's reason, for the user
        raise RefusedInputs(f"the model does not run on these inputs: {' '.join(str(error).split())[:300]}") from None
    original = {node.name: node.op_type for node in model_nodes(model)}
    for name, (indices_name, shape_name, axes_name) in captures.items():
        indices, shape, axes = values[indices_name], values[shape_name], values[axes_name].reshape(-1)
        k = len(axes)
        coordinates = indices.reshape(*indices.shape[:-1], -1, k) if k > 1 else indices[..., None]
        found = GatherIndices(name, original.get(name, OP_TYPE), int(indices.size))
        for j, axis in enumerate(axes):
            column, dim = coordinates[..., j].astype(np.int64), int(shape[axis])
            found.above += int(np.count_nonzero(column >= dim))
            found.below += int(np.count_nonzero(column < -dim))
            found.negative_in_range += int(np.count_nonzero((column < 0) & (column >= -dim)))
        report.gathers.append(found)
    # The captured run is the baseline's run: its first outputs are the model's
    baseline = {value.name: values[value.name] for value in rewritten.graph.output}
    report.outcomes.append(PolicyOutcome(BASELINE.value, differences={name: (0, None) for name in baseline}))
    for mode in COMPARED:
        outcome = PolicyOutcome(mode.value)
        sess = make_session(with_mode(rewritten, mode), custom=True, external_data_folder=external_data_folder)
        try:
            outputs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        except Exception as error:  # noqa: BLE001 - the policy's answer: it raises
            outcome.error = f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"
        else:
            outcome.differences = {name: _difference(outputs[name], baseline[name]) for name in outputs}
        report.outcomes.append(outcome)
    return report


def out_of_range_bounds(model: ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, int]:
    """The inputs ``--out-of-range`` pushes, and the size of the axis each indexes: every input whose
    values reach a main-graph gather's indices, directly or through ops that only move them
    (``input_generation.SHAPE_ONLY_OPS``: a dynamo export's token ids reach the embedding through a Reshape)."""
    return index_bounds(model, {name: list(value.shape) for name, value in feeds.items()}, SHAPE_ONLY_OPS)


def policy_inputs(model: ModelProto, seed: int = 0, out_of_range: bool = False,
                  shapes: dict[str, tuple[int, ...]] | None = None, external_data_folder: Path | None = None
                  ) -> dict[str, np.ndarray]:
    """Generated inputs the original model accepts (sized as ``check`` sizes them); with ``out_of_range``, each
    index input (``out_of_range_bounds``) then gets its first value past the end and its last before the
    start of the axis it indexes (2 and 3 beyond).

    Raises:
        CannotGenerate: the inputs cannot be generated, or the original refuses every generated set."""
    session = make_session(model, custom=False, external_data_folder=external_data_folder)
    for feeds in sized_inputs(model, seed, shapes or {}):
        try:
            session.run(None, feeds)
        except Exception:  # noqa: BLE001 - the original refuses these sizes: the next attempt
            continue
        if out_of_range:
            for name, bound in out_of_range_bounds(model, feeds).items():
                flat = feeds[name].reshape(-1)
                if flat.size:
                    flat[0], flat[-1] = bound + 2, -bound - 3
        return feeds
    raise CannotGenerate("the original model refuses every generated input: give --load-inputs")


__all__ = ["BASELINE", "RUNTIMES", "GatherIndices", "RefusedInputs", "PolicyOutcome", "PolicyReport", "out_of_range_bounds", "policy_inputs", "policy_report",
           "with_mode"]
