"""bench.rewrite_profile: the rewrite command under cProfile, its time grouped by part."""

import onnx

from gathermultiaxis.bench.bigmodel import build_big_graph
from gathermultiaxis.bench.rewrite_profile import PARTS, format_profile, profile_rewrite, term_seconds


def test_a_profile_of_a_small_chain_names_every_part(tmp_path):
    source = tmp_path / "chain.onnx"
    onnx.save_model(build_big_graph(30), str(source))
    profile = profile_rewrite(source, top=5)
    seconds = dict(profile.parts)
    assert list(seconds)[:len(PARTS)] == [label for label, _ in PARTS] and len(profile.top) == 5
    # the session that reads ORT's types is the input check: ORT does not load the input again
    assert seconds["ORT loads the input (the input check, where ORT's types do not prove it)"] == 0
    for part in ("ORT's types of the replaced outputs (the input check too)",
                 "rewrite visits (replacements, provenance, value_info)",
                 "rank rules (layer 3, per node)", "load check (changed_part)"):
        assert seconds[part] > 0, part
    assert 0 < sum(seconds.values()) < profile.total
    assert "| load check (changed_part) |" in format_profile(profile)


def test_a_term_counts_only_the_calls_from_its_caller():
    callee = ("/x/graphs/modelfile.py", 1, "ort_load_error")
    stats = {callee: (2, 2, 0.1, 3.0, {("/x/graphs/modelfile.py", 9, "load_model"): (1, 1, 0.05, 1.0),
                                        ("/x/graphs/modelfile.py", 5, "loads_in_ort"): (1, 1, 0.05, 2.0)})}
    assert term_seconds(stats, ("graphs/modelfile.py", "ort_load_error", None, 1)) == 3.0
    assert term_seconds(stats, ("graphs/modelfile.py", "ort_load_error", "loads_in_ort", 1)) == 2.0
    assert term_seconds(stats, ("graphs/modelfile.py", "ort_load_error", "load_model", -1)) == -1.0
    assert term_seconds(stats, ("graphs/other.py", "ort_load_error", None, 1)) == 0.0
