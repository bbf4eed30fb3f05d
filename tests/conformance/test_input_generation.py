"""How ``check`` sizes the symbolic dims of generated inputs (issue 17, item 6): a numeric dim_param is
that size, and each dim name is sized on its own, one name varied at a time while the original model
refuses. The decoder exports this is for are in tests/exports/test_real_exports.py (slow)."""

import numpy as np
import onnx
from onnx import TensorProto, helper

from gathermultiaxis.conformance.input_generation import MAX_SIZE_ATTEMPTS, generated_inputs, symbolic_dim_names, symbolic_size_attempts
from gathermultiaxis.cli import main


def _value(name, elem_type, dims):
    return helper.make_tensor_value_info(name, elem_type, dims)


def _cache_like_model() -> onnx.ModelProto:
    """``Concat(past[p], new[s]) + mask[t]`` (t must be p + s, as an attention mask covers the past and the
    new tokens) and an embedding ``Gather(table, ids[s])``; the head count is the dim_param "2"."""
    nodes = [helper.make_node("Concat", ["past", "new"], ["cat"], axis=1),
             helper.make_node("Add", ["cat", "mask"], ["y"]),
             helper.make_node("Gather", ["table", "ids"], ["z"], axis=0)]
    graph = helper.make_graph(
        nodes, "cache_like",
        [_value("past", TensorProto.FLOAT, ["2", "p"]), _value("new", TensorProto.FLOAT, ["2", "s"]),
         _value("mask", TensorProto.FLOAT, ["2", "t"]), _value("ids", TensorProto.INT64, ["s"])],
        [_value("y", TensorProto.FLOAT, None), _value("z", TensorProto.FLOAT, None)],
        [helper.make_tensor("table", TensorProto.FLOAT, [10], np.arange(10, dtype=np.float32))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_numeric_dim_param_is_that_size():
    feeds = generated_inputs(_cache_like_model(), 0, 3)
    assert feeds["past"].shape == (2, 3) and feeds["mask"].shape == (2, 3)
    assert symbolic_dim_names(_cache_like_model(), {}) == ["p", "s", "t"]


def test_one_name_varied_at_a_time():
    attempts = symbolic_size_attempts(_cache_like_model(), {})
    assert attempts[0] == (3, {"p": 3, "s": 3, "t": 3})
    # the second attempt varies p alone, first to the sum of two others' sizes (a total length)
    assert attempts[1] == (3, {"p": 6, "s": 3, "t": 3})
    assert all(sum(size != 3 for size in sizes.values()) == 1 for _, sizes in attempts[1:-5])
    assert (3, {"p": 3, "s": 3, "t": 6}) in attempts
    assert [sizes for _, sizes in attempts[-5:]] == [dict.fromkeys("pst", n) for n in (1, 8, 64, 512, 4096)]
    assert len(attempts) <= MAX_SIZE_ATTEMPTS


def test_static_model_has_one_attempt():
    model = _cache_like_model()
    for value in model.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            dim.dim_value = 2
    assert symbolic_size_attempts(model, {}) == [(3, {})]


def test_check_passes_where_every_name_alike_was_refused(tmp_path, capsys):
    """Every name at one size (the search before) never satisfies t = p + s: the case was "not compared"."""
    model = _cache_like_model()
    for size in (3, 1, 8):
        feeds = generated_inputs(model, 0, size)
        assert feeds["mask"].shape[1] != feeds["past"].shape[1] + feeds["new"].shape[1]
    path = tmp_path / "cache_like.onnx"
    onnx.save(model, str(path))
    assert main(["check", str(path)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("1 passed, 0 failed, 0 not compared")


def _shared_dims_model() -> onnx.ModelProto:
    """``Concat(input_ids[batch, seq], attention_mask[batch, seq], axis=0)`` then a Gather along ``seq``: the
    mask must have the ids' ``seq`` (as a GPT-2 export's mask must match its ids)."""
    nodes = [helper.make_node("Concat", ["input_ids", "attention_mask"], ["both"], axis=0),
             helper.make_node("Gather", ["both", "last"], ["y"], axis=1)]
    graph = helper.make_graph(
        nodes, "shared_dims",
        [_value("input_ids", TensorProto.INT64, ["batch", "seq"]),
         _value("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [_value("y", TensorProto.INT64, None)],
        [helper.make_tensor("last", TensorProto.INT64, [1], [-1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_given_shape_sizes_every_input_naming_its_dims():
    """``--input-shapes input_ids:[2,5]`` fixes batch = 2 and seq = 5 for the generated attention_mask too:
    the first attempt already fits, and no attempt varies a fixed name."""
    model, given = _shared_dims_model(), {"input_ids": (2, 5)}
    assert symbolic_dim_names(model, given) == []
    assert symbolic_size_attempts(model, given) == [(3, {})]
    feeds = generated_inputs(model, 0, 3, given)
    assert feeds["input_ids"].shape == feeds["attention_mask"].shape == (2, 5)
    # two inputs giving one name two sizes fix nothing: the original model judges the generated attempts
    assert symbolic_dim_names(_cache_like_model(), {"past": (2, 4), "new": (2, 4), "mask": (2, 9)}) == []
    conflicting = {"input_ids": (2, 5), "attention_mask": (3, 5)}
    assert generated_inputs(model, 0, 3, conflicting)["attention_mask"].shape == (3, 5)


def test_check_says_which_inputs_it_generated_with_their_shapes(tmp_path, capsys):
    """``check -v`` names each input's shape, where it came from and its declared shape; a case whose inputs
    ORT refuses says the same in its hint."""
    path = tmp_path / "shared_dims.onnx"
    onnx.save(_shared_dims_model(), str(path))
    assert main(["check", str(path), "--input-shapes", "input_ids:[2,5]", "-v", "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert ("inputs: input_ids int64[2, 5] (generated at the --input-shapes shape; declared [batch, seq]), "
            "attention_mask int64[2, 5] (generated; declared [batch, seq])") in out
    static = _shared_dims_model()
    for value in static.graph.input:
        value.type.tensor_type.shape.dim[1].dim_value = 4  # seq fixed at 4: [2, 5] is refused
    onnx.save(static, str(path))
    assert main(["check", str(path), "--input-shapes", "input_ids:[2,5]", "-j", "1"]) == 3
    out = capsys.readouterr().out
    assert "not compared" in out and "inputs: input_ids int64[2, 5] (generated at the --input-shapes shape; " \
                                      "declared [batch, 4]), attention_mask int64[2, 4]" in out
