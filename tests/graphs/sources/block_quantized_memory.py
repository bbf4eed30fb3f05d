"""Peak memory of a GatherBlockQuantized embedding lookup on a [32000, 2048] 4-bit table (block size 32,
float32 scales, zero points), in four forms: ORT's contrib op; the rewrite lowered to standard ONNX over
uint8-packed data and over uint4 data (gather, then dequantize); DequantizeLinear of the whole table,
then Gather (what ORT's WebNN EP does).

    python tests/graphs/sources/block_quantized_memory.py FOLDER            # writes the models into FOLDER, then runs
                                                                     # each form in a fresh process, 2 rounds
    python tests/graphs/sources/block_quantized_memory.py FOLDER run NAME OPTIMIZED   # one measurement (used by the above)
"""
import subprocess
import sys

import numpy as np

ROWS, COLS, BS = 32000, 2048, 32
FORMS = ("contrib_uint8", "lowered_uint8", "lowered_uint4", "dequantize_then_gather")
D = sys.argv[1]
def status_mib(field):
    """VmRSS (now) or VmHWM (peak) of this process; unlike ru_maxrss, VmHWM does not inherit the peak of
    the process that started this one."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
def build():
    import onnx
    from onnx import helper, TensorProto, numpy_helper
    from gathermultiaxis.graphs import rewrite_model, lower_model
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 16, (ROWS, COLS), dtype=np.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    blocks = COLS // BS
    scales = rng.standard_normal((ROWS, blocks)).astype(np.float32)
    zp_codes = rng.integers(0, 16, (ROWS, blocks), dtype=np.uint8)
    zp_packed = (zp_codes[:, 0::2] | (zp_codes[:, 1::2] << 4)).astype(np.uint8)
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, None])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    def save(model, name):
        copy = onnx.ModelProto(); copy.CopyFrom(model); model = copy
        onnx.save(model, f"{D}/{name}.onnx", save_as_external_data=True, location=f"{name}.data")
    # 1. the contrib op over uint8-packed data (what onnxruntime-genai writes)
    gbq = helper.make_node("GatherBlockQuantized", ["data", "ids", "scales", "zp"], ["y"], domain="com.microsoft",
                           gather_axis=0, quantize_axis=1, block_size=BS, bits=4)
    inits = [numpy_helper.from_array(packed, "data"), numpy_helper.from_array(scales, "scales"),
             numpy_helper.from_array(zp_packed, "zp")]
    m = helper.make_model(helper.make_graph([gbq], "g", [ids], [out], inits), opset_imports=opsets, ir_version=10)
    save(m, "contrib_uint8")
    rw, rep = rewrite_model(m, ("GatherBlockQuantized",)); assert rep.rewritten == 1
    low, lrep = lower_model(rw); assert lrep.left == 0
    save(low, "lowered_uint8")
    # 2. uint4 data: the contrib op, its lowering, and DequantizeLinear (blocked, opset 21) then Gather
    data4 = helper.make_tensor("data", TensorProto.UINT4, [ROWS, COLS], packed.tobytes(), raw=True)
    zp4 = helper.make_tensor("zp", TensorProto.UINT4, [ROWS, blocks], zp_packed.tobytes(), raw=True)
    inits4 = [data4, numpy_helper.from_array(scales, "scales"), zp4]
    m4 = helper.make_model(helper.make_graph([gbq], "g", [ids], [out], inits4), opset_imports=opsets, ir_version=10)
    rw4, rep = rewrite_model(m4, ("GatherBlockQuantized",)); assert rep.rewritten == 1
    low4, lrep = lower_model(rw4); assert lrep.left == 0
    save(low4, "lowered_uint4")
    dq = helper.make_node("DequantizeLinear", ["data", "scales", "zp"], ["table"], axis=1, block_size=BS)
    g = helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)
    m5 = helper.make_model(helper.make_graph([dq, g], "g", [ids], [out], inits4), opset_imports=opsets[:1], ir_version=10)
    save(m5, "dequantize_then_gather")
def run(name, optimized):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    base = status_mib("VmRSS")
    s = ort.InferenceSession(f"{D}/{name}.onnx", options, providers=["CPUExecutionProvider"])
    loaded = status_mib("VmRSS")
    ids = np.random.default_rng(1).integers(0, ROWS, (1, 128))
    for _ in range(5):
        y = s.run(None, {"ids": ids})[0]
    peak = status_mib("VmHWM")
    print(f"{name:24} ORT optimizations {'on ' if optimized else 'off'}: after import {base:.0f} MiB, after load {loaded:.0f} MiB, peak {peak:.0f} MiB, "
          f"output {y.shape} checksum {float(np.float64(y).sum()):.6f}")
if __name__ == "__main__":
    if len(sys.argv) > 2:
        run(sys.argv[3], sys.argv[4] == "1")
    else:
        build()
        for _ in range(2):  # interleaved rounds, each measurement in a fresh process
            for optimized in ("1", "0"):
                for name in FORMS:
                    subprocess.run([sys.executable, __file__, D, "run", name, optimized], check=True)
