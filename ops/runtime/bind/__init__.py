"""The session's bind step: the in-memory model ``gathermultiaxis.InferenceSession`` runs, made from a
rewritten model (``preparation.prepare_model``)."""

from .bind_pass import RUN_TOKEN, BindOptions, BindPass, BindReport, BoundNode, PreparedModel
from .bind_steps import bridge_crossings
from .bound_operands import COMPUTED_OPS, VIEW_OPS
from .preparation import prepare_model

__all__ = ["COMPUTED_OPS", "RUN_TOKEN", "VIEW_OPS", "BindOptions", "BindPass", "BindReport", "BoundNode", "PreparedModel",
           "bridge_crossings", "prepare_model"]
