"""com.microsoft ops that gather inside their kernel: each is a row of the rewrite's report, never rewritten."""

from __future__ import annotations

from ...ops.alignment import GATHER_ND
from .source_gather import Rewrite, SourceGather

_MICROSOFT = "com.microsoft"
_ATTENTION_ROTARY = ("gathers rows of its cos/sin caches by position inside ORT's attention kernel, which "
                     "reads the KV cache too; no standard form of the rest exists to keep it")


def _internal(op_type: str, why_not: str) -> SourceGather:
    return SourceGather(_MICROSOFT, op_type, Rewrite.NEVER, why_not=why_not)


SOURCES = (
    _internal("EmbedLayerNormalization", (
        "its word, position and segment embedding gathers are fused with their sum and LayerNormalization in "
        "one ORT kernel (rewrite the model before ORT's transformers optimizer fuses them)")),
    _internal("QEmbedLayerNormalization", "its embedding gathers are fused with quantized LayerNormalization"),
    _internal("RotaryEmbedding", "it gathers cos/sin cache rows by position ids inside the rotation kernel"),
    _internal("MRotaryEmbedding", "it gathers cos/sin cache rows by position ids inside the rotation kernel"),
    _internal("GemmaRotaryEmbedding", "it gathers cos/sin cache rows by position inside the rotation kernel"),
    _internal("GroupQueryAttention", "it " + _ATTENTION_ROTARY),
    _internal("SparseAttention", "it " + _ATTENTION_ROTARY),
    _internal("TorchEmbedding", "ORT's kernel of torch's embedding (padding_idx, scale_grad_by_freq)"),
    _internal("WordConvEmbedding", "its embedding gather is fused with a convolution in one ORT kernel"),
    _internal(GATHER_ND, f"ORT's own (training) {GATHER_ND}, not the ONNX op: its semantics are not ONNX's"),
)

__all__ = ["SOURCES"]
