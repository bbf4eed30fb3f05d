"""The lowered round trip: ``rewrite`` then ``lower`` gives standard ONNX ops whose outputs on plain ORT equal
the original's bit for bit; ``check --lowered`` runs suites through the same ``check_case``."""

from __future__ import annotations

from typing import Iterable

import numpy as np
from onnx import ModelProto

from .cases import CheckCase, DataSet, InputOptions
from .check_case import check_case
from .check_results import CheckMode, CheckResult


def check_lowered(model: ModelProto, feeds: dict[str, np.ndarray] | Iterable[dict[str, np.ndarray]] | None = None,
                  name: str = "model", seed: int = 0) -> CheckResult:
    """Rewrite then lower ``model`` and compare it with the original on plain ORT, bit for bit, on
    ``feeds`` (one dict or several; default: generated inputs from ``seed``).

    Args:
        model: the original ``onnx.ModelProto``.
        feeds: a dict from input name to array, several such dicts, or None (generated inputs).
        name: the case's name in the result.
        seed: the seed of generated inputs.

    Returns:
        The ``CheckResult`` (``CheckMode.LOWERED``).
    """
    if feeds is None:
        data_sets = []
    else:  # inputs chosen by the caller: both sides raising on them is agreement
        data_sets = [DataSet(f, raising_compares=True) for f in ([feeds] if isinstance(feeds, dict) else feeds)]
    return check_case(CheckCase(name, model, data_sets), InputOptions(seed=seed), CheckMode.LOWERED)


__all__ = ["check_lowered"]
