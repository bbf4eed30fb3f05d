"""The WebNN target: GatherMultiaxis lowered to ops that map one-to-one onto WebNN, and a check of which nodes of
a model fall outside what ONNX Runtime's WebNN execution provider runs (docs/webnn.md).

WebNN graphs have static shapes: the lowering fixes every input shape (the model's own static dims, or
``input_shapes``) and folds shape arithmetic to constants. Each GatherMultiaxis node of the main graph then
takes the first of ``FORMS`` that computes it, as ``graphs.lower.form_plans.WEBNN_TARGET`` plans it (the report
gives each node's ``form``, and for the general one why no single gather fits):

1. ``Gather``: one axis; off it the indices vary only on dims where the data has size 1, adjacent to the axis.
2. ``GatherElements``: one axis; off it the indices have the data's size or size 1 (then expanded).
3. ``GatherND``: the axes one block of adjacent dims; after it indices of size 1 or data of size 1. No
   batch_dims (WebNN has none): constant batch coordinates are concatenated in front of the tuples.
4. ``general``: one ``gather`` of the data as 1-D at flat offsets computed from the indices.
5. ``empty``: a static output with a size-0 dim is that empty tensor, a Constant.

The single-gather forms read and write any shape of the same elements (a reshape around them goes), so
``rewrite`` then ``lower --target webnn`` of a Gather, GatherElements or GatherND gives back one gather.
Indices are int32 (int64 for ``gatherND``, the one type of ONNX's GatherND); constant indices are folded.
WebNN cannot raise: ``clamp`` is exact (``min``/``max`` with constant bounds); ``zero`` reads [data, data, a
zero slice] at ``max(min(index, dim) + dim, -1)``; ``error`` and ``error_nonempty`` are lowered as ``clamp``
(bit-identical wherever ORT does not raise). Where the indices' values are in range whatever the inputs (a
value range through constants, gathers, comparisons and integer arithmetic), nothing is clamped.
"""

from __future__ import annotations

from .static_shapes import NotStatic, fix_input_shapes, fold_shape_arithmetic
from .webnn_findings import Finding, lowering_findings, webnn_check
from .webnn_forms import FORMS
from .webnn_ops import CONSTANT_INPUTS, MAX_RANK, MIN_OPSET, WEBNN_OPS
from .webnn_pass import lower_for_webnn

__all__ = ["CONSTANT_INPUTS", "FORMS", "MAX_RANK", "MIN_OPSET", "WEBNN_OPS", "Finding", "NotStatic", "fix_input_shapes",
           "fold_shape_arithmetic", "lower_for_webnn", "lowering_findings", "webnn_check"]
