"""``policies``: which inputs --out-of-range pushes, the report's tables, the JSON report, --load-inputs."""

import json

import numpy as np
import pytest

from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH


def test_out_of_range_inputs_and_the_json_report(tmp_path, capsys):
    report = tmp_path / "policies.json"
    assert main(["policies", str(EXAMPLE_PATH), "--out-of-range", "--seed", "1", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--out-of-range pushed: token_ids (axis of 50: 52 and -53)\n")
    assert "| embedding | Gather | 9 | 1 | 1 | 2 |" in out
    written = json.loads(report.read_text())
    assert written["gathers"][0] == {"node": "embedding", "op_type": "Gather", "indices": 9, "above": 1, "below": 1,
                                   "negative_in_range": 2}


def test_load_inputs_without_a_data_set_is_bad_input(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["policies", str(EXAMPLE_PATH), "--load-inputs", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err.startswith("gathermultiaxis policies: --load-inputs ")


@pytest.mark.parametrize("seed", ["-1", "x"])
def test_seed_is_a_whole_number_of_0_or_more(capsys, seed):
    with pytest.raises(SystemExit) as exit_info:
        main(["policies", str(EXAMPLE_PATH), "--seed", seed])
    assert exit_info.value.code == 2 and "argument --seed" in capsys.readouterr().err


def test_in_range_inputs_are_exit_1(tmp_path, capsys):
    """Nothing out of range or negative: nothing to compare."""
    from gathermultiaxis.examples import example_inputs

    feeds = {name: np.abs(value) if value.dtype.kind == "i" else value for name, value in example_inputs().items()}
    np.savez(tmp_path / "in.npz", **feeds)
    assert main(["policies", str(EXAMPLE_PATH), "--load-inputs", str(tmp_path / "in.npz")]) == 1
    out = capsys.readouterr().out
    assert "| embedding | Gather | 10 | 0 | 0 | 0 |" in out and "| ONNX, ONNX Runtime | error | no output differs |" in out
