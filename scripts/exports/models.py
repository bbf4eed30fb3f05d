"""Real exports for ``gathermultiaxis bench end-to-end``: tiny random-weight transformers exported by torch, and
a hummingbird-ml tree ensemble (nothing downloaded). Needs ``torch`` and ``transformers``; hummingbird-ml is
optional (``pip install --no-deps hummingbird-ml onnxconverter-common scikit-learn`` keeps torch and onnx)."""

from __future__ import annotations

import contextlib
import functools
import io
from pathlib import Path
from typing import Any, Callable

import numpy as np

BATCH, SEQUENCE, PAST = 1, 16, 15
VOCAB = 1000
_TINY: dict[str, Any] = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)


def _ids(*shape) -> np.ndarray:
    return np.random.default_rng(0).integers(1, VOCAB, shape, dtype=np.int64)


def _export(module, feeds: dict[str, np.ndarray], path: Path, dynamo: bool, symbolic: bool = True) -> None:
    """The dynamo exporter with static shapes; the TorchScript one with symbolic batch and sequence dims
    on 2-D inputs (unless not ``symbolic``), as such exports are usually made (their shape arithmetic is
    then a chain of tiny int64 Gathers)."""
    import torch

    args = tuple(torch.from_numpy(value) for value in feeds.values())
    lengths = [value.shape[1] for value in feeds.values() if value.ndim == 2]
    options = {"external_data": False} if dynamo else {  # one dim name per length (ORT holds a name to one size)
        "dynamic_axes": {name: {0: "batch", 1: "sequence" if value.shape[1] == lengths[0] else f"{name}_length"}
                         for name, value in feeds.items() if value.ndim == 2 and symbolic}}
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        torch.onnx.export(module.eval(), args, str(path), input_names=list(feeds), dynamo=dynamo, opset_version=18,
                          **options)


def _logits(model, names: list[str], **options):
    """A module calling ``model`` with its inputs by name (positions differ between architectures: GPT-2's
    second one is ``past_key_values``) and returning the ``logits`` tensor only."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(names, args)), **options).logits

    return Logits()


def _bert(path: Path, dynamo: bool = True) -> dict:
    from transformers import BertConfig, BertForMaskedLM

    model = BertForMaskedLM(BertConfig(vocab_size=VOCAB, max_position_embeddings=128, **_TINY))
    feeds = {"input_ids": _ids(BATCH, SEQUENCE), "attention_mask": np.ones((BATCH, SEQUENCE), np.int64),
             "token_type_ids": np.zeros((BATCH, SEQUENCE), np.int64)}
    _export(_logits(model, list(feeds), use_cache=False), feeds, path, dynamo)
    return feeds


def _gpt2(path: Path, dynamo: bool) -> dict:
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=2, n_positions=128))
    feeds = {"input_ids": _ids(BATCH, SEQUENCE), "attention_mask": np.ones((BATCH, SEQUENCE), np.int64)}
    _export(_logits(model, list(feeds), use_cache=False), feeds, path, dynamo)
    return feeds


def _seq2seq(path: Path, architecture: str, dynamo: bool = True) -> dict:
    import transformers

    config: transformers.T5Config | transformers.BartConfig
    model: transformers.T5ForConditionalGeneration | transformers.BartForConditionalGeneration
    if architecture == "t5":
        # call-arg: transformers' annotated signature omits the config kwargs its __init__ takes at run time
        config = transformers.T5Config(vocab_size=VOCAB, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2,
                                       decoder_start_token_id=0)  # type: ignore[call-arg]
        model = transformers.T5ForConditionalGeneration(config)
    else:
        config = transformers.BartConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
                                         encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128,
                                         decoder_ffn_dim=128, max_position_embeddings=128)
        model = transformers.BartForConditionalGeneration(config)
    feeds = {"input_ids": _ids(BATCH, SEQUENCE), "attention_mask": np.ones((BATCH, SEQUENCE), np.int64),
             "decoder_input_ids": _ids(BATCH, 8)}
    _export(_logits(model, list(feeds), use_cache=False), feeds, path, dynamo)
    return feeds


# transformers classes by architecture, and the tiny config of each
_DECODERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=64, n_layer=2, n_head=2, n_positions=128)),
    **{name: (config, model, dict(_TINY, num_key_value_heads=1, max_position_embeddings=128, **extra))
       for name, config, model, extra in (("llama", "LlamaConfig", "LlamaForCausalLM", {}),
                                          ("qwen2", "Qwen2Config", "Qwen2ForCausalLM", {}),
                                          ("phi3", "Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0}),
                                          ("mistral", "MistralConfig", "MistralForCausalLM", {}))},
}


def decoder_step(path: Path, architecture: str, dynamo: bool, symbolic: bool = True, batch: int = BATCH,
                 sequence: int = 1, past: int = PAST) -> dict:
    """One KV-cache decode step (``sequence`` new tokens over ``past`` cached positions) of a ``_DECODERS``
    architecture, exported to ``path`` by dynamo (``dynamo``) or TorchScript; returns the example inputs.
    With ``symbolic`` the batch, sequence and past lengths are symbolic dims (TorchScript: ``batch``, ``sequence``,
    ``total_sequence``, ``past_sequence``; dynamo names its own, ``s23``...). Dynamo specialises dims of size 0
    or 1: give ``batch`` and ``sequence`` of 2 or more."""
    import torch
    import transformers

    config_name, model_name, options = _DECODERS[architecture]
    config = getattr(transformers, config_name)(vocab_size=VOCAB, **options)
    model = getattr(transformers, model_name)(config).eval()
    layers = config.num_hidden_layers
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = config.hidden_size // config.num_attention_heads
    rng = np.random.default_rng(1)
    feeds = {"input_ids": rng.integers(1, VOCAB, (batch, sequence), dtype=np.int64),
             "attention_mask": np.ones((batch, past + sequence), np.int64),
             "position_ids": np.tile(np.arange(past, past + sequence, dtype=np.int64), (batch, 1))}
    for layer in range(layers):
        for kind in ("key", "value"):
            feeds[f"past_{kind}_{layer}"] = rng.standard_normal((batch, heads, past, head_dim)).astype(np.float32)

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *cached):
            cache = transformers.DynamicCache(config=config)
            for layer in range(layers):
                cache.update(cached[2 * layer], cached[2 * layer + 1], layer)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
            grown = out.past_key_values
            return (out.logits, *(t for layer in range(layers) for t in (grown.layers[layer].keys,
                                                                         grown.layers[layer].values)))

    args = tuple(torch.from_numpy(value) for value in feeds.values())
    if not symbolic:
        options = {"dynamo": dynamo, **({"external_data": False} if dynamo else {})}
    elif dynamo:
        auto = torch.export.Dim.AUTO
        options = {"dynamo": True, "external_data": False, "dynamic_shapes": {
            **{name: {0: auto, 1: auto} for name in ("input_ids", "attention_mask", "position_ids")},
            "cached": tuple({0: auto, 2: auto} for _ in range(2 * layers))}}
    else:
        axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total_sequence"},
                "position_ids": {0: "batch", 1: "sequence"}}
        options = {"dynamo": False, "dynamic_axes": {**axes, **{name: {0: "batch", 2: "past_sequence"}
                                                               for name in list(feeds)[3:]}}}
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        torch.onnx.export(Step(), args, str(path), input_names=list(feeds), opset_version=18, **options)
    return feeds


def _llama_decode(path: Path) -> dict:
    """A Llama decode step, static shapes (the step's shapes are its point: one token over PAST)."""
    return decoder_step(path, "llama", dynamo=False, symbolic=False)


def _vit(path: Path, dynamo: bool = True) -> dict:
    from transformers import ViTConfig, ViTForImageClassification

    # call-arg: transformers' annotated signature omits num_labels, which its __init__ takes at run time
    model = ViTForImageClassification(ViTConfig(image_size=32, patch_size=8, num_channels=3, num_labels=10,  # type: ignore[call-arg]
                                                **_TINY))
    feeds = {"pixel_values": np.random.default_rng(2).standard_normal((BATCH, 3, 32, 32)).astype(np.float32)}
    _export(_logits(model, list(feeds)), feeds, path, dynamo)
    return feeds


def _swin(path: Path, dynamo: bool = True) -> dict:
    """Swin: its relative position bias is a Gather from a constant table (ViT's one Gather reads the
    hidden states). Eager attention: the dynamo exporter fails on the SDPA path."""
    from transformers import SwinConfig, SwinForImageClassification

    # call-arg: transformers' annotated signature omits num_labels, which its __init__ takes at run time
    config = SwinConfig(image_size=32, patch_size=4, num_channels=3, embed_dim=32, depths=[1, 1], num_heads=[2, 2],
                        window_size=4, num_labels=10)  # type: ignore[call-arg]
    model = SwinForImageClassification._from_config(config, attn_implementation="eager")
    feeds = {"pixel_values": np.random.default_rng(4).standard_normal((BATCH, 3, 32, 32)).astype(np.float32)}
    _export(_logits(model, list(feeds)), feeds, path, dynamo)
    return feeds


def _tree_ensemble(path: Path) -> dict:
    """A scikit-learn gradient-boosted ensemble converted by hummingbird-ml (its GEMM-free tree traversal
    is a chain of Gathers). hummingbird calls ``torch.onnx.export`` without ``dynamo``, which torch 2.13
    defaults to the dynamo exporter that rejects its dynamic axes: the TorchScript exporter is asked for."""
    import hummingbird.ml
    import onnx
    import torch
    from sklearn.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(3)
    x = rng.random((400, 20)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 1).astype(np.int64) + (x[:, 2] > 0.5)
    trees = GradientBoostingClassifier(n_estimators=20, max_depth=4, random_state=0).fit(x, y)
    feeds = x[:64]
    export = torch.onnx.export
    torch.onnx.export = functools.partial(export, dynamo=False)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            converted = hummingbird.ml.convert(trees, "onnx", feeds, extra_config={"tree_implementation": "tree_trav"})
    finally:
        torch.onnx.export = export
    onnx.save_model(converted.model, str(path))
    return {converted.model.graph.input[0].name: feeds}


def _sentence_encoder(path: Path, quantization: str | None = None) -> dict:
    """A small sentence encoder (``nn.TransformerEncoder``, 2 layers, d_model 64, 2 heads; the first token's
    vector) exported by TorchScript with symbolic batch and sequence, then optionally quantized by ORT's tools:
    ``"dynamic"`` (int8 weights), ``"static_qdq"`` (QDQ, calibrated on random ids), ``"matmul_nbits"`` (4-bit
    MatMulNBits, the embeddings' Gathers as GatherBlockQuantized)."""
    import tempfile

    import onnx
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, 64)
            self.pos = torch.nn.Embedding(128, 64)
            layer = torch.nn.TransformerEncoderLayer(64, 2, 128, dropout=0.0, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.norm = torch.nn.LayerNorm(64)

        def forward(self, ids):
            positions = torch.arange(ids.shape[1]).unsqueeze(0)
            return self.norm(self.encoder(self.embed(ids) + self.pos(positions)))[:, 0]

    torch.manual_seed(0)
    feeds = {"input_ids": _ids(2, SEQUENCE)}
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused kernel has no ONNX export
    try:
        with tempfile.TemporaryDirectory() as scratch:
            plain = Path(scratch) / "plain.onnx"
            with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
                torch.onnx.export(Encoder().eval(), (torch.from_numpy(feeds["input_ids"]),), str(plain),
                                  input_names=["input_ids"], output_names=["sentence"], opset_version=18,
                                  dynamo=False, dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}})
            _quantized(plain, path, quantization)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    return feeds


def _quantized(plain: Path, path: Path, quantization: str | None) -> None:
    import logging

    import onnx

    logging.getLogger("onnxruntime.quantization").setLevel(logging.ERROR)
    if quantization is None:
        onnx.save_model(onnx.load(str(plain)), str(path))
    elif quantization == "dynamic":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(plain), str(path), weight_type=QuantType.QInt8)
    elif quantization == "static_qdq":
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

        class RandomIds(CalibrationDataReader):
            def __init__(self):
                self.batches = iter([{"input_ids": np.random.default_rng(seed).integers(1, VOCAB, (2, SEQUENCE))}
                                     for seed in range(4)])

            def get_next(self):
                return next(self.batches, None)

        quantize_static(str(plain), str(path), RandomIds(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    elif quantization == "matmul_nbits":
        from onnxruntime.quantization import matmul_nbits_quantizer

        config = matmul_nbits_quantizer.DefaultWeightOnlyQuantConfig(
            block_size=32, is_symmetric=True, op_types_to_quantize=("MatMul", "Gather"),
            quant_axes=(("MatMul", 0), ("Gather", 1)))
        quantizer = matmul_nbits_quantizer.MatMulNBitsQuantizer(onnx.load(str(plain)), algo_config=config)
        quantizer.process()
        quantizer.model.save_model_to_file(str(path))
    else:
        raise ValueError(f"unknown quantization {quantization!r}")


EXPORTS: dict[str, Callable[[Path], dict]] = {
    "bert_dynamo": _bert,
    "gpt2_dynamo": functools.partial(_gpt2, dynamo=True),
    "gpt2_torchscript": functools.partial(_gpt2, dynamo=False),
    "t5_dynamo": functools.partial(_seq2seq, architecture="t5"),
    "bart_dynamo": functools.partial(_seq2seq, architecture="bart"),
    "llama_decode_kv_cache_torchscript": _llama_decode,
    "vit_dynamo": _vit,
    "hummingbird_gbdt_tree_trav": _tree_ensemble,
}

# The TorchScript counterparts of the dynamo exports above, and Swin both ways (tests/exports/test_real_exports.py
# exports every architecture both ways; not part of the default ``build-exports`` set).
TORCHSCRIPT_EXPORTS: dict[str, Callable[[Path], dict]] = {
    "bert_torchscript": functools.partial(_bert, dynamo=False),
    "t5_torchscript": functools.partial(_seq2seq, architecture="t5", dynamo=False),
    "vit_torchscript": functools.partial(_vit, dynamo=False),
    "swin_dynamo": _swin,
    "swin_torchscript": functools.partial(_swin, dynamo=False),
}

# The sentence encoder (TorchScript) as exported and as ORT's quantization tools write it (not
# part of the default ``build-exports`` set).
ENCODER_EXPORTS: dict[str, Callable[[Path], dict]] = {
    "encoder_torchscript": _sentence_encoder,
    **{f"encoder_{quantization}": functools.partial(_sentence_encoder, quantization=quantization)
       for quantization in ("dynamic", "static_qdq", "matmul_nbits")},
}

# Decode steps with symbolic batch, sequence and past lengths, as exported for generation (the tests of
# ``check``'s generated inputs build them; not part of the default ``build-exports`` set).
DECODER_EXPORTS: dict[str, Callable[[Path], dict]] = {
    f"{architecture}_kv_{exporter}": functools.partial(decoder_step, architecture=architecture,
                                                       dynamo=exporter == "dynamo", batch=2, sequence=2)
    for architecture in _DECODERS for exporter in ("dynamo", "torchscript")
}


def build_exports(folder: str | Path, names: list[str] | None = None,
                  progress: Callable[[str], None] | None = None) -> tuple[list[Path], dict[str, str]]:
    """Write ``NAME.onnx`` and ``NAME.inputs.npz`` (the inputs to time it with) into ``folder`` for each export.

    Args:
        folder: the folder to write into (it must exist).
        names: export names (also ``TORCHSCRIPT_EXPORTS``, ``DECODER_EXPORTS``, ``ENCODER_EXPORTS``), or None
            for every name of ``EXPORTS``.
        progress: called with each name before it is built, or None.

    Returns:
        ``(written, skipped)``: the written model paths, and name -> why it was not built (a package not
        installed, or the exporter's error).

    Raises:
        KeyError: a name that is no export."""
    import onnx

    folder = Path(folder)
    written, skipped = [], {}
    for name in names or list(EXPORTS):
        if progress:
            progress(name)
        path = folder / f"{name}.onnx"
        try:
            feeds = {**EXPORTS, **TORCHSCRIPT_EXPORTS, **DECODER_EXPORTS, **ENCODER_EXPORTS}[name](path)
            onnx.checker.check_model(str(path))
        except ImportError as error:
            skipped[name] = f"not installed: {error.name or error}"
            continue
        except Exception as error:  # noqa: BLE001 - an exporter failing on one model: the others still run
            skipped[name] = f"export failed: {type(error).__name__}: {' '.join(str(error).split())[:300]}"
            path.unlink(missing_ok=True)
            continue
        np.savez(folder / f"{name}.inputs.npz", **feeds)
        written.append(path)
    return written, skipped
