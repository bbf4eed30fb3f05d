"""The session's bind step: the in-memory model ``gathermultiaxis.InferenceSession`` runs, made from a
rewritten model (a pass over the graph, like the rewrite and the lowering; the session module only
runs what this returns).

What it changes in the session's in-memory copy of the model (the file stays standard and
self-contained):

* With ``builtin_gathers`` (the session's default), every node that one standard ONNX gather computes
  exactly becomes that gather first (``graphs.lower.lower_single_gathers``: the lowering's single-gather
  forms, bit-identical and raising ORT's own out-of-range errors), run by ORT's builtin kernels with no
  bridge crossing; what follows concerns the nodes left, those only the general decomposition computes.
* Every GatherMultiaxis node gets one more input, a hidden int64 scalar graph input (``RUN_TOKEN``, or
  ``RUN_TOKEN_n`` when the model already has that name), and becomes ``GatherMultiaxisRun``, or
  ``GatherMultiaxisRunFixedAxes`` when its axes are constant (they travel as an attribute). Each run
  feeds a fresh token; the op records an error under it; the run wrapper (``run``,
  ``run_with_ort_values``, ``run_with_iobinding``, ``run_with_ortvaluevector``, ``run_async``'s
  callback) pops that token's error and raises it (``run_async``: passes it as the callback's error
  argument). Neither ``get_inputs()`` nor ORT's missing-input message shows the token.
* A node of the main graph whose data operand is a constant (an initializer that is not a graph input,
  or a Constant node, seen through Unsqueeze with constant axes and through the rewriter's Cast of a
  float16/bfloat16 table to float) and whose axes are constant becomes
  ``GatherMultiaxisBound<Type>(indices, token)``: the table, axes, mode and the indices' alignment
  Unsqueeze (absorbed) are handed to the kernel once (``PreparedModel.tables``, which the session
  holds) instead of being copied through the bridge on every call. float16 tables are gathered and
  returned as float16 (the Cast back is dropped); bfloat16 tables are gathered as they are and only the
  gathered output is widened to float32, which the Cast after the op turns back exactly. A float16
  graph input crossing the bridge (widened by ORT's exact Cast) comes back as float16 from
  ``GatherMultiaxisRunFixedAxesToFloat16`` (``GatherMultiaxisRunToFloat16`` where the axes are computed at
  run time); the Cast back is found after moving ops (``walk.MOVING_OPS``: the rewrite's Squeeze of a
  GatherND or scalar-index Gather output), which then move float16 values. External-data tables are memory-mapped, after
  ``graphs.modelfile.check_external_data`` has checked their entry as ORT would (ORT never sees a bound
  table). A table computed from constants only is bound too: ``VIEW_OPS`` as NumPy views (a mapped table
  stays mapped), a chain holding ``COMPUTED_OPS`` (DequantizeLinear, Cast, Concat) computed once by the
  session's evaluator (ORT itself: bit for bit the run's values). Nodes and initializers that only fed a
  bound operand are dropped from the in-memory model.
* Bound nodes of the main graph that read the same indices (after the absorbed Unsqueeze) become
  ``GatherMultiaxisBoundGroup<Types>`` nodes, one call for up to ``GROUP_MAX`` float32/int64 tables.
* Constant nodes nothing reads and axes initializers no node reads any more are dropped in every graph
  (ORT warns about each unread initializer, and makes one of every Constant).
* Other external data is not read: the model ORT gets keeps its references, and ORT maps them itself
  from the model's folder (``EXTERNAL_DATA_FOLDER``), with its own checks.
* Model-local functions holding GatherMultiaxis are inlined first, so that every node takes the token.
"""


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
    """Turn ``model`` (changed in place: pass a copy) into what the session runs: see the module docstring.
    ``base_dir``: the folder external data is relative to (None: tables in external data are not bound).
    ``float16_outputs``: whether the op may return float16 (the installed PyOp bridge hands arrays back:
    ``ortop.bridge_info()["handback_supported"]``, which the session asks). ``evaluate(model, base_dir)``:
    the outputs of a small model of standard ONNX as arrays, computed as ONNX Runtime computes them (the
    session's ``evaluate_constants``); None: tables computed from constants are not bound.

    Args:
        model: the model, changed in place.
        base_dir: the folder its external data locations are relative to, or None.
        bind: bind the tables of the main graph's nodes whose axes and mode are fixed (False: every node
            only gets the run token).
        float16_outputs: whether the op may return float16.
        evaluate: ``evaluate(model, base_dir)`` giving a small model's outputs as arrays, or None.
        builtin_gathers: first turn every node that one standard gather computes into that gather
            (``graphs.lower.lower_single_gathers``), so that only the others cross the bridge.
        options: the node forms to use (default: all of them).

    Returns:
        The PreparedModel (holding the model unchanged when it has no GatherMultiaxis node).

    Raises:
        ValueError: GatherMultiaxis inside a model-local function that could not be inlined.
    """
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
