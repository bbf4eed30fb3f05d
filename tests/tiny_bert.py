"""A two-layer BERT-like encoder (word, position and token-type embeddings, attention, GELU, LayerNorm),
exported by TorchScript at opset 14 with dynamic batch and sequence axes: the input of ORT's transformer
optimizer and offline optimizer in tests/graphs/rewrite/test_ort_optimizer.py. ``python tests/tiny_bert.py`` rewrites
the shipped copy tests/data/tiny_bert.onnx (needs torch; the tests only use the shipped file)."""

import io
import warnings
from pathlib import Path

SHIPPED = Path(__file__).resolve().parent / "data" / "tiny_bert.onnx"
INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]
VOCAB, HIDDEN, HEADS = 50, 16, 2


def module():
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.out = nn.Linear(HIDDEN, 3 * HIDDEN), nn.Linear(HIDDEN, HIDDEN)
            self.up, self.down = nn.Linear(HIDDEN, 4 * HIDDEN), nn.Linear(4 * HIDDEN, HIDDEN)
            self.norm1, self.norm2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)

        def forward(self, x, mask):
            batch, length, _ = x.shape
            heads = [z.view(batch, length, HEADS, HIDDEN // HEADS).transpose(1, 2)
                     for z in self.qkv(x).split(HIDDEN, dim=-1)]
            scores = heads[0] @ heads[1].transpose(-1, -2) / (HIDDEN // HEADS) ** 0.5 + mask
            attended = (scores.softmax(-1) @ heads[2]).transpose(1, 2).reshape(batch, length, HIDDEN)
            x = self.norm1(x + self.out(attended))
            return self.norm2(x + self.down(nn.functional.gelu(self.up(x))))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.word, self.position, self.kind = nn.Embedding(VOCAB, HIDDEN), nn.Embedding(32, HIDDEN), nn.Embedding(2, HIDDEN)
            self.norm = nn.LayerNorm(HIDDEN)
            self.layers = nn.ModuleList([Layer(), Layer()])

        def forward(self, input_ids, attention_mask, token_type_ids):
            positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
            x = self.norm(self.word(input_ids) + self.position(positions) + self.kind(token_type_ids))
            mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
            for layer in self.layers:
                x = layer(x, mask)
            return x

    torch.manual_seed(0)
    return Bert().eval()


def export() -> bytes:
    import torch

    inputs = (torch.randint(0, VOCAB, (2, 7)), torch.ones(2, 7, dtype=torch.int64), torch.zeros(2, 7, dtype=torch.int64))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module(), inputs, buffer, input_names=INPUT_NAMES, output_names=["hidden"],
                          dynamic_axes={name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES},
                          opset_version=14, dynamo=False)
    return buffer.getvalue()


if __name__ == "__main__":
    SHIPPED.parent.mkdir(exist_ok=True)
    SHIPPED.write_bytes(export())
    print(f"wrote {SHIPPED}")
