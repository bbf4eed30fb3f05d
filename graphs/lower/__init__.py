"""Lowering: every GatherMultiaxis node becomes standard ONNX ops, each in the cheapest exact form.

A visit over the pass driver (``graphs.passes.run_pass``) takes each node through three steps, the first
that applies deciding:

1. **The gather it replaced.** A node the rewrite wrote records the one standard gather it stands for
   (``graphs.provenance``); where the graph proves it (``graphs.lower.recorded_form``: between the
   record's names and the node, exactly what the rewrite writes for that gather), that gather comes back
   and the alignment around it goes. This is what lowers nodes the rewrite aligned at run time (unknown
   ranks) to one gather too.
2. **One standard gather from the node's semantics** (``graphs.lower_forms``): Gather, GatherElements
   or GatherND, chosen from the axes, ranks, mode and the statically known sizes.
3. **The general decomposition** (``graphs.lower.general_form``, ``general_run_time``): flat offsets from the run-time
   shapes, for the nodes no single gather computes; the report says why for each.

Every form's nodes pass ``graphs.lower.ort_guards.check_emitted`` (ORT's GatherToSliceFusion) before they are
used; one that fails gives way to the next. The float16/bfloat16 round trip of the rewrite is folded: the
narrow input is gathered, and where the output only goes back to the narrow type through moving ops, the
narrow values go there directly (no Cast from float32 quiets a NaN payload).

In every step the model's own default opset decides what may be emitted. Models keep their IR version,
opset imports (``ai.onnx.contrib`` is dropped when nothing uses it), inputs, outputs, initializers and
value_info; functions holding a GatherMultiaxis are inlined first.
"""

from ...ops.contract import is_gather_multiaxis
from .general_form import MIN_OPSET
from .lower_pass import LowerPass, lower_model, lower_single_gathers, unname_replaced_dims
from .lower_report import GENERAL, KEPT_FOR_KERNEL, LoweredNode, LowerReport

__all__ = [
    "GENERAL",
    "KEPT_FOR_KERNEL",
    "MIN_OPSET",
    "LowerPass",
    "LowerReport",
    "LoweredNode",
    "is_gather_multiaxis",
    "lower_model",
    "lower_single_gathers",
    "unname_replaced_dims",
]
