"""Lay out the import tree of ``gathermultiaxis`` as one folder, for tools that read source files.

The package root is scripts/ and two of its subpackages live beside it (``gathermultiaxis.ops`` is ops/,
``gathermultiaxis.graphs`` is graphs/; pyproject's package-dir). Tools that find a package by its folder
name, mkdocstrings' Python handler (griffe) and mypy, see neither. This builds build/docs-src/gathermultiaxis/:
links to scripts/'s entries plus ``ops`` and ``graphs``. Nothing is imported or copied.

As an mkdocs hook (mkdocs.yml ``hooks``) it runs before every build; ``python docs/source_tree.py`` runs it
alone (before ``mypy``, whose ``mypy_path`` in pyproject.toml is that folder).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "docs-src" / "gathermultiaxis"
PACKAGE_DIRS = {"ops": ROOT / "ops", "graphs": ROOT / "graphs"}


def lay_out() -> Path:
    """Build the tree anew and return its package folder."""
    TREE.mkdir(parents=True, exist_ok=True)
    for link in TREE.iterdir():
        link.unlink()
    for entry in sorted((ROOT / "scripts").iterdir()):
        if entry.name != "__pycache__":
            (TREE / entry.name).symlink_to(entry)
    for name, folder in PACKAGE_DIRS.items():
        (TREE / name).symlink_to(folder)
    return TREE


def on_config(config):
    """mkdocs hook: lay the tree out before any page is read."""
    lay_out()
    return config


# Before mkdocstrings' own on_config, which drops search paths that do not exist yet (what
# mkdocs.plugins.event_priority(100) sets; set here so that running this file needs no mkdocs).
on_config.mkdocs_priority = 100  # type: ignore[attr-defined]

if __name__ == "__main__":
    print(lay_out())
