"""mkdocs hook: lay out the import tree of ``gathermultiaxis`` for mkdocstrings.

The package root is scripts/ and two of its subpackages live beside it (``gathermultiaxis.ops`` is ops/,
``gathermultiaxis.graphs`` is graphs/, see pyproject's package-dir). mkdocstrings' Python handler (griffe)
reads source files and finds a package by its folder name, so it sees neither. This hook builds, under
build/docs-src/, a ``gathermultiaxis`` folder of links to scripts/'s entries plus ``ops`` and ``graphs``,
and mkdocs.yml points the handler there (``paths``). Nothing is imported or copied.
"""

from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "docs-src" / "gathermultiaxis"
PACKAGE_DIRS = {"ops": ROOT / "ops", "graphs": ROOT / "graphs"}


@event_priority(100)  # before mkdocstrings' own on_config, which drops search paths that do not exist yet
def on_config(config):
    """Lay the tree out anew before any page is read (mkdocs calls this once per build)."""
    TREE.mkdir(parents=True, exist_ok=True)
    for link in TREE.iterdir():
        link.unlink()
    for entry in sorted((ROOT / "scripts").iterdir()):
        if entry.name != "__pycache__":
            (TREE / entry.name).symlink_to(entry)
    for name, folder in PACKAGE_DIRS.items():
        (TREE / name).symlink_to(folder)
    return config
