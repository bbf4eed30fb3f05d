"""ops/runtime/bridge_strings.py: strings that cannot cross the PyOp bridge intact are refused up front."""

import numpy as np
import pytest

from gathermultiaxis.ops.runtime.bridge_strings import refuse_unsafe_string_feeds


def test_feeds_that_are_not_utf8_are_refused_and_nul_only_when_asked():
    refuse_unsafe_string_feeds({"s": np.array(["a", "b"], dtype=object)}, ["s"])
    with pytest.raises(ValueError, match=r"input 's' holds bytes that are not UTF-8"):
        refuse_unsafe_string_feeds({"s": np.array([b"\xff"], dtype="S1")}, ["s"])
    feed = {"s": np.array(["a\x00b"], dtype=object)}
    refuse_unsafe_string_feeds(feed, ["s"])
    with pytest.raises(ValueError, match=r"input 's' holds a NUL character"):
        refuse_unsafe_string_feeds(feed, ["s"], nul=True)
    refuse_unsafe_string_feeds(feed, ["other"], nul=True)  # only the named inputs are checked
