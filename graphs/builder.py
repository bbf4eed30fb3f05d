"""Moved to ``graphs.ir.builder``; re-exported until the importers move (WP5 deletes this module)."""

from .ir.builder import INT64_MAX, NameScope, NodeBuilder

__all__ = ["INT64_MAX", "NameScope", "NodeBuilder"]
