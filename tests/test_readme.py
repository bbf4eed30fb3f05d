"""The README's Python example runs as written and prints what it claims."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs(capsys):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    assert len(code.strip().splitlines()) <= 12
    exec(compile(code, str(README), "exec"), {})
    printed = capsys.readouterr().out
    image = np.arange(2 * 4 * 5, dtype=np.float32).reshape(2, 4, 5)
    assert printed.strip() == str(image[:, [0, 3], [4, 1]].reshape(2, 1, 2)).strip()
