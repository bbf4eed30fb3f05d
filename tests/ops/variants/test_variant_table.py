"""The variant registry, the example calls and the mapping table docs/variants.md shows."""

import re
from pathlib import Path

from gathermultiaxis.ops.variants import variant_steps
from gathermultiaxis.ops.variants import variant_table as v

VARIANTS_PAGE = Path(__file__).resolve().parents[3] / "docs" / "variants.md"  # the mapping table lives there


def test_docs_table_is_the_traced_mapping():
    text = VARIANTS_PAGE.read_text()
    start = text.index("| function | data → aligned |")
    table = text[start:text.index("\n\n", start)]
    assert table == v.mapping_table()


def test_each_variant_makes_exactly_one_gather_call():
    for name, call in v.example_calls():
        with variant_steps.trace() as steps:
            call()
        assert len(steps) == 1 and steps[0].variant.startswith(name), name


def test_variants_listed():
    import gathermultiaxis.ops as ops

    assert set(v.VARIANTS) == {name for name, _ in v.example_calls()}
    assert set(v.VARIANTS) <= set(ops.__all__) and all(getattr(ops, name) is v.VARIANTS[name] for name in v.VARIANTS)
    assert re.fullmatch(r"[a-z_]+", "".join(v.VARIANTS))
