"""Pass infrastructure in onnx-ir's manner: the declared pass base (``pass_base``), the scopes a visit sees
(``scopes``), the pass's own copy (``inlining``), the driver (``driver``) and the report (``pass_report``)."""

from ..ir.constant_view import ConstantView
from ..ir.dead_nodes import remove_dead_in_model as drop_freed
from .driver import drop_unused_domain, run_node_pass, splice
from .inlining import InlineFunctionsHolding, functions_at_model_opset, inline_functions_holding, pass_copy
from .pass_base import ModelPass, NodePass, NotChanged, PassResult, Repeat, Sequential, Visit
from .pass_report import LeftUnchanged, PassReport
from .scopes import GraphScope, InferredGraph

__all__ = ["ConstantView", "GraphScope", "InferredGraph", "InlineFunctionsHolding", "LeftUnchanged",
           "ModelPass", "NodePass", "NotChanged", "PassReport", "PassResult", "Repeat", "Sequential", "Visit",
           "drop_freed", "drop_unused_domain", "functions_at_model_opset", "inline_functions_holding", "pass_copy", "run_node_pass",
           "splice"]
