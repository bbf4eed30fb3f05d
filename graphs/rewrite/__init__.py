"""The rewrite: every source gather becomes GatherMultiaxis (``rewrite_pass``), with its report, its replacement
(``replacement``), the rank layers it reads (``rank_layers``) and the types of replaced outputs (``output_types``).

The public names are imported on first access (PEP 562): the lowering reads the rank layers and the replacement
without loading the rewrite pass."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..sources.registry import GATHER_OPS, INTERNAL_GATHERS, OPT_IN_OPS
    from .rewrite_pass import rewrite_model
    from .rewrite_report import NodeOutcome, RewriteReport, holds_gather

_LAZY = {
    "GATHER_OPS": "..sources.registry", "INTERNAL_GATHERS": "..sources.registry", "OPT_IN_OPS": "..sources.registry",
    "rewrite_model": ".rewrite_pass", "NodeOutcome": ".rewrite_report", "RewriteReport": ".rewrite_report",
    "holds_gather": ".rewrite_report",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GATHER_OPS", "INTERNAL_GATHERS", "OPT_IN_OPS", "NodeOutcome", "RewriteReport", "holds_gather", "rewrite_model"]
