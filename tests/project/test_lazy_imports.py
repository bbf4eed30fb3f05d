"""``import gathermultiaxis`` loads the kernel only: onnx, onnxruntime and the variants wait for first use,
while the package roots still list every public name (PEP 562 ``__getattr__`` and ``__dir__``)."""

import ast
import subprocess
import sys

import pytest

HEAVY = ("onnx", "onnxruntime", "onnxruntime_extensions")


def modules_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    run = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint(sorted(sys.modules))"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return ast.literal_eval(run.stdout.strip().splitlines()[-1])


def test_import_gathermultiaxis_loads_no_onnx_onnxruntime_or_variants():
    modules = modules_after("import gathermultiaxis, gathermultiaxis.ops")
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []
    assert [m for m in modules if m.startswith("gathermultiaxis.ops.variants")] == []
    assert "gathermultiaxis.ops.kernel" in modules  # what the root does load


def test_a_variant_loads_on_first_use_without_onnx():
    modules = modules_after("import gathermultiaxis.ops as ops\nops.onnx_gather")
    assert "gathermultiaxis.ops.variants.onnx_gathers" in modules
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []


@pytest.mark.parametrize("package", ["gathermultiaxis", "gathermultiaxis.ops"])
def test_dir_and_all_list_the_lazy_names(package):
    code = (f"import {package} as p\n"
            "print(sorted(set(p.__all__) - set(dir(p))))\n"
            "print([name for name in p.__all__ if getattr(p, name, None) is None])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["[]", "[]"]


def test_an_unknown_name_is_an_attribute_error():
    import gathermultiaxis.ops as ops

    with pytest.raises(AttributeError, match="no_such_variant"):
        ops.no_such_variant  # noqa: B018
