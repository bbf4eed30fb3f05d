"""Cases of the GatherMultiaxis runtime that could end the process, run one per child process by
ops/test_session.py: ``python session_cases.py CASE ENTRY`` prints ``OK`` on success; an assertion or a
crash shows in the exit code. ENTRY is ``session`` (gathermultiaxis.InferenceSession, every node on the
kernel), ``default`` (the same as users create it: nodes one standard gather computes run as that gather)
or ``options`` (onnxruntime.InferenceSession with gathermultiaxis.session_options())."""

from __future__ import annotations

import os
import sys
import tempfile
import threading

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from support import assert_bit_identical, gather_multiaxis_model, make_model

CONTRIB = [helper.make_opsetid("ai.onnx.contrib", 1)]
GOOD = {"input": np.arange(6, dtype=np.float32).reshape(2, 3), "indices": np.array([[2, 0]]), "axes": np.array([1])}


def make_session(entry, model, options=None):
    import gathermultiaxis

    if entry in ("session", "default"):  # every node on the kernel / as users create it (builtin where exact)
        return gathermultiaxis.InferenceSession(model, options, providers=["CPUExecutionProvider"],
                                                run_builtin_gathers=entry == "default")
    return ort.InferenceSession(model.SerializeToString(), gathermultiaxis.session_options(options or ort.SessionOptions()),
                                providers=["CPUExecutionProvider"])


def index_error(entry):
    """What an out-of-range index raises: the op's GatherIndexError on the kernel; where the default session
    runs the node as a builtin gather, ORT's own error for it (docs/running.md)."""
    from gathermultiaxis import GatherIndexError

    return (GatherIndexError, ort.capi.onnxruntime_pybind11_state.InvalidArgument) if entry == "default" else GatherIndexError


def expect_error(call, kind, text):
    try:
        call()
    except kind as error:
        assert text in str(error), str(error)
        return error
    raise AssertionError(f"no {kind.__name__} raised")


def case_run_async(entry):
    from gathermultiaxis import GatherIndexError

    sess = make_session(entry, gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64))
    outcomes, done = {}, threading.Semaphore(0)

    def callback(results, number, err):
        outcomes[number] = (None if err else np.asarray(results[0]), err)
        done.release()

    for number in range(16):
        bad = number % 2 == 1
        indices = np.array([[100 + number, 0]]) if bad else np.array([[number % 3, 0]])
        sess.run_async(None, {**GOOD, "indices": indices}, callback, number)
    for _ in range(16):
        assert done.acquire(timeout=60), "a run_async callback never came"
    if entry == "options":  # no run token: errors reach no callback (README); the process must live on
        for number, (output, err) in sorted(outcomes.items()):
            assert not err, (number, err)
            want = np.zeros((2, 2), np.float32) if number % 2 else GOOD["input"][:, [number % 3, 0]]
            np.testing.assert_array_equal(output, want)  # a failed op's placeholder: zeros of the output's shape
        return
    for number, (output, err) in sorted(outcomes.items()):
        if number % 2:
            assert err and f"index {100 + number} at" in err and "GatherIndexError" in err, (number, err)
        else:
            assert not err, (number, err)
            np.testing.assert_array_equal(output, GOOD["input"][:, [number % 3, 0]])
    np.testing.assert_array_equal(sess.run(None, GOOD)[0], [[2, 0], [5, 3]])  # nothing left over
    expect_error(lambda: sess.run(None, {**GOOD, "indices": np.array([[7, 0]])}), GatherIndexError, "index 7 at")


def case_iobinding(entry):
    from gathermultiaxis import GatherIndexError

    sess = make_session(entry, gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64))
    binding = sess.io_binding()
    output = ort.OrtValue.ortvalue_from_numpy(np.full((2, 2), -1, np.float32))
    for name, value in GOOD.items():
        binding.bind_cpu_input(name, value)
    binding.bind_ortvalue_output("output", output)
    sess.run_with_iobinding(binding)
    np.testing.assert_array_equal(output.numpy(), [[2, 0], [5, 3]])
    binding.bind_cpu_input("indices", np.array([[0, 9]]))
    expect_error(lambda: sess.run_with_iobinding(binding), GatherIndexError, "index 9 at indices[0, 1]")
    binding.bind_cpu_input("indices", np.array([[1, 1]]))
    sess.run_with_iobinding(binding)
    np.testing.assert_array_equal(output.numpy(), [[1, 1], [4, 4]])
    values = sess.run_with_ort_values(None, {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in GOOD.items()})
    np.testing.assert_array_equal(values[0].numpy(), [[2, 0], [5, 3]])
    bad = {**GOOD, "indices": np.array([[0, -4]])}
    expect_error(lambda: sess.run_with_ort_values(None, {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in bad.items()}),
                 GatherIndexError, "index -4 at")
    case_iobinding_wrong_shape(sess)


def case_iobinding_wrong_shape(sess):
    """A pre-allocated output of the wrong shape: ORT raises for a builtin node (here a Gather on the same
    feeds), and used to end the process (std::terminate) for the PyOp node that writes it."""
    builtin = ort.InferenceSession(make_model(
        [helper.make_node("Gather", ["input", "indices"], ["output"], axis=1)],
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("indices", TensorProto.INT64, [1, None])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [2, 1, None])]).SerializeToString(),
        providers=["CPUExecutionProvider"])
    for session in (builtin, sess):
        binding = session.io_binding()
        for name in ("input", "indices"):
            binding.bind_cpu_input(name, GOOD[name])
        if session is sess:
            binding.bind_cpu_input("axes", GOOD["axes"])
        shape = (2, 2) if session is sess else (2, 1, 2)
        wrong = ort.OrtValue.ortvalue_from_numpy(np.full((2, 1, 5) if session is builtin else (3, 4), -1, np.float32))
        binding.bind_ortvalue_output("output", wrong)
        expect_error(lambda: session.run_with_iobinding(binding), RuntimeError, "shape")
        np.testing.assert_array_equal(wrong.numpy(), -1)  # the caller's buffer is left as it was
        right = np.full(shape, -1, np.float32)  # and a right one, bound by pointer, is written after that
        binding.bind_output("output", "cpu", 0, np.float32, list(shape), right.ctypes.data)
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(right.reshape(2, 2), [[2, 0], [5, 3]])
        assert binding.get_outputs()[0].data_ptr() == right.ctypes.data
        binding.bind_output("output")  # ORT allocates: any shape
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(binding.get_outputs()[0].numpy().reshape(2, 2), [[2, 0], [5, 3]])


def two_branch_model():
    """Two GatherMultiaxis nodes on parallel branches, their outputs added."""
    nodes = [helper.make_node("GatherMultiaxis", ["input", f"indices{b}", "axes"], [f"g{b}"], domain="ai.onnx.contrib",
                              mode="error") for b in (0, 1)]
    nodes.append(helper.make_node("Add", ["g0", "g1"], ["output"]))
    value = helper.make_tensor_value_info
    return make_model(nodes, [value("input", TensorProto.FLOAT, [4, 5]), value("indices0", TensorProto.INT64, [1, 3]),
                              value("indices1", TensorProto.INT64, [1, 3]), value("axes", TensorProto.INT64, [1])],
                      [value("output", TensorProto.FLOAT, [4, 3])], extra_opsets=CONTRIB)


def case_parallel(entry):
    from gathermultiaxis import GatherIndexError

    options = ort.SessionOptions()
    options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    options.inter_op_num_threads = 4
    options.intra_op_num_threads = 2
    sess = make_session(entry, two_branch_model(), options)
    data = np.arange(20, dtype=np.float32).reshape(4, 5)
    failures, counts, lock = [], {"good": 0, "bad": 0}, threading.Lock()

    def worker(thread):
        rng = np.random.default_rng(thread)
        for run in range(60):
            tag = thread * 1000 + run
            i0, i1 = rng.integers(0, 5, (1, 3)), rng.integers(0, 5, (1, 3))
            bad = rng.integers(0, 3) == 0
            if bad:
                (i0 if run % 2 else i1)[0, 1] = 10_000 + tag  # a value only this run uses
            feeds = {"input": data, "indices0": i0, "indices1": i1, "axes": np.array([1])}
            try:
                output = sess.run(None, feeds)[0]
                ok = not bad and np.array_equal(output, data[:, i0[0]] + data[:, i1[0]])
            except GatherIndexError as error:
                ok = bad and f"index {10_000 + tag} at" in str(error)
            with lock:
                counts["bad" if bad else "good"] += 1
                if not ok:
                    failures.append(tag)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counts["bad"] > 20 and counts["good"] > 100, counts
    if entry == "options":  # errors raised on ORT's pool threads go to some run, not always theirs (README)
        return
    assert failures == [], f"{len(failures)} of {sum(counts.values())} runs wrong: {failures[:10]}"


def scan_model():
    """Scan over the rows of x; the body gathers two elements of each row into a declared [2] output."""
    axes = helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array([0], np.int64)))
    gather = helper.make_node("GatherMultiaxis", ["row", "idx"], ["picked"], domain="ai.onnx.contrib", mode="error")
    gather.input.append("axes")
    body = helper.make_graph([axes, gather], "body", [helper.make_tensor_value_info("row", TensorProto.FLOAT, [3])],
                             [helper.make_tensor_value_info("picked", TensorProto.FLOAT, [2])])
    scan = helper.make_node("Scan", ["x"], ["y"], num_scan_inputs=1, body=body)
    value = helper.make_tensor_value_info
    return make_model([scan], [value("x", TensorProto.FLOAT, [4, 3]), value("idx", TensorProto.INT64, [2])],
                      [value("y", TensorProto.FLOAT, [4, 2])], extra_opsets=CONTRIB)


def case_scan(entry):
    sess = make_session(entry, scan_model())
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "idx": np.array([2, -3])})[0], x[:, [2, 0]])
    error = expect_error(lambda: sess.run(None, {"x": x, "idx": np.array([1, 3])}), index_error(entry),
                         "index 3 at indices[1]" if entry != "default" else "")
    assert entry != "default" or "idx=3 must be within the inclusive range [-3,2]" in str(error), str(error)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "idx": np.array([1, 1])})[0], x[:, [1, 1]])


def varying_scan_model():
    """Scan over the rows of x; the body gathers a row's nonzero elements into a declared ["n"] output, whose
    length changes between iterations when the rows hold different counts of nonzeros."""
    value = helper.make_tensor_value_info
    nodes = [helper.make_node("NonZero", ["row"], ["nonzero"]),
             helper.make_node("Squeeze", ["nonzero", "zero"], ["where"]),
             helper.make_node("Gather", ["row", "where"], ["picked"], axis=0)]
    body = helper.make_graph(nodes, "body", [value("row", TensorProto.FLOAT, [3])], [value("picked", TensorProto.FLOAT, ["n"])],
                             [helper.make_tensor("zero", TensorProto.INT64, [1], [0])])
    return make_model([helper.make_node("Scan", ["x"], ["y"], num_scan_inputs=1, body=body)],
                      [value("x", TensorProto.FLOAT, [2, 3])], [value("y", TensorProto.FLOAT, [2, None])])


def case_scan_varying(entry):
    """A Scan body output that GatherMultiaxis writes changes shape between iterations: ORT's builtin Gather
    raises InvalidArgument; the PyOp ended the process (std::terminate). The session raises as the builtin does."""
    from gathermultiaxis.graphs import rewrite_model

    original = varying_scan_model()
    rewritten, _ = rewrite_model(original)
    assert "GatherMultiaxis" in [n.op_type for n in rewritten.graph.node[0].attribute[0].g.node]
    import gathermultiaxis

    for sess in (make_session(entry, rewritten), gathermultiaxis.InferenceSession(rewritten, bind_constants=False, run_builtin_gathers=False)):
        same = {"x": np.array([[1, 0, 2], [0, 4, -3]], np.float32)}
        varying = {"x": np.array([[1, 0, 2], [0, 0, 3]], np.float32)}
        want, _ = builtin_outcome(original, same)
        assert_bit_identical(sess.run(None, same)[0], want[0])
        _, want_error = builtin_outcome(original, varying)
        assert type(want_error).__name__ == "InvalidArgument", want_error
        error = expect_error(lambda: sess.run(None, varying), type(want_error), "shape")
        assert "has shape {2} but the computed output shape for this run is {1}" in str(error), error
        assert_bit_identical(sess.run(None, same)[0], want[0])  # the session lives on
    declared_static = varying_scan_model()  # declared [2], which the second row does not meet: it ended the process too
    declared_static.graph.node[0].attribute[0].g.output[0].type.tensor_type.shape.dim[0].dim_value = 2
    rewritten, _ = rewrite_model(declared_static)
    _, want_error = builtin_outcome(declared_static, varying)
    expect_error(lambda: make_session(entry, rewritten).run(None, varying), type(want_error), "computed output shape")


def string_table_model(values):
    table = helper.make_tensor("table", TensorProto.STRING, [len(values)], values)
    gather = helper.make_node("Gather", ["table", "ids"], ["out"], axis=0)
    value = helper.make_tensor_value_info
    return make_model([gather], [value("ids", TensorProto.INT64, [None])], [value("out", TensorProto.STRING, [None])],
                      [table])


def builtin_outcome(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        return sess.run(None, feeds), None
    except Exception as error:  # noqa: BLE001
        return None, error


def case_strings(entry):
    from gathermultiaxis.graphs import rewrite_model

    original = string_table_model([b"ok", b"\xff\xfe bad", "caf\u00e9".encode()])
    rewritten, _ = rewrite_model(original)
    if entry == "options":  # the table crosses the bridge on every call, which ended the process on it
        expect_error(lambda: make_session(entry, rewritten), ValueError, "the string initializer 'table' holds bytes "
                     "that are not UTF-8")
        rewritten, _ = rewrite_model(string_table_model([b"ok", "caf\u00e9".encode(), b"x"]))
        original = string_table_model([b"ok", "caf\u00e9".encode(), b"x"])
    sess = make_session(entry, rewritten)
    for ids in ([0, 2], [1], [2, 1, 0]):
        want, want_error = builtin_outcome(original, {"ids": np.array(ids)})
        try:
            got, got_error = sess.run(None, {"ids": np.array(ids)}), None
        except Exception as error:  # noqa: BLE001
            got, got_error = None, error
        if want_error is None:
            assert got_error is None, got_error
            assert got[0].tolist() == want[0].tolist(), (got, want)
        else:
            assert type(got_error) is type(want_error), (got_error, want_error)
    nul = string_table_model([b"a\x00b", b"plain"])
    rewritten, _ = rewrite_model(nul)
    if entry == "options":  # the bridge cut the table's strings on the way in: the op never saw the NUL
        expect_error(lambda: make_session(entry, rewritten), ValueError, "the string initializer 'table' holds a NUL")
        rewritten, _ = rewrite_model(string_table_model([b"ab", b"plain"]))
    sess = make_session(entry, rewritten)
    assert sess.run(None, {"ids": np.array([1])})[0].tolist() == ["plain"]
    if entry == "session":
        expect_error(lambda: sess.run(None, {"ids": np.array([1, 0])}), ValueError, "NUL character")
    # strings fed in: they cross the bridge in the session's GatherMultiaxisRun
    fed = make_session(entry, gather_multiaxis_model(TensorProto.STRING, TensorProto.INT64))
    feeds = {"input": np.array(["x", "y\x00z"], dtype=object), "indices": np.array([1]), "axes": np.array([0])}
    expect_error(lambda: fed.run(None, feeds), ValueError, "NUL character")
    feeds["input"][1] = "y"
    assert fed.run(None, feeds)[0].tolist() == ["y"]
    # bytes fed as a NumPy "S" array reach the bridge as they are: not UTF-8, they ended the process there
    not_utf8 = {**feeds, "input": np.array([b"x", b"y\xff"])}
    expect_error(lambda: fed.run(None, not_utf8), ValueError, "input 'input' holds bytes that are not UTF-8")
    outcome = {}

    def callback(results, data, err):
        outcome["err"] = err

    expect_error(lambda: fed.run_async(None, not_utf8, callback, None), ValueError, "not UTF-8")
    assert fed.run(None, {**feeds, "input": np.array([b"x", b"caf\xc3\xa9"])})[0].tolist() == ["caf\u00e9"]


def case_uint64(entry):
    from gathermultiaxis.ops import bridge_info, register

    values = np.array([2**64 - 1, 2**63, 2**63 - 1, 5, 0], dtype=np.uint64)
    sess = make_session(entry, gather_multiaxis_model(TensorProto.UINT64, TensorProto.INT64))
    for handback in (True, False):
        register(handback=handback)
        assert bridge_info()["handback_active"] is handback
        indices = np.array([0, 1, 2, 3, 4, 0])
        output = sess.run(None, {"input": values, "indices": indices, "axes": np.array([0])})[0]
        assert_bit_identical(output, values[indices])


def case_extensions(entry, order):
    from onnxruntime_extensions import get_library_path

    options = ort.SessionOptions()
    if order == "before":
        options.register_custom_ops_library(get_library_path())
    import warnings

    from gathermultiaxis.ops import register

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        register()
    early = [str(w.message) for w in caught if "registered on SessionOptions in this process before" in str(w.message)]
    assert len(early) == (order == "before"), early
    if entry == "options" and order == "before":  # those options would segfault ORT (upstream): refused
        expect_error(lambda: make_session(entry, gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64), options),
                     RuntimeError, "PyCustomOpDef_FetchPyCustomOps")
        import gathermultiaxis

        sess = ort.InferenceSession(gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64).SerializeToString(),
                                    gathermultiaxis.session_options(), providers=["CPUExecutionProvider"])  # its own work
        np.testing.assert_array_equal(sess.run(None, GOOD)[0], [[2, 0], [5, 3]])
        return
    if order == "after":
        options.register_custom_ops_library(get_library_path())
    model = gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64)
    if entry == "options" and order == "after":
        expect_error(lambda: make_session(entry, model, options), Exception, "Conflicting with a registered kernel")
        return
    sess = make_session(entry, model, options)
    np.testing.assert_array_equal(sess.run(None, GOOD)[0], [[2, 0], [5, 3]])


def case_extensions_before(entry):
    case_extensions(entry, "before")


def case_extensions_after(entry):
    case_extensions(entry, "after")


def case_extensions_before_passes(entry):
    """The rewrite's ORT optimization and the load check in a process that registered onnxruntime-extensions'
    library before the op types were defined: session_options(options) refuses options passed in there, so
    the passes must make their own (they failed with the refusal)."""
    import warnings

    from onnxruntime_extensions import get_library_path

    import gathermultiaxis
    from gathermultiaxis.graphs import rewrite_model
    from gathermultiaxis.graphs.modelfile import load_model, ort_load_error

    ort.SessionOptions().register_custom_ops_library(get_library_path())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the early-registration warning: case_extensions checks it
        gathermultiaxis.ops.register()
    original = embedding_model(table_tensor(TensorProto.FLOAT, [10, 4], np.random.default_rng(3)), [2])
    rewritten, _ = rewrite_model(original, ort_optimize=True, session_options=gathermultiaxis.session_options)
    assert ort_load_error(rewritten.SerializeToString(), session_options=gathermultiaxis.session_options) == ""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "rewritten.onnx")
        onnx.save(rewritten, path)
        loaded, _ = load_model(path, session_options=gathermultiaxis.session_options)
    if entry == "session":
        sess = make_session(entry, loaded)
    else:  # session_options() without options: its own, never refused
        sess = ort.InferenceSession(loaded.SerializeToString(), gathermultiaxis.session_options(),
                                    providers=["CPUExecutionProvider"])
    builtin = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"ids": np.array([9, -10])}
    assert_bit_identical(sess.run(None, feeds)[0], builtin.run(None, feeds)[0])


BINDING_TYPES = [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT8,
                 TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT16,
                 TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL, TensorProto.STRING]


def table_tensor(elem_type, shape, rng):
    """A table of ``elem_type`` with NaNs, -0.0 and extreme values where the type has them."""
    size = int(np.prod(shape))
    if elem_type == TensorProto.STRING:
        return helper.make_tensor("table", elem_type, shape, [f"s{i}\u00e9".encode() for i in range(size)])
    if elem_type == TensorProto.BFLOAT16:
        bits = rng.integers(0, 2**16, size, dtype=np.uint16)
        # ORT's Cast float -> bfloat16 (the rewriter's round trip, bound or not) quiets NaN payloads to
        # 0x7FC0 where builtin Gather keeps them: a deviation of the Cast round trip, not of binding
        nan = ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0)
        bits[nan] = (bits[nan] & 0x8000) | 0x7FC0
        bits[:4] = [0x7FC0, 0x8000, 0xFF80, 0x0001]  # NaN, -0.0, -inf, smallest subnormal
        return helper.make_tensor("table", elem_type, shape, bits.tobytes(), raw=True)
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    if dtype == np.bool_:
        values = rng.integers(0, 2, size).astype(bool)
    elif np.issubdtype(dtype, np.floating):
        values = rng.standard_normal(size).astype(dtype)
        values[:3] = [np.nan, -0.0, np.inf]
    else:
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
        values[:2] = [info.min, info.max]
    return numpy_helper.from_array(values.reshape(shape), "table")


def embedding_model(table, ids_shape):
    """Gather(table, ids, axis=0); a bfloat16 result is cast to float32 (exact), which NumPy can hold."""
    nodes = [helper.make_node("Gather", ["table", "ids"], ["out"], axis=0)]
    out_type = table.data_type
    if out_type == TensorProto.BFLOAT16:
        nodes[0].output[0] = "gathered"
        nodes.append(helper.make_node("Cast", ["gathered"], ["out"], to=TensorProto.FLOAT))
        out_type = TensorProto.FLOAT
    value = helper.make_tensor_value_info
    return make_model(nodes, [value("ids", TensorProto.INT64, ids_shape)], [value("out", out_type, None)], [table])


def check_bound(original, sess, feeds_list):
    builtin = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    assert sess.bound_tables == 1, sess.bound_tables
    for feeds in feeds_list:
        for got, want in zip(sess.run(None, feeds), builtin.run(None, feeds)):
            assert_bit_identical(got, want)


def case_binding(entry):
    from gathermultiaxis import InferenceSession
    from gathermultiaxis.graphs import rewrite_model

    rng = np.random.default_rng(0)
    feeds = [{"ids": np.array([[0, 1, 2, 39, -40, 7]])}, {"ids": rng.integers(-40, 40, (3, 5))}]
    for elem_type in BINDING_TYPES:
        # ORT's builtin string Gather is wrong when a block holds more than one element: 1-D for strings
        shape = [40] if elem_type == TensorProto.STRING else [40, 3]
        original = embedding_model(table_tensor(elem_type, shape, rng), [None, None])
        rewritten, _ = rewrite_model(original)
        try:
            check_bound(original, InferenceSession(rewritten, run_builtin_gathers=False), feeds)
        except AssertionError as error:
            raise AssertionError(f"{TensorProto.DataType.Name(elem_type)}: {error}") from error
    # a table ORT also reads elsewhere (tied embeddings): shared with ORT through add_initializer
    for elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16):
        tied = embedding_model(table_tensor(elem_type, [40, 3], rng), [None, None])
        again_type = TensorProto.FLOAT16 if elem_type == TensorProto.FLOAT16 else TensorProto.FLOAT
        tied.graph.node.append(helper.make_node("Cast", ["table"], ["table_again"], to=again_type))
        tied.graph.output.append(helper.make_tensor_value_info("table_again", again_type, None))
        rewritten, _ = rewrite_model(tied)
        sess = InferenceSession(rewritten, run_builtin_gathers=False)
        assert len(sess._gathermultiaxis_shared) == 1, TensorProto.DataType.Name(elem_type)
        check_bound(tied, sess, feeds)
    # a table in external data: memory-mapped, and the model file left as it is
    with tempfile.TemporaryDirectory() as folder:
        for elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT8):
            original = embedding_model(table_tensor(elem_type, [300, 8], rng), [None, None])
            rewritten, _ = rewrite_model(original)
            path = os.path.join(folder, f"model{elem_type}.onnx")
            onnx.save(rewritten, path, save_as_external_data=True, all_tensors_to_one_file=True,
                      location=f"tables{elem_type}.bin", size_threshold=0)
            before = open(path, "rb").read()
            sess = InferenceSession(path, run_builtin_gathers=False)
            from gathermultiaxis.ops.runtime.registration import bound_table, bound_table_keys

            tables = [bound_table(key) for key in bound_table_keys()]
            assert any(isinstance(t.array.base if t.array.base is not None else t.array, np.memmap)
                       or isinstance(t.array, np.memmap) for t in tables), "not memory-mapped"
            del tables
            check_bound(original, sess, [{"ids": rng.integers(-300, 300, (2, 7))}])
            assert open(path, "rb").read() == before
            del sess
            assert not bound_table_keys(), "bound tables outlive their session"
    # tables computed from constants (issue 29 item 1): a view of a mapped table (Reshape, Unsqueeze, Squeeze)
    # stays mapped; a DequantizeLinear of a mapped int8 table is computed once (a new array); both bit-exact
    with tempfile.TemporaryDirectory() as folder:
        from gathermultiaxis.ops.runtime.registration import bound_table, bound_table_keys

        value = helper.make_tensor_value_info
        constants = [table_tensor(TensorProto.FLOAT, [300, 8], rng),
                     numpy_helper.from_array(rng.integers(-128, 128, (300, 8)).astype(np.int8), "quantized"),
                     numpy_helper.from_array(np.float32(0.0123456789), "scale"),
                     numpy_helper.from_array(np.array([600, 4], np.int64), "shape"),
                     numpy_helper.from_array(np.array([0], np.int64), "axis0")]
        nodes = [helper.make_node("Reshape", ["table", "shape"], ["reshaped"]),
                 helper.make_node("Unsqueeze", ["reshaped", "axis0"], ["unsqueezed"]),
                 helper.make_node("Squeeze", ["unsqueezed", "axis0"], ["viewed"]),
                 helper.make_node("Gather", ["viewed", "ids"], ["out"], axis=0),
                 helper.make_node("DequantizeLinear", ["quantized", "scale"], ["dequantized"]),
                 helper.make_node("Gather", ["dequantized", "rows"], ["out_q"], axis=0)]
        original = make_model(nodes, [value("ids", TensorProto.INT64, [None]), value("rows", TensorProto.INT64, [None])],
                              [value("out", TensorProto.FLOAT, None), value("out_q", TensorProto.FLOAT, None)], constants)
        rewritten, _ = rewrite_model(original)
        path = os.path.join(folder, "chains.onnx")
        onnx.save(rewritten, path, save_as_external_data=True, all_tensors_to_one_file=True, location="chains.bin",
                  size_threshold=1024)  # the two tables
        before = open(path, "rb").read()
        sess = InferenceSession(path, run_builtin_gathers=False)
        assert sess.bound_tables == 2, sess.bound_tables
        tables = {bound_table(key).array.shape: bound_table(key).array for key in bound_table_keys()}

        def mapped(array):
            while isinstance(array, np.ndarray) and not isinstance(array, np.memmap):
                array = array.base  # ends at the mapping, or at what owns the bytes (ORT's output: a capsule)
            return isinstance(array, np.memmap)

        assert mapped(tables[(600, 4)]) and not mapped(tables[(300, 8)]), {k: type(v) for k, v in tables.items()}
        del tables
        builtin = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
        feeds = {"ids": rng.integers(-600, 600, 9), "rows": rng.integers(-300, 300, 7)}
        for got, want in zip(sess.run(None, feeds), builtin.run(None, feeds)):
            assert_bit_identical(got, want)
        assert open(path, "rb").read() == before
        del sess
        assert not bound_table_keys(), "bound tables outlive their session"


def constant_axes_model(elem_type=TensorProto.FLOAT):
    """GatherMultiaxis with a Constant axes operand: the session runs it as GatherMultiaxisRunFixedAxes."""
    axes = helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array([1], np.int64)))
    node = helper.make_node("GatherMultiaxis", ["input", "indices", "axes"], ["output"], domain="ai.onnx.contrib",
                            mode="error")
    value = helper.make_tensor_value_info
    return make_model([axes, node], [value("input", elem_type, None), value("indices", TensorProto.INT64, None)],
                      [value("output", elem_type, None)], extra_opsets=CONTRIB)


def case_ortvaluevector(entry):
    """run_with_ortvaluevector (no run token of the caller's) runs, and its op errors are raised."""
    from onnxruntime.capi import _pybind_state as C

    from gathermultiaxis import GatherIndexError

    sess = make_session(entry, gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64))

    def run(feeds):
        values = C.OrtValueVector()
        kept = [ort.OrtValue.ortvalue_from_numpy(v) for v in feeds.values()]
        for value in kept:
            values.push_back(value._ortvalue)
        fetches = C.OrtValueVector()
        sess.run_with_ortvaluevector(ort.RunOptions(), list(feeds), values, ["output"], fetches,
                                     [ort.OrtDevice.make("cpu", 0)._get_c_device()])
        return np.asarray(fetches[0].numpy())

    np.testing.assert_array_equal(run(GOOD), [[2, 0], [5, 3]])
    expect_error(lambda: run({**GOOD, "indices": np.array([[0, 8]])}), GatherIndexError, "index 8 at")
    np.testing.assert_array_equal(run({**GOOD, "indices": np.array([[1, 1]])}), [[1, 1], [4, 4]])
    # a pre-allocated fetch: of the wrong shape, ORT's check failed inside the bridge (std::terminate)
    kept = [ort.OrtValue.ortvalue_from_numpy(v) for v in GOOD.values()]
    values = C.OrtValueVector()
    for value in kept:
        values.push_back(value._ortvalue)
    for shape in ((3, 4), (2, 2)):
        buffer = ort.OrtValue.ortvalue_from_numpy(np.full(shape, -1, np.float32))
        fetches = C.OrtValueVector()
        fetches.push_back(buffer._ortvalue)

        def call():
            sess.run_with_ortvaluevector(ort.RunOptions(), list(GOOD), values, ["output"], fetches,
                                         [ort.OrtDevice.make("cpu", 0)._get_c_device()])

        if shape == (3, 4):
            expect_error(call, RuntimeError, "has shape {3,4} but the computed output shape for this run is {2,2}")
            np.testing.assert_array_equal(buffer.numpy(), -1)
        else:
            call()
            np.testing.assert_array_equal(buffer.numpy(), [[2, 0], [5, 3]])


def case_async_dropped(entry):
    """run_async, then the session object dropped before the callbacks: every run still succeeds."""
    import gc

    from gathermultiaxis.graphs import rewrite_model

    table = numpy_helper.from_array(np.arange(400, dtype=np.float32).reshape(100, 4), "table")
    original = embedding_model(table, [None, None])
    sess = make_session(entry, rewrite_model(original)[0])
    outcomes, done = {}, threading.Semaphore(0)

    def callback(results, number, err):
        outcomes[number] = (None if err else np.asarray(results[0]), err)
        done.release()

    for number in range(20):
        sess.run_async(None, {"ids": np.array([[number, 99 - number]])}, callback, number)
    del sess
    gc.collect()
    for _ in range(20):
        assert done.acquire(timeout=60), "a run_async callback never came"
    expected = np.arange(400, dtype=np.float32).reshape(100, 4)
    good = [n for n, (output, err) in outcomes.items() if not err and np.array_equal(output, expected[[[n, 99 - n]]])]
    assert len(good) == 20, {n: err for n, (_, err) in outcomes.items() if err}


def case_own_hook(entry):
    """The package's invocation hook and onnxruntime-extensions' generic invoker give the same answers and
    errors, on every node form; a PyOp of the user's own still runs through the generic invoker."""
    from onnxruntime_extensions import PyCustomOpDef, onnx_op

    from gathermultiaxis import GatherIndexError
    from gathermultiaxis.ops import bridge_info, register

    @onnx_op(op_type="UsersDouble", inputs=[PyCustomOpDef.dt_float], outputs=[PyCustomOpDef.dt_float])
    def users_double(x):
        return x * 2

    register()
    assert bridge_info()["own_hook"] is True
    fixed = make_session(entry, constant_axes_model())
    fed = make_session(entry, gather_multiaxis_model(TensorProto.FLOAT, TensorProto.INT64))
    value = helper.make_tensor_value_info
    users = make_model([helper.make_node("UsersDouble", ["x"], ["y"], domain="ai.onnx.contrib")],
                       [value("x", TensorProto.FLOAT, [2])], [value("y", TensorProto.FLOAT, [2])], extra_opsets=CONTRIB)
    users_sess = make_session(entry, users)
    # bound tables sharing their indices (one GatherMultiaxisBoundGroup node in InferenceSession's model)
    from gathermultiaxis.graphs import rewrite_model

    thresholds, children = np.array([0.5, -0.0, np.nan], np.float32), np.array([2, -5, 7], np.int64)
    shared = make_model([helper.make_node("Gather", ["thresholds", "ids"], ["t"], axis=0),
                         helper.make_node("Gather", ["children", "ids"], ["c"], axis=0)],
                        [value("ids", TensorProto.INT64, [None])],
                        [value("t", TensorProto.FLOAT, None), value("c", TensorProto.INT64, None)],
                        [numpy_helper.from_array(thresholds, "thresholds"), numpy_helper.from_array(children, "children")])
    grouped = make_session(entry, rewrite_model(shared)[0])
    if entry != "options":  # one group on the kernel; none left by default (builtin Gathers)
        assert grouped.bridge_crossings == (entry == "session"), grouped.bridge_crossings
    for hook, handback in ((True, None), (False, None), (False, False), (True, False), (True, None)):
        register(handback=handback, hook=hook)
        assert bridge_info()["own_hook"] is hook
        np.testing.assert_array_equal(fixed.run(None, {k: GOOD[k] for k in ("input", "indices")})[0], [[2, 0], [5, 3]])
        np.testing.assert_array_equal(fed.run(None, GOOD)[0], [[2, 0], [5, 3]])
        expect_error(lambda: fixed.run(None, {"input": GOOD["input"], "indices": np.array([[0, -9]])}),
                     GatherIndexError, "index -9 at")
        np.testing.assert_array_equal(users_sess.run(None, {"x": np.array([1.5, -2], np.float32)})[0], [3, -4])
        got_thresholds, got_children = grouped.run(None, {"ids": np.array([2, 0, -2])})
        assert_bit_identical(got_thresholds, thresholds[[2, 0, -2]])
        assert_bit_identical(got_children, children[[2, 0, -2]])
        expect_error(lambda: grouped.run(None, {"ids": np.array([1, 3])}), index_error(entry),
                     "index 3 at" if entry != "default" else "idx=3 must be within the inclusive range [-3,2]")


CASES = {name[len("case_"):]: function for name, function in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    case, entry = sys.argv[1], sys.argv[2]
    CASES[case](entry)
    print("OK")
