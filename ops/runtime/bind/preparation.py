"""The session's bind step: the in-memory model ``gathermultiaxis.InferenceSession`` runs (the file stays standard).

* nodes one standard gather computes become that gather (with ``builtin_gathers``);
* functions holding GatherMultiaxis are inlined; every node takes the hidden run token (``RUN_TOKEN``), a
  ``run_ops`` op type, constant axes as an attribute, float16 data round-tripped through ORT's Cast;
* a main-graph node with constant data (``bound_operands``) is bound: its table goes to the kernel once
  (``PreparedModel.tables``);
* then ``bind_steps``: dead feeders dropped, nodes sharing indices grouped, Scan body outputs copied."""


from __future__ import annotations

import warnings

from onnx import ModelProto, TensorProto

from ....graphs.modelfile import ExternalDataError
from ....graphs.passes import run_pass
from ....graphs.ir.dead_nodes import remove_dead
from .bind_pass import BindOptions, BindPass, PreparedModel
from .bind_steps import (bridge_crossings, copy_scan_body_outputs, drop_unread_constants, group_shared_indices,
                         holds_gather)


def prepare_model(model: ModelProto, base_dir: str | None = None, bind: bool = True, *,
                  float16_outputs: bool, evaluate=None, builtin_gathers: bool = False,
                  options: BindOptions = BindOptions()) -> PreparedModel:
    """Turn ``model`` (changed in place: pass a copy) into what the session runs.
    ``base_dir``: the folder of external data (None: tables in external data are not bound).
    ``float16_outputs``: whether the bridge hands float16 arrays back. ``evaluate(model, base_dir)``: a small
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
    model = run_pass(model, binding)
    prepared = binding.prepared
    assert prepared is not None  # made by binding.begin(), which run_pass calls
    prepared.builtin_gathers = lowered
    if not prepared.tokened:  # GatherMultiaxis only in functions that nothing calls (inlined away)
        return prepared
    if binding.dropped_value_info:
        kept_info = [value for value in model.graph.value_info if value.name not in binding.dropped_value_info]
        del model.graph.value_info[:]
        model.graph.value_info.extend(kept_info)
    if bind:  # the nodes that fed a bound operand, and the Constants and initializers nothing reads any more
        # (not the driver's drop_freed: this also drops every unread Constant and initializer of the main
        # graph, and only the nodes passed through, not whatever else fed them)
        constants = [node for node in model.graph.node if node.op_type == "Constant" and node.domain == ""]
        remove_dead(model.graph, binding.chain + constants)
        if options.group_shared_indices:
            group_shared_indices(model.graph)
    drop_unread_constants(model, binding.freed_axes)
    copy_scan_body_outputs(model)
    if bind:
        kept = {tensor.name for tensor in model.graph.initializer}
        prepared.shared = {name: value for name, value in binding.bound_initializers.items()
                           if name in kept and value[0].dtype != object}
    prepared.crossings = bridge_crossings(model)
    if binding.crosses_bridge:  # a string fed in may reach a GatherMultiaxisRun node, whose bridge cuts it at a NUL
        prepared.string_inputs = [value.name for value in model.graph.input
                                  if value.type.tensor_type.elem_type == TensorProto.STRING]
    return prepared
