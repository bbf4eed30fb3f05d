"""Every source gather, registered once; every table the rewrite, the rank layers and the lowering read is
derived from ``SOURCES``. A new source op is one module of this package plus one line here."""

from __future__ import annotations

from onnx import NodeProto

from ..ranks.rank_rules import RankRule
from . import gather, gather_block_quantized, gather_elements, gather_nd, internal_gathers
from .gather_nd import BATCH_DIMS_OPSET
from .source_gather import OptInRule, Rewrite, SourceGather, StaticAlign

SOURCES: tuple[SourceGather, ...] = (
    gather.SOURCE,
    gather_elements.SOURCE,
    gather_nd.SOURCE,
    gather_block_quantized.SOURCE,
    *internal_gathers.SOURCES,
)

# op type -> its rule. The ONNX gathers' rules decide an alignment (TensorInfo in, Replacement out), and every
# rewrite applies them; an OptInRule only where the caller asks for its op.
RULES: dict[str, StaticAlign | OptInRule] = {
    source.op_type: source.rule for source in SOURCES if source.rule is not None}
GATHER_OPS = tuple(s.op_type for s in SOURCES if s.rewrite is Rewrite.DEFAULT)  # rewritten by default
OPT_IN_OPS = tuple(s.op_type for s in SOURCES if s.rewrite is Rewrite.OPT_IN)  # only when asked for (ops=...)
# Ops of other domains that gather inside their kernel: each is a row of the report. A rewrite for one of
# them (a rule that replaces the node) reports a "rewritten" row instead, under the same op name.
INTERNAL_GATHERS: dict[tuple[str, str], str] = {
    (s.domain, s.op_type): s.why_not for s in SOURCES if s.rewrite is not Rewrite.DEFAULT}
# (domain, op type) -> the source's rank rule (layer 3), merged with the generic rules of ranks.rank_rules
SOURCE_RANK_RULES: dict[tuple[str, str], RankRule] = {
    (s.domain, s.op_type): s.rank_rule for s in SOURCES if s.rank_rule is not None}
# The ops a provenance record may name, with the integer attributes each has, and the opset each exists from
RECORDED_ATTRIBUTES = {s.op_type: s.recorded_attributes for s in SOURCES if s.recorded_attributes}
OP_OPSET = {s.op_type: s.first_opset for s in SOURCES if s.recorded_attributes}
_BY_TYPE = {(s.domain, s.op_type): s for s in SOURCES}


def source_of(node: NodeProto) -> SourceGather | None:
    """The record of ``node``'s op, or None (``ai.onnx`` is the ONNX domain)."""
    return _BY_TYPE.get(("" if node.domain == "ai.onnx" else node.domain, node.op_type))


def default_source(op_type: str) -> SourceGather:
    """The record of an ONNX-domain gather the rewrite replaces by default."""
    source = _BY_TYPE[("", op_type)]
    assert source.rewrite is Rewrite.DEFAULT, op_type
    return source


__all__ = ["BATCH_DIMS_OPSET", "GATHER_OPS", "INTERNAL_GATHERS", "OPT_IN_OPS", "OP_OPSET", "RECORDED_ATTRIBUTES", "RULES",
           "SOURCES", "SOURCE_RANK_RULES", "default_source", "source_of"]
