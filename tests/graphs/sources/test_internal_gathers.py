"""graphs.sources.internal_gathers: com.microsoft gathers that are reported with a reason, never rewritten."""

from gathermultiaxis.graphs.sources.internal_gathers import SOURCES
from gathermultiaxis.graphs.sources.source_gather import Rewrite


def test_internal_gathers_are_never_rewritten():
    assert SOURCES and all(s.rewrite is Rewrite.NEVER and s.rule is None and s.why_not for s in SOURCES)
    assert {s.domain for s in SOURCES} == {"com.microsoft"}
    assert ("com.microsoft", "EmbedLayerNormalization") in {(s.domain, s.op_type) for s in SOURCES}
