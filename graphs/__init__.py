"""Rewriting of ONNX models (gathers become GatherMultiaxis) and lowering (the reverse).

Public names are imported on first access (PEP 562), so that the session's bind step loads neither the
rewriter nor the lowerings; the first access registers the GatherMultiaxis schema with onnx.
"""

from importlib import import_module

# name -> module that defines it
_LAZY = {
    "GATHER_OPS": ".sources.registry", "OPT_IN_OPS": ".sources.registry", "NodeOutcome": ".rewrite.rewrite_report",
    "RewriteReport": ".rewrite.rewrite_report", "holds_gather": ".rewrite.rewrite_report",
    "rewrite_model": ".rewrite.rewrite_pass",
    "LowerReport": ".lower", "lower_model": ".lower",
    "TensorInfo": ".ranks.tensor_info",
    "RULES": ".sources.registry", "LeftUnchanged": ".passes.pass_report", "Replacement": ".sources.source_gather",
    "register_schema": ".schema",
}


def __getattr__(name: str):
    if name in _LAZY:
        import_module(".schema", __name__).register_schema()
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GATHER_OPS", "OPT_IN_OPS", "RULES", "LeftUnchanged", "LowerReport", "Replacement", "NodeOutcome", "RewriteReport",
           "TensorInfo", "holds_gather", "lower_model", "register_schema", "rewrite_model"]
