"""Rewriting of ONNX models: Gather, GatherElements and GatherND become GatherMultiaxis; and lowering:
GatherMultiaxis becomes standard ONNX ops."""

from .lower import LowerReport, lower_model
from .rewrite import GATHER_OPS, NodeOutcome, RewriteReport, holds_gather, rewrite_model
from .rules import RULES, LeftUnchanged, Replacement, TensorInfo

__all__ = ["GATHER_OPS", "RULES", "LeftUnchanged", "LowerReport", "Replacement", "NodeOutcome", "RewriteReport",
           "TensorInfo", "holds_gather", "lower_model", "rewrite_model"]
