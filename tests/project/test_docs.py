"""The documentation's own claims: every fenced Python block of README.md and docs/*.md runs, so does every
fenced ``sh`` block of ``gathermultiaxis`` commands (the cheap ones are fenced; the long runs the pages quote,
``check --fuzz 2000`` and the benchmarks, are indented text), and every public name has an entry in the API
reference.

Each block runs as written in a fresh interpreter (``sys.executable``), in an empty temporary folder that holds
only ``model.onnx`` (a copy of the bundled example, the model the check example names), so blocks neither
share state nor depend on the checkout's working folder. A block that is not meant to run carries the marker
``<!-- not run: REASON -->`` on the line before its fence (an HTML comment: the rendered page does not show it).

Why no library: mktestdocs and pytest-markdown-docs (both installable) run the blocks with ``exec`` inside the
pytest process, sharing its imports, working folder and onnxruntime state; a fresh process per block is the
point here, and extracting fenced blocks is one regular expression.
"""

import importlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gathermultiaxis.examples import EXAMPLE_PATH

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
FENCE = re.compile(r"^(?P<marker><!-- not run: [^>]+ -->\n)?```python\n(?P<code>.*?)^```", re.M | re.S)
SHELL_FENCE = re.compile(r"^(?P<marker><!-- not run: [^>]+ -->\n)?```sh\n(?P<code>.*?)^```", re.M | re.S)
BLOCK_TIMEOUT_S = 600
PUBLIC_PACKAGES = ["gathermultiaxis", "gathermultiaxis.ops", "gathermultiaxis.graphs"]


def fenced_blocks(fence: re.Pattern) -> list:
    blocks = []
    for page in PAGES:
        text = page.read_text()
        for match in fence.finditer(text):
            line = text.count("\n", 0, match.start("code")) + 1
            name = f"{page.relative_to(ROOT)}:{line}"
            marks = [pytest.mark.skip(reason=match["marker"].strip())] if match["marker"] else []
            blocks.append(pytest.param(match["code"], id=name, marks=marks))
    return blocks


BLOCKS = fenced_blocks(FENCE)
SHELL_BLOCKS = fenced_blocks(SHELL_FENCE)


def test_the_pages_hold_python_blocks():
    """The extraction sees the README's three examples and the pages' own (a regex that stopped matching
    would make every block test vanish silently)."""
    readme = [block for block in BLOCKS if block.id.startswith("README.md:")]
    assert len(readme) == 3 and len(BLOCKS) > len(readme)


@pytest.mark.parametrize("code", BLOCKS)
def test_python_block_runs(code: str, tmp_path: Path):
    shutil.copy(EXAMPLE_PATH, tmp_path / "model.onnx")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT_S)
    assert done.returncode == 0, f"exit {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("commands", SHELL_BLOCKS)
def test_command_block_runs(commands: str, tmp_path: Path):
    """Each line a ``gathermultiaxis`` command, run in turn in one empty folder (``python -m gathermultiaxis``
    with this interpreter, so the installed script's PATH does not matter)."""
    lines = [line for line in commands.splitlines() if line.strip()]
    assert lines and all(line.startswith("gathermultiaxis ") for line in lines), lines
    for line in lines:
        done = subprocess.run([sys.executable, "-m", "gathermultiaxis", *shlex.split(line)[1:]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
        assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def api_targets() -> set[str]:
    """The objects the API pages document (``::: dotted.path`` lines)."""
    return {line[4:].strip() for page in (DOCS / "api").glob("*.md") for line in page.read_text().splitlines()
            if line.startswith("::: ")}


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_every_public_name_has_an_api_entry(package: str):
    """A name of the package's ``__all__`` is documented where it is defined: the API pages name its defining
    module's path (``gathermultiaxis.ops.kernel.gather_multiaxis``), or its defining module documented whole
    (``gathermultiaxis.ops.variants``), or the module itself when it is one."""
    module = importlib.import_module(package)
    targets = api_targets()
    documented_names = {target.rsplit(".", 1)[-1] for target in targets}
    missing = [name for name in module.__all__ if name not in documented_names
               and getattr(getattr(module, name), "__module__", None) not in targets]
    assert not missing, f"{package}: no API entry for {missing} (docs/api/*.md)"


def test_a_docstring_that_points_to_its_module_docstring_has_it_rendered():
    """An entry of the API pages whose docstring says "see the module docstring" has its module's docstring on
    the pages too (the module documented whole, or its docstring alone: ``options: members: false``)."""
    import inspect

    targets = api_targets()
    missing = []
    for target in sorted(targets):
        module_name, _, name = target.rpartition(".")
        try:
            module = importlib.import_module(target)  # the module itself: its docstring is rendered
            continue
        except ImportError:
            pass
        documented = getattr(importlib.import_module(module_name), name)
        if "module docstring" in (inspect.getdoc(documented) or "") and module_name not in targets:
            missing.append(target)
    assert not missing, f"these entries point to their module's docstring, which no API page renders: {missing}"


def test_every_page_is_in_the_site_navigation():
    """mkdocs only logs a page left out of ``nav`` (it builds it, unlinked); a page nobody can reach fails here."""
    nav = set(re.findall(r"^\s*- (?:[^:\n]+: )?(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M))
    pages = {str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md")}
    assert pages == nav, f"pages not in nav: {sorted(pages - nav)}; nav entries with no page: {sorted(nav - pages)}"
