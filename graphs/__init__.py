"""Rewriting of ONNX models: Gather, GatherElements and GatherND become GatherMultiaxis; and lowering:
GatherMultiaxis becomes standard ONNX ops."""

from .schema import register_schema

register_schema()  # onnx's shape inference and checker then understand rewritten models

from .lower import LowerReport, lower_model  # noqa: E402 - after the schema, which lowering's inference uses
from .rewrite import GATHER_OPS, OPT_IN_OPS, NodeOutcome, RewriteReport, holds_gather, rewrite_model  # noqa: E402
from .inference import TensorInfo  # noqa: E402
from .rules import RULES, LeftUnchanged, Replacement  # noqa: E402

__all__ = ["GATHER_OPS", "OPT_IN_OPS", "RULES", "LeftUnchanged", "LowerReport", "Replacement", "NodeOutcome", "RewriteReport",
           "TensorInfo", "holds_gather", "lower_model", "register_schema", "rewrite_model"]
