"""The session's bind step: the in-memory model ``gathermultiaxis.InferenceSession`` runs, made from a
rewritten model."""

from .bind_pass import (COMPUTED_OPS, RUN_TOKEN, VIEW_OPS, BindOptions, BindPass, BindReport, BoundNode,
                        PreparedModel, bridge_crossings, prepare_model)

__all__ = ["COMPUTED_OPS", "RUN_TOKEN", "VIEW_OPS", "BindOptions", "BindPass", "BindReport", "BoundNode", "PreparedModel",
           "bridge_crossings", "prepare_model"]
