"""The conformance runner (``gathermultiaxis check``, ``policies``): rewritten models against ORT's builtin
gathers, bit for bit. Nothing is imported here."""
