"""examples: the shipped model is what the builder makes, and its inputs feed it on ORT."""

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from gathermultiaxis.examples import EXAMPLE_PATH, build_example_model, example_inputs


def test_shipped_example_is_what_the_builder_makes():
    assert onnx.load_model(str(EXAMPLE_PATH)) == build_example_model()


def test_example_inputs_feed_every_input_with_its_declared_type():
    model = build_example_model()
    feeds = example_inputs(batch=3, sequence=4, seed=1)
    assert sorted(feeds) == sorted(value.name for value in model.graph.input)
    for value in model.graph.input:
        wanted = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        assert feeds[value.name].dtype == wanted, value.name
    outputs = ort.InferenceSession(str(EXAMPLE_PATH), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert len(outputs) == len(model.graph.output) and all(np.asarray(o).size for o in outputs)
    again = example_inputs(batch=3, sequence=4, seed=1)
    assert all(np.array_equal(feeds[name], again[name]) for name in feeds)  # the seed decides them
