"""How the package looks up private onnxruntime and onnxruntime-extensions APIs: a group's names all at once, so a
release that renamed one gets one ``PrivateAPIError`` naming what is missing and the installed and tested
versions, never a mid-run ``AttributeError``, a crash or a different result. Imports no onnxruntime."""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

# The versions the private names were checked on (pyproject's lower bounds and what CI installs).
TESTED_VERSIONS = "onnxruntime 1.26 to 1.32 and onnxruntime-extensions 0.12, 0.13 and 0.15"


class PrivateAPIError(ImportError):
    """The installed onnxruntime or onnxruntime-extensions lacks a private API gathermultiaxis relies on."""


def installed_versions() -> str:
    """The installed onnxruntime and onnxruntime-extensions versions, as an error message names them."""
    found = []
    for distribution in ("onnxruntime", "onnxruntime-extensions"):
        try:
            found.append(f"{distribution} {version(distribution)}")
        except PackageNotFoundError:
            found.append(f"{distribution} (not installed)")
    return ", ".join(found)


class Lookup:
    """Looks up dotted names for one purpose, collecting every missing one before raising once (``done``)."""

    def __init__(self, purpose: str):
        self.purpose = purpose
        self.missing: list[str] = []

    def module(self, name: str) -> Any:
        """The module ``name``, or None (recorded as missing)."""
        try:
            return importlib.import_module(name)
        except ImportError:
            self.missing.append(name)
            return None

    def attribute(self, owner: Any, dotted: str, owner_name: str) -> Any:
        """``owner.<dotted>``, or None (recorded as missing, named ``owner_name.dotted``)."""
        value = owner
        for part in dotted.split("."):
            if value is None or not hasattr(value, part):
                self.missing.append(f"{owner_name}.{dotted}")
                return None
            value = getattr(value, part)
        return value

    def done(self) -> None:
        """Raise one PrivateAPIError naming everything missing, if anything is."""
        if self.missing:
            raise PrivateAPIError(
                f"gathermultiaxis cannot {self.purpose}: the installed versions ({installed_versions()}) lack "
                f"{', '.join(self.missing)}. gathermultiaxis was tested with {TESTED_VERSIONS}; install one of "
                "those, or a gathermultiaxis release that supports yours")


__all__ = ["TESTED_VERSIONS", "Lookup", "PrivateAPIError", "installed_versions"]
