"""The written model's load check narrowed to what a pass changed (graphs.load_check): on real passes
its verdict is the whole model's, it holds each distinct replacement once, and every way of breaking
the written model that ORT refuses is refused by it too (or it declines, and the whole model is loaded).
ORT is the judge throughout: each broken model is first shown to be refused whole."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from gathermultiaxis.bench.bigmodel import build_big_graph
from gathermultiaxis.examples import build_example_model
from gathermultiaxis.graphs import lower_model, rewrite_model
from gathermultiaxis.graphs.load_check import changed_part
from gathermultiaxis import session_options
from gathermultiaxis.graphs.modelfile import ort_load_error


def refusal(model: onnx.ModelProto) -> str:
    return ort_load_error(model.SerializeToString(), session_options=session_options)


def loop_model() -> onnx.ModelProto:
    """A Loop whose body gathers a row of an outer table, beside a gather of the main graph."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Gather", ["table", "i"], ["row"], name="in_loop", axis=0),
         helper.make_node("Add", ["carried", "row"], ["carried_out"])],
        "body", [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
                 helper.make_tensor_value_info("carried", T.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("carried_out", T.FLOAT, [3])])
    nodes = [helper.make_node("Loop", ["trips", "", "start"], ["looped"], name="loop", body=body),
             helper.make_node("Gather", ["table", "ids"], ["rows"], name="main_gather", axis=0)]
    inits = [numpy_helper.from_array(np.arange(30, dtype=np.float32).reshape(10, 3), "table"),
             numpy_helper.from_array(np.array(4, np.int64), "trips"), numpy_helper.from_array(np.zeros(3, np.float32), "start")]
    graph = helper.make_graph(nodes, "loop_model", [helper.make_tensor_value_info("ids", T.INT64, ["n"])],
                              [helper.make_tensor_value_info("looped", T.FLOAT, [3]),
                               helper.make_tensor_value_info("rows", T.FLOAT, ["n", 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def models():
    example = build_example_model()
    rewritten_example = rewrite_model(example)[0]
    return {"example": example, "chain": build_big_graph(40), "loop": loop_model(),
            "example rewritten (to lower)": rewritten_example}


@pytest.mark.parametrize("name", list(models()))
def test_the_part_loads_where_the_whole_written_model_loads(name):
    model = models()[name]
    written = lower_model(model)[0] if "to lower" in name else rewrite_model(model)[0]
    assert refusal(model) == "" and refusal(written) == ""
    part = changed_part(model, written)
    assert part is not None, "the changes are main-graph nodes only: there is a part"
    assert refusal(part) == ""
    assert 0 < len(part.graph.node) < len(written.graph.node) or name == "loop"


def test_each_distinct_replacement_is_loaded_once():
    model = build_big_graph(40)
    written, report = rewrite_model(model)
    part = changed_part(model, written, report.main_graph_types)
    per_gather = (len(written.graph.node) - len(model.graph.node)) // 40 + 1
    assert report.rewritten == 40
    assert [node.op_type for node in part.graph.node].count("GatherMultiaxis") == 1
    assert len(part.graph.node) == per_gather + 1  # and the Add that reads the replaced output
    assert changed_part(model, written) == part  # the types it infers are the rewrite's


def test_a_changed_subgraph_is_loaded_with_its_node():
    model = loop_model()
    written = rewrite_model(model)[0]
    part = changed_part(model, written)
    assert [node.op_type for node in part.graph.node if node.op_type == "Loop"] == ["Loop"]
    assert "table" in {init.name for init in part.graph.initializer}  # read inside the body: small, kept as values


def test_nothing_narrower_when_more_than_main_graph_nodes_changed():
    model = build_big_graph(3)
    written = rewrite_model(model)[0]
    for change in (lambda m: m.graph.input[0].type.tensor_type.shape.dim[0].__setattr__("dim_param", "m"),
                   lambda m: m.graph.initializer[1].float_data.append(0.0),
                   lambda m: m.graph.output[0].__setattr__("doc_string", "changed"),
                   lambda m: m.functions.add(name="f", domain="local"),
                   lambda m: m.opset_import[0].__setattr__("version", 18)):
        changed = onnx.ModelProto()
        changed.CopyFrom(written)
        change(changed)
        assert changed_part(model, changed) is None
    assert changed_part(model, model) is None  # nothing new: nothing to load


def _first(model, op_type):
    return next(node for node in model.graph.node if node.op_type == op_type)


def _indices_of_float_type(m):
    _first(m, "GatherMultiaxis").input[1] = "one"


def _axes_out_of_range(m):
    unsqueeze = _first(m, "Unsqueeze")
    constant = next(node for node in m.graph.node if node.output[0] == unsqueeze.input[1])
    constant.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array([5], np.int64), ""))


def _output_of_another_type(m):
    gather = _first(m, "GatherMultiaxis")
    output, gather.output[0] = gather.output[0], "widened_for_the_test"
    m.graph.node.append(helper.make_node("Cast", ["widened_for_the_test"], [output], to=T.DOUBLE))  # ORT sorts
    next(value for value in m.graph.value_info if value.name == output).type.tensor_type.elem_type = T.DOUBLE


def _reads_what_nothing_makes(m):
    _first(m, "GatherMultiaxis").input[0] = "nowhere"


def _output_no_longer_made(m):
    _first(m, "GatherMultiaxis").output[0] = "renamed_for_the_test"


def _unchanged_node_broken(m):
    _first(m, "Add").input[1] = "reversed"  # int64 added to float


def _writes_an_existing_name(m):
    _first(m, "Unsqueeze").output[0] = "sum1"


def _made_twice(m):
    gather = _first(m, "GatherMultiaxis")
    m.graph.node.append(helper.make_node("Identity", [gather.input[0]], [gather.output[0]], name="again"))


def _value_info_of_another_type(m):
    output = _first(m, "GatherMultiaxis").output[0]
    next(value for value in m.graph.value_info if value.name == output).type.tensor_type.elem_type = T.INT32


def _value_info_of_another_shape(m):
    output = _first(m, "GatherMultiaxis").output[0]
    next(value for value in m.graph.value_info if value.name == output).type.tensor_type.shape.dim[1].dim_value = 5


BREAKAGES = [_indices_of_float_type, _axes_out_of_range, _output_of_another_type, _reads_what_nothing_makes,
             _output_no_longer_made, _unchanged_node_broken, _writes_an_existing_name, _made_twice,
             _value_info_of_another_type,
             _value_info_of_another_shape]


def verdicts(breakage) -> tuple[str, str | None]:
    """ORT's refusal of the broken written model, and of its part (None: no part, the whole is loaded)."""
    model = build_big_graph(3)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2  # static sizes: shape clashes show
    written, report = rewrite_model(model)
    broken = onnx.ModelProto()
    broken.CopyFrom(written)
    breakage(broken)
    part = changed_part(model, broken, report.main_graph_types)
    return refusal(broken), None if part is None else refusal(part)


@pytest.mark.parametrize("breakage", BREAKAGES, ids=lambda f: f.__name__.strip("_"))
def test_the_part_and_the_whole_written_model_get_the_same_verdict(breakage):
    whole, part = verdicts(breakage)
    assert part is None or bool(part) == bool(whole), f"whole: {whole!r}; part: {part!r}"


def test_the_breakages_are_ones_ort_refuses():
    """The cases above are not vacuous: ORT refuses the whole written model for each of them."""
    assert [f.__name__ for f in BREAKAGES if not verdicts(f)[0]] == []
