"""The browser run: onnxruntime-web's WASM build in headless Chromium (check --runtime web).

One browser for the module, cases batched. Needs chromium, node and ``npm ci`` in
scripts/conformance/web/ (.ci/run installs them); without them the module skips and says what is missing.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gathermultiaxis.conformance import check, runtimes
from gathermultiaxis.conformance.cases import CheckCase, DataSet
from gathermultiaxis.examples import EXAMPLE_PATH, example_inputs

MISSING = runtimes.web_missing()
if MISSING:
    pytest.skip(f"the browser run needs {'; '.join(MISSING)}", allow_module_level=True)


@pytest.fixture(scope="module")
def web():
    runtime = runtimes.runtime("web")
    yield runtime
    runtime.close()


def gather(data: np.ndarray, indices: np.ndarray) -> onnx.ModelProto:
    elem = TensorProto.STRING if data.dtype == object else helper.np_dtype_to_tensor_dtype(data.dtype)
    graph = helper.make_graph([helper.make_node("Gather", ["data", "indices"], ["output"], axis=0)], "g",
                              [helper.make_tensor_value_info("data", elem, list(data.shape)),
                               helper.make_tensor_value_info("indices", TensorProto.INT64, list(indices.shape))],
                              [helper.make_tensor_value_info("output", elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


ROUND_TRIP = {
    "float32 NaN payloads and -0": np.array([0x7F800001, 0x7FC00001, 0x80000000], np.uint32).view(np.float32),
    "float16 signalling NaN, -0": np.array([0x7C01, 0x7E01, 0x8000], np.uint16).view(np.float16),
    "int64 extremes": np.array([-2**63, 2**63 - 1, 2**53 + 1], np.int64),
    "uint64 extremes": np.array([2**64 - 1, 2**63, 1], np.uint64),
    "bool": np.array([True, False, True]),
    "int8": np.array([-128, 127, 0], np.int8),
    "float64": np.array([np.pi, -0.0, np.nan]),
    "strings": np.array(["a", "ü", ""], dtype=object),
}


def test_tensors_cross_into_the_page_and_back_bit_for_bit(web):
    """Each type the page carries, through a Gather in the browser, equals ORT's Python result byte for byte;
    a type onnxruntime-web's tensors lack is refused by name."""
    indices = np.array([2, 0, 1], np.int64)  # blocks of one element: ORT's string Gather is right there
    for name, data in ROUND_TRIP.items():
        model = gather(data, indices)
        (got,) = web.load(model).run({"data": data, "indices": indices})
        (want,) = runtimes.runtime("ort").load(model).run({"data": data, "indices": indices})
        assert (got.dtype, got.shape) == (want.dtype, want.shape), name
        assert got.tolist() == want.tolist() if data.dtype == object else got.tobytes() == want.tobytes(), name
    with pytest.raises(runtimes.Refused, match="cannot carry input 'data' of type complex64"):
        web.load(gather(np.zeros(2, np.complex64), indices)).run({"data": np.zeros(2, np.complex64),
                                                                  "indices": indices})


# Fuzz cases with an empty output (onnxruntime-web refused their WebNN form's Expand to size 0: "Inferred=1
# Declared=0") and ORT's string Gather bug (blocks of more than one element), then a plain slice of the fuzzer.
EMPTY_OUTPUTS = (73, 156, 235, 379, 880)
STRINGS = (210, 567)


@pytest.mark.parametrize("mode", [check.CheckMode.LOWERED, check.CheckMode.WEBNN])
def test_check_runtime_web_original_equals_the_form(web, mode):
    """The bundled example and fuzz cases, original vs lowered / WebNN form, all in the browser."""
    example = CheckCase("bundled example", onnx.load_model(str(EXAMPLE_PATH)),
                        [DataSet(example_inputs(seed=s)) for s in range(2)])
    seeds = sorted({*EMPTY_OUTPUTS, *STRINGS, *range(12)})
    sources = [example, *(check.FuzzSeed(seed) for seed in seeds)]
    report = check.run(sources, isolate=False, mode=mode, runtime="web")
    verdicts = {result.case: result.verdict for result in report.results}
    assert report.counts()["failed"] == 0, [(r.name, r.detail) for r in report.results if r.verdict == "failed"]
    assert verdicts["bundled example"] == "passed"
    assert all(verdicts[f"fuzz seed {seed}"] != "not runnable" for seed in EMPTY_OUTPUTS)
    assert sum(result.verdict == "passed" for result in report.results) >= 12
