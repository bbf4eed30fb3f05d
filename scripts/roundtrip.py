"""The lowered round trip: ``rewrite`` then ``lower`` must give a model of standard ONNX ops only whose
outputs on plain ONNX Runtime (no custom op library registered) equal the original's bit for bit.

``check_lowered(model, feeds)`` runs one model; ``gathermultiaxis check --lowered`` (and
``check --fuzz N --lowered``) runs whole suites through the same ``check.check_case``: original and
lowered rewrite both with graph optimizations off, every data set compared, both raising counts as
agreement.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
from onnx import ModelProto

from .check import CheckCase, CheckResult, check_case
from .graphs.io import one_line


def lower_for_check(rewritten: ModelProto, result: CheckResult) -> tuple[ModelProto, CheckResult | None]:
    """The lowered rewrite, or a failed result when lowering raises or leaves a GatherMultiaxis node
    (plain ORT could not load that model)."""
    from .graphs import lower_model

    try:
        lowered, report = lower_model(rewritten)
    except Exception as error:  # noqa: BLE001
        result.verdict, result.detail = "failed", f"lowering raised: {one_line(error)}"
        return rewritten, result
    if report.left:
        reasons = "; ".join(f"{o.node!r}: {o.reason}" for o in report.outcomes if not o.lowered)
        result.verdict, result.detail = "failed", f"lowering left {report.left} GatherMultiaxis node(s): {reasons}"
        return rewritten, result
    return lowered, None


def check_lowered(model: ModelProto, feeds: dict[str, np.ndarray] | Iterable[dict[str, np.ndarray]] | None = None,
                  name: str = "model", seed: int = 0) -> CheckResult:
    """Rewrite then lower ``model`` and compare it with the original on plain ORT, bit for bit, on
    ``feeds`` (one dict or several; default: generated inputs from ``seed``)."""
    if feeds is None:
        data_sets = []
    elif isinstance(feeds, dict):
        data_sets = [(feeds, None)]
    else:
        data_sets = [(f, None) for f in feeds]
    return check_case(CheckCase(name, model, data_sets), seed, lowered=True)


__all__ = ["check_lowered", "lower_for_check"]
