"""The package's import structure: the kernel and the command line's help work without onnxruntime,
the library never imports the command line, and module-level imports have no cycles."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The package roots (pyproject's package-dir); every folder below one is a subpackage of it.
ROOTS = {"scripts": "gathermultiaxis", "ops": "gathermultiaxis.ops", "graphs": "gathermultiaxis.graphs"}


def package_files() -> dict[str, tuple[Path, str]]:
    """{module name: (its file, the package its relative imports start from)}, every module of every package."""
    found = {}
    for folder, root in ROOTS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            package = ".".join((root, *parts[:-1]))
            found[package if parts[-1] == "__init__" else f"{package}.{parts[-1]}"] = (path, package)
    return found


def resolved(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` names, relative levels resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


BLOCK_ORT = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("onnxruntime", "onnxruntime_extensions"):
            raise ImportError(f"{name} is blocked for this test")
sys.meta_path.insert(0, Block())
"""


def test_kernel_and_help_work_without_onnxruntime():
    code = BLOCK_ORT + """
import numpy as np
from gathermultiaxis import gather_multiaxis
print(gather_multiaxis(np.arange(6).reshape(2, 3), np.array([[2, 0]]), [1]).tolist())
from gathermultiaxis.cli import main
try:
    main(["--help"])
except SystemExit as exit_info:
    assert exit_info.code == 0
print(sorted(m for m in sys.modules if m.startswith("onnxruntime")))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert lines[0] == "[[2, 0], [5, 3]]" and "rewrite" in run.stdout and lines[-1] == "[]"


# What the command line loads before it parses: the package root (the kernel, NumPy) and the command line's
# own modules; onnx, the variants, the passes and the conformance runner are imported by each command's run.
STARTUP_MODULES = {"gathermultiaxis", "gathermultiaxis.ops", "gathermultiaxis.ops.contract",
                   "gathermultiaxis.ops.geometry", "gathermultiaxis.ops.kernel", "gathermultiaxis.ops.private_api",
                   "gathermultiaxis.cli", *(f"gathermultiaxis.cli.{name}" for name in (
                       "entry", "command_base", "option_groups", "model_io", "command_rewrite", "command_lower",
                       "command_webnn_check", "command_check", "check_output", "command_bench", "bench_jobs",
                       "command_policies", "command_example"))}


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["check", "--help"], ["bench", "end-to-end", "--help"],
                                  ["rewrite", "--no-such-option"]])
def test_help_and_version_load_no_onnx_nor_the_runner(argv):
    """``python -m gathermultiaxis --help`` (and --version, a sub-command's help, a bad option) loads only
    STARTUP_MODULES of the package, and no onnx, onnxruntime or sympy."""
    code = f"""
import runpy, sys
sys.argv = ["gathermultiaxis", *{argv!r}]
try:
    runpy.run_module("gathermultiaxis", run_name="__main__")
except SystemExit:
    pass
print(sorted(m for m in sys.modules if m.startswith("gathermultiaxis")))
print(sorted({{m.split(".")[0] for m in sys.modules}} & {{"onnx", "onnxruntime", "onnxruntime_extensions", "sympy"}}))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    modules, heavy = (ast.literal_eval(line) for line in run.stdout.strip().splitlines()[-2:])
    assert set(modules) == STARTUP_MODULES and heavy == [], (modules, heavy)


def test_using_the_op_without_onnxruntime_says_so():
    code = BLOCK_ORT + """
import gathermultiaxis
try:
    gathermultiaxis.session_options()
except ImportError as error:
    print(error)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0 and "onnxruntime" in run.stdout, run.stderr


def module_imports():
    """{module: set of package modules it imports at module level}."""
    graph = {}
    for name, (path, package) in package_files().items():
        imported = set()
        for node in ast.parse(path.read_text()).body:  # module level only
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("gathermultiaxis")):
                target = resolved(node, package)
                imported.add(target)
                if node.level:
                    imported.update(f"{target}.{alias.name}" for alias in node.names)
        graph[name] = imported
    return {name: {i for i in imported if i in graph and i != name} for name, imported in graph.items()}


def test_the_library_does_not_import_the_command_line():
    importers = {name for name, imported in module_imports().items()
                 if not name.startswith("gathermultiaxis.cli")
                 and any(i == "gathermultiaxis.cli" or i.startswith("gathermultiaxis.cli.") for i in imported)}
    assert importers <= {"gathermultiaxis.__main__"}, importers


def test_no_import_cycles():
    graph = module_imports()
    state = {}

    def visit(name, trail):
        if state.get(name) == "done":
            return
        assert state.get(name) != "open", " -> ".join(trail + [name])
        state[name] = "open"
        for child in sorted(graph[name]):
            if child != name.rsplit(".", 1)[0]:  # a module's own package is imported before it anyway
                visit(child, trail + [name])
        state[name] = "done"

    for module in sorted(graph):
        visit(module, [])


def private_names_used_across_modules() -> list[str]:
    """``from .x import _name`` and ``x._name`` where ``x`` is another module of the package, in the
    package and in its tests (names starting with one underscore; dunders such as ``__version__`` are
    public)."""
    found = []
    for folder in (*ROOTS, "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            modules = set()  # names bound to modules of the package in this file
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("gathermultiaxis")):
                    for alias in node.names:
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {'.' * node.level}"
                                         f"{node.module or ''} import {alias.name}")
                        if node.module is None or alias.name[:1].islower():
                            modules.add(alias.asname or alias.name)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                        and node.attr.startswith("_") and not node.attr.startswith("__")):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_private_names_across_modules():
    """A module's private names are its own: another module, or a test, that needs one gets a public name
    instead (issue 19: graphs/lower.py imported eight private helpers of graphs/rewrite.py)."""
    assert private_names_used_across_modules() == []


# The passes (graphs/) use the op's definition in ops/ and never its ORT runtime (issue 28). Old module names or new
# (ops.runtime) until the runtime's modules have moved.
ORT_RUNTIME = {f"gathermultiaxis.ops.{name}" for name in ("ortop", "session", "run_errors", "preallocated")} | {
    f"gathermultiaxis.ops.runtime.{name}" for name in ("session", "registration", "op_bodies", "handback",
                                                       "bound_index", "run_errors", "preallocated", "own_options")}
ORT_RUNTIME_NAMES = {f"{package}.{name}" for package in ("gathermultiaxis.ops", "gathermultiaxis.ops.runtime")
                     for name in ("session_options", "InferenceSession", "register", "bridge_info")}


# The one ORT-runtime import the passes make: rewrite_model's default session options for ort_optimize,
# imported inside the call that loads the model in ORT, so that importing or running the rewriter never does.
LAZY_RUNTIME_IMPORTS = {("graphs/rewrite/rewrite_pass.py", "rewrite_model", "from ...ops.runtime.registration import session_options")}


def test_the_passes_import_no_ort_runtime():
    """Not at module level, and inside a function only where LAZY_RUNTIME_IMPORTS says: a pass that loads a
    model in ORT is given the session options (gathermultiaxis.session_options) by its caller."""
    found = []
    for name, (path, package) in package_files().items():
        if not name.startswith("gathermultiaxis.graphs"):
            continue
        tree = ast.parse(path.read_text())
        enclosing = {}  # import node -> the name of the function it is in ("" at module level)
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(function):
                    enclosing.setdefault(inner, function.name)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            target = resolved(node, package)
            names = {f"{target}.{alias.name}" for alias in node.names}
            if target in ORT_RUNTIME or names & (ORT_RUNTIME | ORT_RUNTIME_NAMES):
                statement = (f"from {'.' * node.level}{node.module or ''} import "
                             + ", ".join(alias.name for alias in node.names))
                where = path.relative_to(ROOT).as_posix()
                if (where, enclosing.get(node, ""), statement) not in LAZY_RUNTIME_IMPORTS:
                    found.append(f"{where}:{node.lineno}: {statement}")
    assert found == []


def test_the_rewriter_loads_no_ort_runtime_until_ort_optimize():
    """Importing the passes and rewriting without ort_optimize loads none of ORT_RUNTIME; ort_optimize
    loads the package's session options (LAZY_RUNTIME_IMPORTS)."""
    code = """
import sys
from gathermultiaxis.examples import build_example_model
from gathermultiaxis.graphs import rewrite_model
model = build_example_model()
rewrite_model(model)
print(sorted(m for m in sys.modules if m.startswith("gathermultiaxis.ops.")))
rewrite_model(model, ort_optimize=True)
print(sorted(m for m in sys.modules if m.startswith("gathermultiaxis.ops.")))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    before, after = (set(ast.literal_eval(line)) for line in run.stdout.strip().splitlines()[-2:])
    assert not before & ORT_RUNTIME and "gathermultiaxis.ops.runtime.registration" in after


# The rewriter's and the lowerings' modules, by old or new name (a name and everything below it)
REWRITER_AND_LOWERINGS = tuple(f"gathermultiaxis.graphs.{name}" for name in (
    "rewrite", "rules", "runtime_alignment", "rank_inference", "block_quantized", "provenance", "form_check", "lower",
    "lower_forms", "lower_general", "webnn", "sources", "ranks.rank_rules"))


def within(module: str, packages: tuple[str, ...]) -> bool:
    """Whether ``module`` is one of ``packages`` or in one of them."""
    return any(module == package or module.startswith(package + ".") for package in packages)


@pytest.mark.parametrize("builtin_gathers", [False, True], ids=["kernel only", "default"])
def test_running_a_rewritten_model_loads_neither_the_rewriter_nor_the_lowerings(tmp_path, builtin_gathers):
    """``gathermultiaxis.InferenceSession`` on a rewritten model, run once: the session's modules are the
    runtime's and its bind step's; no rewrite pass. With every node on the kernel, no lowering either, and no
    GatherMultiaxis schema registered with onnx (the rewriter and onnx's inference need it, the kernel does
    not); by default the single-gather lowering (graphs.lower and what it uses: the rewrite's records, the
    rewrite's rules, whose replacement of a recorded gather form_check makes again to prove the record, the
    small folder of rank_inference, and the schema for its shape inference), not the WebNN one."""
    import numpy as np
    import onnx

    from gathermultiaxis.examples import build_example_model, example_inputs
    from gathermultiaxis.graphs import rewrite_model

    rewritten, report = rewrite_model(build_example_model())
    assert report.rewritten > 0
    onnx.save(rewritten, tmp_path / "rewritten.onnx")
    np.savez(tmp_path / "feeds.npz", **example_inputs())
    code = f"""
import sys
import numpy as np
import onnx.defs
import gathermultiaxis
session = gathermultiaxis.InferenceSession({str(tmp_path / "rewritten.onnx")!r}, run_builtin_gathers={builtin_gathers})
feeds = dict(np.load({str(tmp_path / "feeds.npz")!r}))
assert (session.builtin_gathers > 0) if {builtin_gathers} else (session.bound_tables > 0)
assert session.run(None, feeds)
print({{name: getattr(module, "__file__", "") for name, module in sys.modules.items() if name.startswith("gathermultiaxis")}})
print(onnx.defs.has("GatherMultiaxis", "ai.onnx.contrib"))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    modules_line, schema_line = run.stdout.strip().splitlines()[-2:]
    files = ast.literal_eval(modules_line)
    modules = set(files)
    assert modules & {"gathermultiaxis.ops.session", "gathermultiaxis.ops.runtime.session"}, modules  # what ran
    assert modules & {"gathermultiaxis.graphs.bind", "gathermultiaxis.ops.runtime.bind"}, modules
    loaded = {module for module in modules if within(module, REWRITER_AND_LOWERINGS)}
    if not builtin_gathers:
        assert loaded == set()
    else:  # the lowering (and what it uses), never the rewrite pass (a module, or a package's) or the WebNN lowering
        assert "gathermultiaxis.graphs.lower" in loaded
        rewrite_pass = {"gathermultiaxis.graphs.rewrite.rewrite_pass"}
        if files.get("gathermultiaxis.graphs.rewrite", "").endswith("rewrite.py"):
            rewrite_pass.add("gathermultiaxis.graphs.rewrite")
        assert not loaded & rewrite_pass, loaded
        assert not any(within(module, ("gathermultiaxis.graphs.webnn",)) for module in loaded), loaded
    assert schema_line == str(builtin_gathers)  # the lowering infers shapes through GatherMultiaxis nodes
