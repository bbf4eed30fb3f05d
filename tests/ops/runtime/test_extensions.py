"""ops/runtime/extensions.py: onnxruntime-extensions imported without its tokenizer converter."""

import subprocess
import sys


def test_importing_the_bridge_loads_neither_transformers_nor_the_converter():
    code = ("import sys; import gathermultiaxis.ops.runtime.extensions, onnxruntime_extensions; "
            "print(type(sys.modules['onnxruntime_extensions.cvt']).__name__, 'transformers' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["_DeferredCvt", "False"]
