"""The layers of docs/layout.md: core < variants < graphs < runtime < top, nothing imports upward (module level
or inside a function; ``if TYPE_CHECKING:`` imports excepted), but the one lazy import the rewrite makes."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"scripts": "gathermultiaxis", "ops": "gathermultiaxis.ops", "graphs": "gathermultiaxis.graphs"}
LAYERS = [  # (rank, name, pattern on the dotted module name); the first that matches wins
    (0, "core", r"gathermultiaxis\.ops(\.(contract|geometry|alignment|kernel|fast_plan|reference|private_api))?$"),
    (1, "variants", r"gathermultiaxis\.ops\.variants(\..*)?$"),
    (3, "runtime", r"gathermultiaxis\.ops\.runtime(\..*)?$"),
    (2, "graphs", r"gathermultiaxis\.graphs(\..*)?$"),
    (4, "top", r"gathermultiaxis(\..*)?$"),
]
# rewrite_model(..., ort_optimize=True) without session_options: the package's own, imported in that call
ALLOWED = {("gathermultiaxis.graphs.rewrite.rewrite_pass", "gathermultiaxis.ops.runtime.registration")}


def layer(module: str) -> tuple[int, str]:
    return next((rank, name) for rank, name, pattern in LAYERS if re.match(pattern, module))


def library_modules() -> dict[str, tuple[Path, str]]:
    found = {}
    for folder, root in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            package = ".".join((root, *parts[:-1]))
            found[package if parts[-1] == "__init__" else f"{package}.{parts[-1]}"] = (path, package)
    return found


def imports(path: Path, package: str):
    tree = ast.parse(path.read_text())
    type_checking = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                     and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and id(node) not in type_checking:
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.startswith("gathermultiaxis"):
                yield node.lineno, target


def test_nothing_imports_upward():
    modules = library_modules()
    upward = []
    for name, (path, package) in modules.items():
        rank, _ = layer(name)
        for line, target in imports(path, package):
            while target not in modules and "." in target:  # a name imported from a module: its module
                target = target.rsplit(".", 1)[0]
            if layer(target)[0] > rank and (name, target) not in ALLOWED:
                upward.append(f"{path.relative_to(ROOT)}:{line}: {name} ({layer(name)[1]}) -> {target} "
                              f"({layer(target)[1]})")
    assert upward == []


def test_every_module_is_in_a_layer_and_the_layers_are_not_empty():
    names = {layer(name)[1] for name in library_modules()}
    assert names == {"core", "variants", "graphs", "runtime", "top"}
