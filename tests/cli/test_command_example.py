"""``example OUT``: the bundled model, byte for byte; an existing file only with --force."""


from gathermultiaxis.cli import main
from gathermultiaxis.examples import EXAMPLE_PATH


def test_example_command(tmp_path, capsys):
    target = tmp_path / "example.onnx"
    assert main(["example", str(target)]) == 0
    assert target.read_bytes() == EXAMPLE_PATH.read_bytes()
    assert capsys.readouterr().out == f"wrote the bundled example model to {target}\n"
    assert main(["example", str(target)]) == 2
    assert "already exists" in capsys.readouterr().err
    target.write_bytes(b"old")
    assert main(["example", str(target), "--force", "-q"]) == 0
    assert target.read_bytes() == EXAMPLE_PATH.read_bytes() and capsys.readouterr().out == ""
