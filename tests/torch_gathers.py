"""A PyTorch module whose ONNX export holds embedding, torch.gather, index_select and advanced indexing,
exported with dynamic batch and sequence axes. ``python tests/torch_gathers.py`` rewrites the shipped
copy tests/data/torch_gathers.onnx (needs torch; the tests use the shipped file when torch is absent)."""

import io
import warnings
from pathlib import Path

SHIPPED = Path(__file__).resolve().parent / "data" / "torch_gathers.onnx"


def feeds_for(batch, seq, seed):
    """Random feeds of the shipped export, ``batch`` sequences of ``seq`` tokens."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return {"tokens": rng.integers(0, 30, (batch, seq)), "scores": rng.standard_normal((batch, seq)).astype(np.float32),
            "order": rng.integers(0, seq, (batch, seq)), "rows": np.array([seq - 1, 0])}


INPUT_NAMES = ["tokens", "scores", "order", "rows"]


def module_and_inputs(batch=2, seq=5, seed=0):
    import torch

    class Gathers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.embedding = torch.nn.Embedding(30, 6)

        def forward(self, tokens, scores, order, rows):
            embedded = self.embedding(tokens)                                       # Gather
            reordered = torch.gather(scores, 1, order)                              # GatherElements
            selected = torch.index_select(embedded, 1, rows)                        # Gather
            picked = embedded[torch.arange(embedded.shape[0]).unsqueeze(1), order[:, :2]]  # advanced indexing
            last = embedded[:, -1]                                                  # Gather, scalar index
            return reordered, selected, picked, last

    generator = torch.Generator().manual_seed(seed)
    inputs = (torch.randint(0, 30, (batch, seq), generator=generator), torch.randn(batch, seq, generator=generator),
              torch.randint(0, seq, (batch, seq), generator=generator), torch.tensor([seq - 1, 0]))
    return Gathers().eval(), inputs


def export() -> bytes:
    import torch

    module, inputs = module_and_inputs()
    dynamic = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES[:3]}
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, buffer, input_names=INPUT_NAMES,
                          output_names=["reordered", "selected", "picked", "last"], dynamic_axes=dynamic,
                          opset_version=17, dynamo=False)
    return buffer.getvalue()


if __name__ == "__main__":
    SHIPPED.parent.mkdir(exist_ok=True)
    SHIPPED.write_bytes(export())
    print(f"wrote {SHIPPED}")
