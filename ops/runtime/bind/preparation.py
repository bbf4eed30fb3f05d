"""The session's bind step: the in-memory model ``gathermultiaxis.InferenceSession`` runs (the file stays standard).

* nodes one standard gather computes become that gather (with ``builtin_gathers``);
* functions holding GatherMultiaxis are inlined; every node takes the hidden run token (``RUN_TOKEN``), a
  ``run_ops`` op type, constant axes as an attribute, float16 data round-tripped through ORT's Cast;
* a main-graph node with constant data (``bound_operands``) is bound: its table goes to the kernel once
  (``PreparedModel.tables``);
* a run-time-aligned node whose record holds runs as that gather (``recorded_nodes``): one node, its
  alignment dropped;
* then the steps of ``bind_steps`` (``bind_sequence``): dead feeders dropped, nodes sharing indices grouped,
  recorded nodes' alignments and unread constants dropped, Scan body outputs copied."""


from __future__ import annotations

import warnings
from collections.abc import Callable

from onnx import ModelProto

from ....graphs.modelfile import ExternalDataError
from ....graphs.passes import ModelPass, Sequential
from .bind_pass import BindOptions, BindPass, PreparedModel
from .bind_steps import (CopyScanBodyOutputs, CountCrossings, DropUnreadConstants, DropValueInfo, GroupSharedIndices,
                         RemoveDeadFeeders, RemoveRecordedAlignments, ShareBoundInitializers, holds_gather)


def bind_sequence(binding: BindPass) -> Sequential:
    """The bind pass and the steps after it, as ``binding``'s options ask."""
    bind, options = binding.bind, binding.options
    steps: list[ModelPass] = [binding, DropValueInfo(binding)]
    if bind:
        steps.append(RemoveDeadFeeders(binding))
        if options.group_shared_indices:
            steps.append(GroupSharedIndices(binding))
    if options.recorded_form:  # after the steps that remove nodes by identity
        steps.append(RemoveRecordedAlignments(binding))
    steps += [DropUnreadConstants(binding), CopyScanBodyOutputs(binding)]
    if bind:
        steps.append(ShareBoundInitializers(binding))
    steps.append(CountCrossings(binding))
    return Sequential(*steps)


def prepare_model(model: ModelProto, base_dir: str | None = None, bind: bool = True, *,
                  float16_outputs: bool | Callable[[], bool], evaluate=None, builtin_gathers: bool = False,
                  options: BindOptions = BindOptions()) -> PreparedModel:
    """Turn ``model`` (changed in place: pass a copy) into what the session runs.
    ``base_dir``: the folder of external data (None: tables in external data are not bound).
    ``float16_outputs``: whether the bridge hands float16 arrays back (a callable: asked when needed). ``evaluate(model, base_dir)``: a small
    standard model's outputs as ORT computes them (None: tables computed from constants are not bound).

    Raises:
        ValueError: GatherMultiaxis inside a model-local function that could not be inlined."""
    if not holds_gather(model):  # nothing to bind: no walk, no names (a plain model's start-up)
        return PreparedModel(model)
    lowered = 0
    if builtin_gathers:
        from ....graphs.lower import lower_single_gathers  # here: a kernel-only session loads no lowering

        try:
            with_builtins, lowering = lower_single_gathers(model, base_dir)
        except ExternalDataError:
            raise  # the model's own fault: the session refuses it as ORT would
        except Exception as error:  # noqa: BLE001 - a speed-up that fails must not stop the session
            warnings.warn(f"gathermultiaxis: every GatherMultiaxis node runs on the kernel: finding the nodes one "
                          f"standard gather computes failed ({type(error).__name__}: {error})", RuntimeWarning,
                          stacklevel=3)
        else:
            model, lowered = with_builtins, lowering.lowered
            if not holds_gather(model):
                return PreparedModel(model, builtin_gathers=lowered)
    binding = BindPass(base_dir, bind, float16_outputs, options, evaluate=evaluate)
    bind_sequence(binding)(model)
    prepared = binding.prepared
    assert prepared is not None  # made by binding.begin(), which the driver calls
    prepared.builtin_gathers = lowered
    return prepared


__all__ = ["bind_sequence", "prepare_model"]
