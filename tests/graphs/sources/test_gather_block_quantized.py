"""GatherBlockQuantized (com.microsoft) rewritten as GatherMultiaxis plus dequantization, and lowered to
standard ONNX: bit-identical to ORT's own contrib kernel, on every data layout the kernel takes."""

import itertools
from collections import Counter

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from sessions import builtin_session, custom_session
from support import assert_bit_identical

from gathermultiaxis.graphs import lower_model, rewrite_model

OPS = ("GatherBlockQuantized",)


def gbq_model(data, scales, zero_points, indices_shape, index_type, **attributes):
    """One GatherBlockQuantized node over initializers; ``data`` and ``zero_points`` are TensorProtos
    (int4 / uint4 ones packed by onnx.helper), ``indices`` the graph input."""
    initializers = [data, numpy_helper.from_array(scales, "scales")]
    inputs = ["data", "indices", "scales"]
    if zero_points is not None:
        initializers.append(zero_points)
        inputs.append("zero_points")
    node = helper.make_node("GatherBlockQuantized", inputs, ["output"], domain="com.microsoft", **attributes)
    output_type = TensorProto.FLOAT16 if scales.dtype == np.float16 else TensorProto.FLOAT
    graph = helper.make_graph([node], "gbq", [helper.make_tensor_value_info("indices", index_type, list(indices_shape))],
                              [helper.make_tensor_value_info("output", output_type, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


def random_indices(rng, shape, dim, index_type):
    """In-range indices, negative ones, and a few out of range (ORT writes zeros for those)."""
    values = rng.integers(-dim, dim, shape)
    if values.size:
        values.flat[rng.integers(0, values.size)] = rng.choice([dim, -dim - 1, dim + 5])
    return values.astype(np.int32 if index_type == TensorProto.INT32 else np.int64)


def scales_for(rng, shape, dtype):
    scales = rng.standard_normal(shape).astype(dtype)
    scales.flat[0] = -scales.flat[0]  # both signs, and -0.0 results where a code meets its zero point
    return scales


def packed_case(rng, bits, block_size, with_zero_points, scale_dtype, lead):
    """uint8 data [*lead, packed], MatMulNBits-style: 8/bits codes per byte, quantize_axis last."""
    components = 8 // bits
    codes = int(rng.choice([block_size, 2 * block_size, block_size + 16 * components, 3 * block_size // 2]))
    codes -= codes % components
    packed = max(codes // components, 1)
    blocks = -(-packed * components // block_size)
    data = rng.integers(0, 256, (*lead, packed), dtype=np.uint8)
    zero_points = None
    if with_zero_points:
        zero_points = numpy_helper.from_array(rng.integers(0, 256, (*lead, -(-blocks // components)), dtype=np.uint8),
                                              "zero_points")
    attributes = dict(gather_axis=0, quantize_axis=len(lead), block_size=block_size, bits=bits)
    return numpy_helper.from_array(data, "data"), scales_for(rng, (*lead, blocks), scale_dtype), zero_points, \
        attributes, lead[0]


def nibble_case(rng, elem_type, block_size, with_zero_points, scale_dtype, shape, gather_axis, quantize_axis):
    """int4 / uint4 data of ``shape`` (logical), any gather_axis and quantize_axis that differ."""
    low, high = (-8, 8) if elem_type == TensorProto.INT4 else (0, 16)
    scale_shape = list(shape)
    scale_shape[quantize_axis] = -(-shape[quantize_axis] // block_size)
    data = helper.make_tensor("data", elem_type, shape, rng.integers(low, high, int(np.prod(shape))).tolist())
    zero_points = None
    if with_zero_points:
        zero_points = helper.make_tensor("zero_points", elem_type, scale_shape,
                                         rng.integers(low, high, int(np.prod(scale_shape))).tolist())
    attributes = dict(gather_axis=gather_axis, quantize_axis=quantize_axis, block_size=block_size, bits=4)
    return data, scales_for(rng, scale_shape, scale_dtype), zero_points, attributes, shape[gather_axis]


def check_case(case, rng, counts):
    data, scales, zero_points, attributes, dim = case
    index_type = TensorProto.INT32 if rng.random() < 0.5 else TensorProto.INT64
    indices_shape = [(5,), (2, 3), (1,), ()][rng.integers(0, 4)]
    model = gbq_model(data, scales, zero_points, indices_shape, index_type, **attributes)
    feeds = {"indices": random_indices(rng, indices_shape, dim, index_type)}
    expected = builtin_session(model).run(None, feeds)[0]  # ORT's contrib kernel
    rewritten, report = rewrite_model(model, OPS)
    assert (report.rewritten, report.left) == (1, 0), report.table()
    assert not any(node.op_type == "GatherBlockQuantized" for node in rewritten.graph.node)
    assert_bit_identical(custom_session(rewritten).run(None, feeds)[0], expected)
    lowered, lower_report = lower_model(rewritten)
    assert lower_report.left == 0 and {o.domain for o in lowered.opset_import} <= {"", "ai.onnx", "com.microsoft"}
    assert all(node.domain in ("", "ai.onnx") for node in lowered.graph.node)  # plain ORT, no contrib op
    assert_bit_identical(builtin_session(lowered).run(None, feeds)[0], expected)
    counts["cases"] += 1
    counts["with out-of-range indices"] += 1 if feeds["indices"].size else 0


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_uint8_packed_against_ort(bits, report_line):
    rng, counts = np.random.default_rng(bits), Counter()
    for block_size, with_zero_points, scale_dtype, lead in itertools.product(
            (16, 32, 64, 128), (False, True), (np.float32, np.float16), ((7,), (5, 3))):
        check_case(packed_case(rng, bits, block_size, with_zero_points, scale_dtype, lead), rng, counts)
    report_line(f"GatherBlockQuantized uint8 bits={bits} vs ORT's contrib kernel (rewritten and lowered): "
                f"{counts['cases']} cases bit-identical (block sizes 16-128, with/without zero points, "
                f"float/float16 scales, data rank 2 and 3)")


@pytest.mark.parametrize("elem_type", [TensorProto.INT4, TensorProto.UINT4], ids=["int4", "uint4"])
def test_int4_uint4_against_ort(elem_type, report_line):
    rng, counts = np.random.default_rng(elem_type), Counter()
    axes_by_rank = {2: [(0, 1), (1, 0), (0, 0), (1, 1)], 3: [(0, 2), (0, 1), (1, 2), (2, 0), (1, 0), (2, 1), (0, 0), (1, 1), (2, 2)]}
    for rank, block_size, with_zero_points in itertools.product((2, 3), (16, 32, 64), (False, True)):
        for gather_axis, quantize_axis in axes_by_rank[rank]:
            shape = [int(rng.integers(2, 6)) for _ in range(rank)]
            shape[quantize_axis] = int(rng.choice([block_size, 2 * block_size, block_size + 6]))
            scale_dtype = np.float16 if rng.random() < 0.3 else np.float32
            check_case(nibble_case(rng, elem_type, block_size, with_zero_points, scale_dtype, shape, gather_axis,
                                   quantize_axis), rng, counts)
    report_line(f"GatherBlockQuantized {TensorProto.DataType.Name(elem_type).lower()} vs ORT's contrib kernel "
                f"(rewritten and lowered): {counts['cases']} cases bit-identical (every gather_axis/quantize_axis "
                f"pair of ranks 2 and 3, equal ones included, block sizes 16-64, ragged last blocks, with/without zero points)")


def test_opt_in():
    rng = np.random.default_rng(0)
    data, scales, zero_points, attributes, _ = packed_case(rng, 4, 32, False, np.float32, (4,))
    model = gbq_model(data, scales, zero_points, (2,), TensorProto.INT64, **attributes)
    rewritten, report = rewrite_model(model)
    assert rewritten.graph.node[0].op_type == "GatherBlockQuantized"
    [row] = report.outcomes  # left, as a row of the report, saying how to ask for it
    assert row.op_type == "com.microsoft.GatherBlockQuantized" and not row.rewritten and "asked for" in row.reason


def test_what_ort_refuses_is_left_with_the_reason():
    """uint8 data with gather_axis != 0 and int4 data with bits 8 (ORT's kernel refuses both) stay as they
    are, each with the reason in the report."""
    rng = np.random.default_rng(1)
    data, scales, _, attributes, _ = packed_case(rng, 4, 16, False, np.float32, (4, 3))
    model = gbq_model(data, scales, None, (2,), TensorProto.INT64, **{**attributes, "gather_axis": 1})
    _, report = rewrite_model(model, OPS)
    assert report.rewritten == 0 and "gather_axis 0" in report.outcomes[0].reason
    data, scales, _, attributes, _ = nibble_case(rng, TensorProto.INT4, 16, False, np.float32, [3, 32], 0, 1)
    model = gbq_model(data, scales, None, (2,), TensorProto.INT64, **{**attributes, "bits": 8})
    _, report = rewrite_model(model, OPS)
    assert report.rewritten == 0 and "bits 4" in report.outcomes[0].reason


def test_ort_where_loses_negative_zero():
    """ORT's CPU Where turns a selected -0.0 into +0.0 (why the rewrite masks integer codes and reads the
    scales in mode "zero" instead of a Where on floats). When this fails, ORT fixed it."""
    node = helper.make_node("Where", ["condition", "x", "y"], ["z"])
    graph = helper.make_graph([node], "where", [helper.make_tensor_value_info("condition", TensorProto.BOOL, [2]),
                                                helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                                                helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    z = builtin_session(model).run(None, {"condition": np.array([True, True]), "x": np.array([-0.0, 1], np.float32),
                                          "y": np.zeros(2, np.float32)})[0]
    assert not np.signbit(z[0])


# -- a real onnxruntime-genai model ------------------------------------------------------------------

GENAI_MODEL = '''
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
import torch
torch.manual_seed(0)
config = Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=True)
Qwen2ForCausalLM(config).save_pretrained(sys.argv[1])
words = {f"w{i}": i for i in range(254)} | {"<unk>": 254, "<eos>": 255}
tokenizer = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", eos_token="<eos>",
                        pad_token="<eos>").save_pretrained(sys.argv[1])
'''


@pytest.mark.slow
def test_genai_int4_model_with_tied_embeddings(tmp_path, report_line):
    """onnxruntime-genai's builder (-p int4 -e cpu) on a random-init Qwen2 with tied embeddings writes a
    GatherBlockQuantized over the lm_head's 4-bit weights. Rewritten (gathers and GatherBlockQuantized)
    and lowered, the model gives ORT's outputs bit for bit, with no gather left unreported."""
    import os
    import subprocess
    import sys

    import onnx
    pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai is not installed (pip install onnxruntime-genai)")
    pytest.importorskip("transformers", reason="transformers is not installed")
    from sessions import builtin_session, custom_session

    from gathermultiaxis.graphs import GATHER_OPS, OPT_IN_OPS

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run([sys.executable, "-c", GENAI_MODEL, str(tmp_path / "hf")], check=True, env=env, timeout=600,
                   capture_output=True)
    subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-m", "qwen2-tiny", "-i",
                    str(tmp_path / "hf"), "-o", str(tmp_path / "out"), "-p", "int4", "-e", "cpu", "-c",
                    str(tmp_path / "cache")], check=True, env=env, timeout=900, capture_output=True)
    model = onnx.load(str(tmp_path / "out" / "model.onnx"))
    assert any(node.op_type == "GatherBlockQuantized" for node in model.graph.node)
    rewritten, report = rewrite_model(model, GATHER_OPS + OPT_IN_OPS)
    assert report.counts().get("GatherBlockQuantized", {}).get("rewritten") == 1, report.table()
    # what is left is only the gathers inside ORT's fused attention, each reported as such (none unreported)
    left = [outcome for outcome in report.outcomes if not outcome.rewritten]
    assert all(o.op_type == "com.microsoft.GroupQueryAttention" and o.reason.startswith("inside com.microsoft.")
               for o in left), report.table()
    assert len(left) == sum(node.op_type == "GroupQueryAttention" for node in model.graph.node), report.table()
    gathers = ("Gather", "GatherElements", "GatherND", "GatherBlockQuantized")
    assert not any(node.op_type in gathers for node in rewritten.graph.node)
    lowered, lower_report = lower_model(rewritten)
    assert lower_report.left == 0
    assert not any(node.domain == "com.microsoft" and node.op_type in gathers for node in lowered.graph.node)
    rng, runs = np.random.default_rng(0), 0
    sessions = builtin_session(model), custom_session(rewritten), builtin_session(lowered)
    for batch, sequence, past in [(1, 7, 0), (2, 5, 0), (2, 1, 3), (1, 4, 6), (1, 1, 9)]:
        feeds = {"input_ids": rng.integers(0, 256, (batch, sequence)), "attention_mask": np.ones((batch, past + sequence), np.int64)}
        for value in model.graph.input:
            if value.name.startswith("past_key_values"):
                heads = value.type.tensor_type.shape.dim[1].dim_value
                size = 64 // 4  # the head size; declared symbolic ("kv_cache_dim")
                feeds[value.name] = rng.standard_normal((batch, heads, past, size)).astype(np.float32)
        expected = sessions[0].run(None, feeds)
        for session in sessions[1:]:
            for actual, wanted in zip(session.run(None, feeds), expected):
                assert_bit_identical(actual, wanted)
        runs += 1
    report_line(f"onnxruntime-genai int4 Qwen2 (tied embeddings): {report.rewritten} gathers rewritten "
                f"(GatherBlockQuantized included), {len(left)} left inside GroupQueryAttention (reported rows), 0 gather "
                f"nodes left; rewritten and lowered bit-identical to ORT on {runs} "
                f"input sets")


def ort_refuses(model, feeds):
    """Whether ORT's contrib kernel refuses the model, at load or at run."""
    try:
        builtin_session(model).run(None, feeds)
    except Exception:  # noqa: BLE001 - ORT's Fail, InvalidArgument, RuntimeException...
        return True
    return False


def scales_fed_model(scales_dims, elem_type=TensorProto.INT4):
    """GatherBlockQuantized over int4 data [6, 32] (block 16: scales [6, 2]) with the scales a graph input."""
    data = helper.make_tensor("data", elem_type, [6, 32], [i % 8 for i in range(6 * 32)])
    node = helper.make_node("GatherBlockQuantized", ["data", "indices", "scales"], ["output"], domain="com.microsoft",
                            gather_axis=0, quantize_axis=1, block_size=16, bits=4)
    graph = helper.make_graph([node], "gbq", [helper.make_tensor_value_info("indices", TensorProto.INT64, [2]),
                                              helper.make_tensor_value_info("scales", TensorProto.FLOAT, scales_dims)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)], [data])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


def test_scales_and_zero_points_ort_refuses_are_left_with_the_reason():
    """Scales of the wrong shape off the quantize axis, zero points of another shape than the scales, and
    int4 data with uint4 zero points: ORT refuses each (at load or at run); the rewrite, asked for every
    op, used to rewrite them into a model that runs (rows past the scales' end read as zeros). Each is
    left, with the reason, as the rewriter leaves every node ORT's kernel refuses (the model keeps ORT's
    own refusal)."""
    from gathermultiaxis.graphs import GATHER_OPS, OPT_IN_OPS

    rng = np.random.default_rng(3)
    feeds = {"indices": np.array([5, 0])}
    cases = {}
    data, scales, zero_points, attributes, _ = nibble_case(rng, TensorProto.INT4, 16, True, np.float32, [6, 32], 0, 1)
    cases["scales [5, 2]"] = (gbq_model(data, scales[:5], None, (2,), TensorProto.INT64, **attributes), "scales of shape")
    cases["scales [6, 2] with zero points [5, 2]"] = (gbq_model(
        data, scales, helper.make_tensor("zero_points", TensorProto.INT4, [5, 2], [1] * 10), (2,), TensorProto.INT64,
        **attributes), "zero points of shape")
    cases["int4 data, uint4 zero points"] = (gbq_model(
        data, scales, helper.make_tensor("zero_points", TensorProto.UINT4, [6, 2], [1] * 12), (2,), TensorProto.INT64,
        **attributes), "zero points of type UINT4")
    data, scales, _, attributes, _ = packed_case(rng, 4, 16, False, np.float32, (7,))
    cases["uint8 data [7, n], scales [8, b]"] = (gbq_model(
        data, np.concatenate([scales, scales[:1]]), None, (2,), TensorProto.INT64, **attributes), "scales of shape")
    for name, (model, reason) in cases.items():
        assert ort_refuses(model, feeds), name
        rewritten, report = rewrite_model(model, GATHER_OPS + OPT_IN_OPS)
        [row] = report.outcomes
        assert not row.rewritten and reason in row.reason, (name, row.reason)
        assert [node.op_type for node in rewritten.graph.node] == ["GatherBlockQuantized"], name
        assert ort_refuses(rewritten, feeds), name


def test_scales_fed_as_an_input_are_rewritten_only_with_a_static_shape():
    """Scales as a graph input: with symbolic dims the rewrite cannot check them, and ORT's kernel refuses
    a wrong shape on the run (the rewrite used to return numbers: zeros past the end, extra blocks
    ignored), so the node stays, with the reason. With static dims, ORT checks the feed against them."""
    from gathermultiaxis.graphs import GATHER_OPS, OPT_IN_OPS

    feeds = {"indices": np.array([5, 0])}
    symbolic = scales_fed_model(["rows", "blocks"])
    for wrong in (np.ones((5, 2), np.float32), np.ones((6, 3), np.float32)):
        assert ort_refuses(symbolic, {**feeds, "scales": wrong})
    rewritten, report = rewrite_model(symbolic, GATHER_OPS + OPT_IN_OPS)
    assert report.rewritten == 0 and "not known statically" in report.outcomes[0].reason
    static = scales_fed_model([6, 2])
    rewritten, report = rewrite_model(static, OPS)
    assert report.rewritten == 1
    scales = np.random.default_rng(4).standard_normal((6, 2)).astype(np.float32)
    assert_bit_identical(custom_session(rewritten).run(None, {**feeds, "scales": scales})[0],
                         builtin_session(static).run(None, {**feeds, "scales": scales})[0])
    for wrong in (np.ones((5, 2), np.float32), np.ones((6, 3), np.float32)):
        with pytest.raises(Exception, match="[Ii]nvalid dimensions|INVALID_ARGUMENT"):
            custom_session(rewritten).run(None, {**feeds, "scales": wrong})
        lowered, _ = lower_model(rewritten)
        with pytest.raises(Exception, match="[Ii]nvalid dimensions|INVALID_ARGUMENT"):
            builtin_session(lowered).run(None, {**feeds, "scales": wrong})
