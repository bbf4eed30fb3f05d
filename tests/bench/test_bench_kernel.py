"""``gathermultiaxis bench --quick`` as a smoke test: it completes and reports every workload.
No timing assertions (the machine is shared); the numbers go to the README from full runs."""

import json

import pytest

from gathermultiaxis.bench.kernel import workloads
from gathermultiaxis.cli import main

WORKLOADS = [w.name for w in workloads(quick=True)]


def test_bench_quick_reports_every_workload(tmp_path, capsys):
    report = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--repeats", "2", "--reference-cap", "5", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    results = json.loads(report.read_text())
    assert [r["name"] for r in results] == WORKLOADS
    assert len(WORKLOADS) == 8
    for r in results:
        for key in ("kernel", "numpy", "ort builtin", "ort rewritten", "ort lowered", "bridge floor"):
            assert r["times"][key]["median_ms"] > 0, (r["name"], key)
        assert r["ratios"]["ort rewritten / builtin"] > 0
        assert r["name"] in out
    assert "| workload | kernel / NumPy |" in out
    assert "| workload | ORT lowered / builtin | ORT lowered / rewritten |" in out


def test_bench_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install -e '.[bench]')")
    picture = tmp_path / "ratios.png"
    assert main(["bench", "--quick", "--repeats", "1", "--reference-cap", "2", "--plot", str(picture)]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
