"""gathermultiaxis.InferenceSession loading models: external data checked as ONNX Runtime checks it (every
entry is given to plain ORT too, and both must agree), never read outside the model's folder, never
blocking on a FIFO; the weights ORT reads are left to ORT, which maps them from the model's folder; a
GatherMultiaxis node inside a model-local function raises in its own run."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnxruntime.capi.onnxruntime_pybind11_state import Fail
from support import OPSET, make_model

import gathermultiaxis
from gathermultiaxis.ops.runtime.registration import ERRORS
from gathermultiaxis.ops.runtime.session import EXTERNAL_DATA_FOLDER

CONTRIB = helper.make_opsetid("ai.onnx.contrib", 1)
TABLE = np.arange(12, dtype=np.float32).reshape(6, 2)
NEXT = -np.arange(12, dtype=np.float32).reshape(6, 2)  # the bytes after the table in w.bin
IDS = np.array([0, 5, -1, 2])


def external(name, dims, entries, data_type=TensorProto.FLOAT):
    tensor = TensorProto(name=name, data_type=data_type, dims=dims)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in entries:
        tensor.external_data.add(key=key, value=value)
    return tensor


def model_files(folder, entries):
    """``folder``/original.onnx (a builtin Gather) and ``folder``/rewritten.onnx (GatherMultiaxis) over
    the table that ``entries`` describe."""
    table = external("table", [6, 2], entries)
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    original = make_model([helper.make_node("Gather", ["table", "ids"], ["out"], axis=0)],
                          [helper.make_tensor_value_info("ids", TensorProto.INT64, [None])], [out], [table])
    rewritten = make_model(
        [helper.make_node("GatherMultiaxis", ["table", "ids", "axes"], ["out"], domain="ai.onnx.contrib", mode="error")],
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [None, 1])], [out],
        [table, helper.make_tensor("axes", TensorProto.INT64, [1], [0])], extra_opsets=[CONTRIB])
    onnx.save(original, str(folder / "original.onnx"))
    onnx.save(rewritten, str(folder / "rewritten.onnx"))
    return folder / "original.onnx", folder / "rewritten.onnx"


@pytest.fixture
def model_folder(tmp_path):
    """tmp_path/m, the model's folder, and around it the files the entries point at."""
    folder = tmp_path / "m"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key.bin").write_bytes(TABLE.tobytes())
    (folder / "w.bin").write_bytes(TABLE.tobytes() + NEXT.tobytes())
    (folder / "sub" / "w.bin").write_bytes(TABLE.tobytes())
    (folder / "dir.bin").mkdir()
    os.symlink(tmp_path / "secret" / "key.bin", folder / "link.bin")
    os.symlink(folder / "w.bin", folder / "inlink.bin")
    os.symlink("sub", folder / "sublink")
    return folder


def outcome(make_session, feeds):
    """("ok", output) or ("refused", message) of creating a session and running it once."""
    try:
        return "ok", make_session().run(None, feeds)[0]
    except Exception as error:  # noqa: BLE001 - ORT raises its own types
        return "refused", f"{type(error).__name__}: {error}"


def plain_ort(path):
    return outcome(lambda: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]), {"ids": IDS})


def ours(path, **kwargs):
    return outcome(lambda: gathermultiaxis.InferenceSession(str(path), providers=["CPUExecutionProvider"], **kwargs, run_builtin_gathers=False),
                   {"ids": IDS[:, None]})


# (entries of the table, what ORT 1.32 does with them): the expectation guards against a grid that
# both sides pass for a reason other than the one named.
ENTRIES = {
    "plain": ([("location", "w.bin")], "ok"),
    "length": ([("location", "w.bin"), ("length", "48")], "ok"),
    "length 0 (ORT: no length)": ([("location", "w.bin"), ("length", "0")], "ok"),
    "checksum": ([("location", "w.bin"), ("checksum", "anything")], "ok"),
    "offset of the next tensor": ([("location", "w.bin"), ("offset", "48")], "ok"),
    "offset with zeros in front": ([("location", "w.bin"), ("offset", "000")], "ok"),
    "./": ([("location", "./w.bin")], "ok"),
    "in and out of a subfolder": ([("location", "sub/../w.bin")], "ok"),
    "out and back in": ([("location", "../m/w.bin")], "ok"),
    "link inside": ([("location", "inlink.bin")], "ok"),
    "linked subfolder": ([("location", "sublink/w.bin")], "ok"),
    "through a linked subfolder and back": ([("location", "sublink/../w.bin")], "ok"),
    "../secret": ([("location", "../secret/key.bin")], "refused"),
    "../../secret": ([("location", "../../secret/key.bin")], "refused"),
    "absolute, outside": ([("location", "{root}/secret/key.bin")], "refused"),
    "absolute, inside": ([("location", "{root}/m/w.bin")], "refused"),
    "/dev/zero": ([("location", "/dev/zero")], "refused"),
    "link pointing outside": ([("location", "link.bin")], "refused"),
    "missing file": ([("location", "nope.bin")], "refused"),
    "a folder": ([("location", "dir.bin")], "refused"),
    "the model's folder": ([("location", ".")], "refused"),
    "no location": ([("offset", "0")], "refused"),
    "empty location": ([("location", "")], "refused"),
    "two locations": ([("location", "w.bin"), ("location", "sub/w.bin")], "refused"),
    "unknown key": ([("location", "w.bin"), ("basepath", "x")], "refused"),
    "key in capitals": ([("Location", "w.bin")], "refused"),
    "length shorter than dims": ([("location", "w.bin"), ("length", "40")], "refused"),
    "length longer than dims": ([("location", "w.bin"), ("length", "52")], "refused"),
    "offset past the end": ([("location", "w.bin"), ("offset", "56")], "refused"),
    "negative offset": ([("location", "w.bin"), ("offset", "-4")], "refused"),
    "last offset wins": ([("location", "w.bin"), ("offset", "0"), ("offset", "56")], "refused"),
    "offset not a number": ([("location", "w.bin"), ("offset", "abc")], "refused"),
    "offset +0": ([("location", "w.bin"), ("offset", "+0")], "refused"),
    "offset with a space": ([("location", "w.bin"), ("offset", " 0")], "refused"),
    "offset 0.0": ([("location", "w.bin"), ("offset", "0.0")], "refused"),
    "empty offset": ([("location", "w.bin"), ("offset", "")], "refused"),
    "offset beyond int64": ([("location", "w.bin"), ("offset", str(2**64 - 1))], "refused"),
    "negative length": ([("location", "w.bin"), ("length", "-1")], "refused"),
    "length not a number": ([("location", "w.bin"), ("length", "x")], "refused"),
}


@pytest.mark.parametrize("bind", [True, False], ids=["bound", "not bound"])
@pytest.mark.parametrize("case", list(ENTRIES))
def test_external_data_entries_as_plain_ort(model_folder, case, bind):
    """Bound, the session checks the table's entry itself (ORT never sees it); not bound, ORT does."""
    entries, expected = ENTRIES[case]
    entries = [(key, value.format(root=model_folder.parent)) for key, value in entries]
    original, rewritten = model_files(model_folder, entries)
    theirs, mine = plain_ort(original), ours(rewritten, bind_constants=bind)
    assert theirs[0] == expected, theirs
    assert mine[0] == theirs[0], (mine, theirs)
    if expected == "ok":
        np.testing.assert_array_equal(mine[1].reshape(theirs[1].shape), theirs[1])
    else:  # not bound, the message is ORT's own (which does not always name the tensor)
        assert mine[1].startswith("Fail") and ("'table'" in mine[1] or not bind), mine[1]


def test_external_data_outside_the_folder_is_refused_as_ort_refuses_it(model_folder):
    """Issue 18 item 1: ../../ (here ../), an absolute path, a link out of the folder: the session never
    maps the secret; plain ORT refuses the same files."""
    for location, ort_says in (("../secret/key.bin", "escapes model directory"),
                               (str(model_folder.parent / "secret" / "key.bin"), "Absolute path not allowed"),
                               ("link.bin", "escapes model directory")):
        original, rewritten = model_files(model_folder, [("location", location)])
        theirs = plain_ort(original)
        assert theirs[0] == "refused" and ort_says in theirs[1], theirs
        with pytest.raises(Fail, match="external data of 'table' points outside the model's folder"):
            gathermultiaxis.InferenceSession(str(rewritten), run_builtin_gathers=False)
        with pytest.raises(Fail, match=ort_says):  # not bound: ORT's own check
            gathermultiaxis.InferenceSession(str(rewritten), bind_constants=False, run_builtin_gathers=False)


def test_malformed_entries_name_the_tensor_and_the_problem(model_folder):
    """Issue 18 items 7 and 19: ORT's exception type, a message naming the table and what is wrong."""
    for entries, message in (([("offset", "0")], "external data of 'table': no location"),
                             ([("location", "dir.bin")], "'dir.bin' of 'table' is a folder, not a regular file"),
                             ([("location", "w.bin"), ("offset", "abc")], "offset 'abc' is not an integer"),
                             ([("location", "w.bin"), ("length", "40")],
                              r"length 40 disagrees with its dims \[6, 2\], which need 48 bytes"),
                             ([("location", "w.bin"), ("offset", "56")],
                              r"\(offset 56, length 48\) runs past the end of 'w.bin' \(96 bytes\)")):
        _, rewritten = model_files(model_folder, entries)
        with pytest.raises(Fail, match=message):
            gathermultiaxis.InferenceSession(str(rewritten), run_builtin_gathers=False)


FIFO_CHILD = """
import os, sys, numpy as np, onnx, onnxruntime as ort
sys.path[:0] = [{tests!r}, os.path.dirname(os.path.dirname({tests!r}))]  # this file's folder, and tests/ (support.py)
from pathlib import Path
from test_session_files import model_files
import gathermultiaxis
folder = Path({folder!r})
os.mkfifo(folder / "fifo.bin")
original, rewritten = model_files(folder, [("location", "fifo.bin")])
for name, make in (("ours", lambda: gathermultiaxis.InferenceSession(str(rewritten), run_builtin_gathers=False)),
                   ("ours, not bound", lambda: gathermultiaxis.InferenceSession(str(rewritten), bind_constants=False, run_builtin_gathers=False)),
                   ("ort", lambda: ort.InferenceSession(str(original)))):
    try:
        make()
        print(name, "loaded")
    except Exception as error:
        print(name, "refused:", " ".join(str(error).split())[-200:])
"""


def test_a_fifo_as_external_data_is_refused_at_once(tmp_path):
    """Issue 18 item 2: opening a FIFO for reading blocks until a writer comes; the session refuses it
    without opening it, as ORT does. In a child process: a hang must fail the test, not the run."""
    code = FIFO_CHILD.format(tests=os.path.dirname(os.path.abspath(__file__)), folder=str(tmp_path))
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = child.stdout.splitlines()
    assert child.returncode == 0 and len(lines) == 3, child.stdout + child.stderr[-3000:]
    assert lines[0].startswith("ours refused:") and "'fifo.bin' of 'table' is a FIFO, not a regular file" in lines[0]
    assert lines[1].startswith("ours, not bound refused:") and "require a regular file" in lines[1], lines[1]
    assert lines[2].startswith("ort refused:") and "require a regular file" in lines[2], lines[2]


# -- weights ORT reads itself ---------------------------------------------------------------------

def weight_model(folder, rows):
    """A bound table and, not a table, a weight of ``rows`` x 256 float32 that only a Slice with run-time
    bounds reads (ORT folds nothing), both in folder/weights.bin; the weight's first rows hold 0, 1, ..."""
    table_bytes = TABLE.tobytes()
    weight_size = rows * 256 * 4
    with open(folder / "weights.bin", "wb") as file:
        file.write(np.arange(4 * 256, dtype=np.float32).tobytes())
        file.truncate(weight_size)  # the rest: a hole (zeros, no disk)
        file.seek(weight_size)
        file.write(table_bytes)
    weight = external("weight", [rows, 256], [("location", "weights.bin"), ("length", str(weight_size))])
    table = external("table", [6, 2], [("location", "weights.bin"), ("offset", str(weight_size))])
    value = helper.make_tensor_value_info
    nodes = [helper.make_node("GatherMultiaxis", ["table", "ids", "axes"], ["rows"], domain="ai.onnx.contrib",
                              mode="error"),
             helper.make_node("Slice", ["weight", "starts", "ends"], ["head"]),
             helper.make_node("ReduceSum", ["head", "one"], ["sums"], keepdims=0),
             helper.make_node("Unsqueeze", ["sums", "one"], ["column"]),
             helper.make_node("Add", ["rows", "column"], ["out"])]
    model = make_model(nodes, [value("ids", TensorProto.INT64, [None, 1]), value("starts", TensorProto.INT64, [1]),
                               value("ends", TensorProto.INT64, [1])],
                       [value("out", TensorProto.FLOAT, None)],
                       [table, weight, helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
                        helper.make_tensor("one", TensorProto.INT64, [1], [1])], extra_opsets=[CONTRIB])
    onnx.save(model, str(folder / "model.onnx"))
    feeds = {"ids": np.array([[5], [0]]), "starts": np.array([0]), "ends": np.array([2])}
    head = np.arange(2 * 256, dtype=np.float32).reshape(2, 256)
    expected = TABLE[[5, 0]] + head.sum(axis=1, dtype=np.float32)[:, None]
    return folder / "model.onnx", feeds, expected


def test_weights_in_external_data_are_left_to_ort(tmp_path, monkeypatch):
    """Issue 18 item 11, at a small scale: a 4 MiB external weight is not copied into the model ORT gets."""
    path, feeds, expected = weight_model(tmp_path, 4096)
    handed = []
    original_init = ort.InferenceSession.__init__

    def spy(self, path_or_bytes, *args, **kwargs):
        handed.append(len(path_or_bytes))
        original_init(self, path_or_bytes, *args, **kwargs)

    monkeypatch.setattr(ort.InferenceSession, "__init__", spy)
    sess = gathermultiaxis.InferenceSession(str(path), run_builtin_gathers=False)
    assert sess.bound_tables == 1 and handed and handed[0] < 16384, handed
    np.testing.assert_array_equal(sess.run(None, feeds)[0], expected)


def test_options_of_the_caller_get_their_external_data_folder_back(tmp_path):
    """Options from session_options() are used as they are: the folder entry the session sets on them
    while ORT loads is taken back (ORT's default is ""), and one the caller set is honoured, as ORT does."""
    (tmp_path / "a").mkdir()
    path, feeds, expected = weight_model(tmp_path / "a", 64)
    options = gathermultiaxis.session_options(ort.SessionOptions())
    sess = gathermultiaxis.InferenceSession(str(path), options, run_builtin_gathers=False)
    np.testing.assert_array_equal(sess.run(None, feeds)[0], expected)
    assert options.get_session_config_entry(EXTERNAL_DATA_FOLDER) == ""
    # a model given as bytes: ORT and the session find its external data through the caller's entry
    options = ort.SessionOptions()
    options.add_session_config_entry(EXTERNAL_DATA_FOLDER, str(tmp_path / "a"))
    model_bytes = path.read_bytes()
    sess = gathermultiaxis.InferenceSession(model_bytes, options, run_builtin_gathers=False)
    assert sess.bound_tables == 1
    np.testing.assert_array_equal(sess.run(None, feeds)[0], expected)
    plain = ort.InferenceSession(model_bytes, gathermultiaxis.session_options(options))
    np.testing.assert_array_equal(plain.run(None, feeds)[0], expected)


@pytest.mark.slow
def test_a_model_over_2_gib_opens_and_runs(tmp_path):
    """Issue 18 item 11: 2.2 GiB of external data (a sparse file: no disk, and only the rows read are
    mapped in). The serialized model stays small; a session that copied the weight into it would fail
    ("Failed to serialize proto") or take minutes."""
    rows = (2 * 2**30 + 200 * 2**20) // (256 * 4)
    path, feeds, expected = weight_model(tmp_path, rows)
    sess = gathermultiaxis.InferenceSession(str(path), run_builtin_gathers=False)
    np.testing.assert_array_equal(sess.run(None, feeds)[0], expected)
    assert os.stat(tmp_path / "weights.bin").st_size > 2**31


# -- GatherMultiaxis inside model-local functions -------------------------------------------------

def function_model(where):
    """out = Pick(data, ids) where the local function Pick holds GatherMultiaxis (mode through an
    attribute reference with a default); ``where``: "main" (called from the main graph), "nested"
    (Pick called by another function), "if" (called inside an If branch); data is a graph input."""
    mode = helper.make_attribute_ref("mode", onnx.AttributeProto.STRING)
    gather = helper.make_node("GatherMultiaxis", ["data", "ids", "axes"], ["out"], domain="ai.onnx.contrib")
    gather.attribute.append(mode)
    axes = helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("v", TensorProto.INT64, [1], [0]))
    pick = helper.make_function("local", "Pick", ["data", "ids"], ["out"], [axes, gather],
                                [helper.make_opsetid("", OPSET), CONTRIB],
                                attribute_protos=[helper.make_attribute("mode", "error")])
    functions = [pick]
    call = helper.make_node("Pick", ["data", "ids"], ["out"], domain="local")
    if where == "nested":
        outer = helper.make_function("local", "Outer", ["data", "ids"], ["out"],
                                     [helper.make_node("Pick", ["data", "ids"], ["out"], domain="local")],
                                     [helper.make_opsetid("local", 1)])
        functions.append(outer)
        call = helper.make_node("Outer", ["data", "ids"], ["out"], domain="local")
    nodes = [call]
    if where == "if":
        branch = helper.make_graph([helper.make_node("Pick", ["data", "ids"], ["picked"], domain="local")], "then", [],
                                   [helper.make_tensor_value_info("picked", TensorProto.FLOAT, None)])
        nodes = [helper.make_node("Constant", [], ["yes"], value=helper.make_tensor("y", TensorProto.BOOL, [], [True])),
                 helper.make_node("If", ["yes"], ["out"], then_branch=branch, else_branch=branch)]
    value = helper.make_tensor_value_info
    model = make_model(nodes, [value("data", TensorProto.FLOAT, [6, 2]), value("ids", TensorProto.INT64, [None, 1])],
                       [value("out", TensorProto.FLOAT, None)],
                       extra_opsets=[CONTRIB, helper.make_opsetid("local", 1)])
    model.functions.extend(functions)
    return model


def plain_model():
    value = helper.make_tensor_value_info
    return make_model(
        [helper.make_node("GatherMultiaxis", ["data", "ids", "axes"], ["out"], domain="ai.onnx.contrib", mode="error")],
        [value("data", TensorProto.FLOAT, None), value("ids", TensorProto.INT64, None),
         value("axes", TensorProto.INT64, None)], [value("out", TensorProto.FLOAT, None)], extra_opsets=[CONTRIB])


@pytest.mark.parametrize("where", ["main", "nested", "if"])
def test_errors_inside_functions_are_raised_by_their_own_run(where):
    """Issue 18 item 6: the out-of-range index raises in the run that gave it, every time; nothing is
    left behind for another session (a plain session_options() session then runs cleanly)."""
    sess = gathermultiaxis.InferenceSession(function_model(where).SerializeToString(), run_builtin_gathers=False)
    good = {"data": TABLE, "ids": np.array([[5], [0]])}
    bad = {"data": TABLE, "ids": np.array([[6], [0]])}
    np.testing.assert_array_equal(sess.run(None, good)[0], TABLE[[5, 0]])
    for _ in range(50):
        with pytest.raises(gathermultiaxis.GatherIndexError, match="index 6"):
            sess.run(None, bad)
    np.testing.assert_array_equal(sess.run(None, good)[0], TABLE[[5, 0]])
    plain = ort.InferenceSession(plain_model().SerializeToString(), gathermultiaxis.session_options())
    feeds = {"data": TABLE, "ids": np.array([[1]]), "axes": np.array([0])}
    np.testing.assert_array_equal(plain.run(None, feeds)[0], TABLE[[1]])


def test_errors_no_run_takes_are_bounded():
    """Errors of plain nodes that no guarded run collects (ORT pool threads, sessions that never run
    through a guarded method) are kept up to a bound: only that many later runs can see a stale one."""
    for number in range(1000):
        ERRORS.record(ValueError(f"stale {number}"))
    plain = ort.InferenceSession(plain_model().SerializeToString(), gathermultiaxis.session_options())
    feeds = {"data": TABLE, "ids": np.array([[1]]), "axes": np.array([0])}
    stale = []
    for _ in range(ERRORS.MAX_UNATTRIBUTED + 5):
        try:
            plain.run(None, feeds)
        except ValueError as error:
            stale.append(str(error))
    assert len(stale) == ERRORS.MAX_UNATTRIBUTED and stale[-1].endswith("stale 999"), stale[-3:]
