"""Rewriting of ONNX models: Gather, GatherElements and GatherND become GatherMultiaxis."""

from .schema import register_schema

register_schema()  # onnx's shape inference and checker then understand rewritten models

from .rewrite import GATHER_OPS, NodeOutcome, RewriteReport, holds_gather, rewrite_model
from .rules import RULES, LeftUnchanged, Replacement, TensorInfo

__all__ = ["GATHER_OPS", "RULES", "LeftUnchanged", "Replacement", "NodeOutcome", "RewriteReport", "TensorInfo",
           "holds_gather", "register_schema", "rewrite_model"]
