"""Lowered forms that other runtimes take: what OpenVINO, tract and onnxruntime-web refused, fixed in the lowering.

Each runs on ORT (default optimizations, which are what removed a form's Expand) and, where the runtime that
refused it is installed, there too; elsewhere that half skips, saying why.
"""

import importlib.util

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from support import assert_bit_identical, make_model

from gathermultiaxis.conformance import runtimes
from gathermultiaxis.examples import EXAMPLE_PATH, example_inputs
from gathermultiaxis.graphs import lower_model, rewrite_model
from gathermultiaxis.graphs.webnn import lower_for_webnn

T = TensorProto


def on(name: str):
    """Runtime ``name``, or a skip saying what is missing."""
    module = {"openvino": "openvino", "tract": "tract"}[name]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"the {name} runtime needs the Python package {module!r} (an extra)")
    return runtimes.runtime(name)


def run_twice(name: str, original, form, feeds):
    """The original and the form on runtime ``name`` (ORT: default optimizations), outputs bit for bit."""
    target = runtimes.runtime("ort") if name == "ort" else on(name)
    for want, got in zip(target.load(original).run(feeds), target.load(form).run(feeds)):
        assert_bit_identical(got, want)


@pytest.mark.parametrize("runtime", ["ort", "tract"])
def test_lowered_outputs_keep_no_dim_names_the_rewrite_declared(runtime):
    """The rewrite types each output it replaces with the inferred dims (``embedded: [batch, sequence, 8]``);
    tract pins inputs to sizes and refuses a name meeting a size, so the lowered model keeps sizes, not names."""
    original = onnx.load_model(str(EXAMPLE_PATH))
    rewritten, _ = rewrite_model(original)
    own = {info.name for info in original.graph.value_info}
    named = {info.name for info in rewritten.graph.value_info if info.name not in own
             and any(dim.HasField("dim_param") for dim in info.type.tensor_type.shape.dim)}
    assert named, "the rewrite declared no dim names: nothing to test"
    feeds = example_inputs(seed=0)
    shapes = {name: value.shape for name, value in feeds.items()}
    for form in (lower_model(rewritten)[0], lower_for_webnn(rewritten, shapes)[0]):
        left = [info.name for info in form.graph.value_info if info.name in named
                and any(dim.HasField("dim_param") for dim in info.type.tensor_type.shape.dim)]
        assert left == []
        run_twice(runtime, original, form, feeds)


def empty_gather_cases():
    """Fuzz cases whose GatherND output is empty (a size-0 dim), as the fuzzer draws them."""
    from gathermultiaxis.conformance.fuzz import fuzz_case

    return [fuzz_case(seed) for seed in (235, 379, 880)]


@pytest.mark.parametrize("case", empty_gather_cases(), ids=lambda case: case.name)
def test_webnn_form_of_an_empty_output_holds_no_expand_to_size_0(case):
    """Once shapes are static, an Expand from size 1 to 0 is what ORT's optimizer removes (ExpandElimination
    takes a target 0 for 1: a wrong shape, or a later GatherND reading a non-empty tensor and raising);
    the WebNN form holds that empty tensor as a constant instead, and ORT's default session agrees."""
    rewritten, _ = rewrite_model(case.model)
    feeds = case.data_sets[0].feeds
    form, _ = lower_for_webnn(rewritten, {name: value.shape for name, value in feeds.items()})
    assert not [node.name for node in form.graph.node if node.op_type == "Expand"]
    run_twice("ort", case.model, form, feeds)


@pytest.mark.parametrize("runtime", ["ort", "tract"])
def test_a_gather_the_rewrite_restores_keeps_no_dim_names_either(runtime):
    """Gather at a scalar index: the rewrite's Squeeze writes the gather's own output and types it
    ``[batch, 8]`` (as in BART's and LayoutLM's TorchScript exports); the lowered model keeps no name there."""
    from onnx import numpy_helper

    model = make_model([helper.make_node("Gather", ["x", "i"], ["g"], axis=1), helper.make_node("Relu", ["g"], ["y"])],
                       [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 8])],
                       [helper.make_tensor_value_info("y", T.FLOAT, None)],
                       [numpy_helper.from_array(np.array(0, np.int64), "i")])
    rewritten, _ = rewrite_model(model)
    assert [dim.dim_param for info in rewritten.graph.value_info if info.name == "g"
            for dim in info.type.tensor_type.shape.dim][:1] == ["batch"], "the rewrite no longer names it"
    lowered, _ = lower_model(rewritten)
    assert not [info.name for info in lowered.graph.value_info
                if any(dim.HasField("dim_param") for dim in info.type.tensor_type.shape.dim)]
    run_twice(runtime, model, lowered, {"x": np.arange(48, dtype=np.float32).reshape(2, 3, 8)})
