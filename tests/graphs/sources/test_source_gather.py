"""graphs.sources.source_gather: a record's entry of RULES, and the opt-in rule handing over the gather emitter."""

from onnx import helper

from gathermultiaxis.graphs.ranks.tensor_info import TensorInfo
from gathermultiaxis.graphs.sources.source_gather import OptInRule, Rewrite, SourceGather


def test_rule_of_a_record():
    def align(node, data, indices):
        raise AssertionError("not called")

    def emitter(node, infos, builder, emit_gather):
        return emit_gather(node, infos["x"], infos["i"], builder)

    opt_in = OptInRule("com.example", emitter)
    assert SourceGather("", "G", Rewrite.DEFAULT, align=align).rule is align
    assert SourceGather("com.example", "G", Rewrite.OPT_IN, align=align, opt_in=opt_in).rule is opt_in
    assert SourceGather("com.example", "G", Rewrite.NEVER, why_not="inside").rule is None
    seen = []
    node = helper.make_node("G", ["x", "i"], ["y"])
    info = TensorInfo(1, (2,))
    result = opt_in.emit(node, {"x": info, "i": info}, None, lambda *args: seen.append(args) or info)
    assert result == info and seen == [(node, info, info, None)]
