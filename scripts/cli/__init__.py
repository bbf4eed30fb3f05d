"""The ``gathermultiaxis`` command line: one module per command (``command_*``), each owning its options;
the option groups they share (``option_groups``); ``entry`` assembles them. The work is done by library
functions (``graphs.rewrite_model``, ``graphs.lower_model``, ``conformance.check.run``,
``bench.kernel.run_bench``) that each command imports when it runs, so that ``--help``, ``--version`` and a
bad option load neither onnx nor the passes nor the runner."""

from .entry import build_parser, main

__all__ = ["build_parser", "main"]
