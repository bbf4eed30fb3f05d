"""Lowering: every GatherMultiaxis node becomes standard ONNX ops, each in the cheapest exact form.

A visit over the pass driver takes each node through three steps, the first that applies deciding:

1. **The gather it replaced** (``recorded_form``): the rewrite's record, where the graph proves it; this
   lowers the nodes the rewrite aligned at run time to one gather too.
2. **One standard gather from the node's semantics** (``graphs.lower.form_plans``): Gather, GatherElements or
   GatherND, chosen from the axes, ranks, mode and the statically known sizes.
3. **The general decomposition** (``general_form``, ``general_run_time``): flat offsets from the run-time
   shapes, for the nodes no single gather computes; the report says why for each.

Every form's nodes pass ``ort_guards.check_emitted`` first; one that fails gives way to the next. The rewrite's
float16/bfloat16 round trip is folded: the narrow input is gathered (no Cast from float32 quiets a NaN payload).
The model's own default opset decides what may be emitted; models keep their IR version, opset imports
(``ai.onnx.contrib`` is dropped when nothing uses it), inputs, outputs, initializers and value_info.
"""

from ...ops.contract import is_gather_multiaxis
from .general_form import MIN_OPSET
from .lower_pass import LowerPass, lower_model, unname_replaced_dims
from .session_lowering import lower_single_gathers
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
