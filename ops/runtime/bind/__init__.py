"""The session's bind step: the in-memory model ``gathermultiaxis.InferenceSession`` runs, made from a
rewritten model."""

from .bind_pass import (BIND_FORMS, COMPUTED_OPS, RUN_TOKEN, VIEW_OPS, BindPass, BindReport, BoundNode, PreparedModel,
                        bridge_crossings, prepare_model)

__all__ = ["BIND_FORMS", "COMPUTED_OPS", "RUN_TOKEN", "VIEW_OPS", "BindPass", "BindReport", "BoundNode", "PreparedModel",
           "bridge_crossings", "prepare_model"]
