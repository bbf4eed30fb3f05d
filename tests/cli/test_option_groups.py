"""The option groups, and the files the command line must never lose or half-replace: --in-place and another model's data
file, a --json report naming a model or a data file, a failure while the written files are moved into
place, and --input-shapes specs that are malformed (one parser for every command)."""

import os
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from test_command_rewrite import external_data_model, files_in

from gathermultiaxis import session_options
from gathermultiaxis.cli import main
from gathermultiaxis.cli.command_base import CommandError, OneLineParser
from gathermultiaxis.cli.option_groups import (JsonReportOptions, LoadInputsOptions, ModelFileOptions, SeedOptions,
                                               VerbosityOptions, exists, not_over)
from gathermultiaxis.conformance.cases import BadInput, parse_input_shapes
from gathermultiaxis.examples import EXAMPLE_PATH
from gathermultiaxis.graphs import modelfile as model_io

TABLE = np.arange(4096, dtype=np.float32).reshape(512, 8)  # external_data_model's table


def rows(path: Path, ids) -> np.ndarray:
    """What the Gather model at ``path`` returns for ``ids`` on plain ORT (its data read from its files)."""
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"ids": np.array(ids)})[0]


def two_models(folder: Path) -> tuple[Path, Path]:
    """A.onnx (data in weights.bin) and C.onnx, another model whose data file is named A.onnx.data:
    the name `rewrite A.onnx --in-place` writes A's data to."""
    a = external_data_model(folder).rename(folder / "A.onnx")
    model = onnx.load_model(str(a))
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(-TABLE, "table"))
    onnx.save_model(model, str(folder / "C.onnx"), save_as_external_data=True, location="A.onnx.data",
                    size_threshold=0)
    return a, folder / "C.onnx"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def one_line_error(capsys, *words) -> str:
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and all(w in captured.err for w in words), captured.err
    assert "wrote" not in captured.out, captured.out
    return captured.err


# -- 4: --in-place replaces only the input and its own data files ----------------------------------

@pytest.mark.parametrize("command", ["rewrite", "lower"])
def test_in_place_refuses_another_models_data_file(tmp_path, capsys, command):
    a, c = two_models(tmp_path)
    before = snapshot(tmp_path)
    assert main([command, str(a), "--in-place"]) == 2
    one_line_error(capsys, "A.onnx.data: already exists", "does not refer to it", "--force")
    assert snapshot(tmp_path) == before
    np.testing.assert_array_equal(rows(c, [1]), -TABLE[[1]])  # C still reads its own table


def test_in_place_replaces_the_inputs_own_data_file(tmp_path, capsys):
    source = external_data_model(tmp_path)
    own = tmp_path / "own.onnx"
    assert main(["rewrite", str(source), "-o", str(own), "--ops", "GatherND"]) == 0  # own.onnx.data: its data
    assert main(["rewrite", str(own), "--in-place"]) == 0
    assert files_in(tmp_path) == {"with_weights.onnx", "weights.bin", "own.onnx", "own.onnx.data"}
    rewritten = onnx.load_model(str(own))
    assert "GatherMultiaxis" in [n.op_type for n in rewritten.graph.node]
    session = ort.InferenceSession(str(own), session_options(ort.SessionOptions()), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"ids": np.array([511, 0])})[0], TABLE[[511, 0]])


@pytest.mark.parametrize("output", ["weights.bin", "B.onnx"])
def test_output_never_replaces_the_inputs_data_file(tmp_path, capsys, output):
    """-o weights.bin, or -o B.onnx when the input's data file is B.onnx.data: the input would read the
    output's data. Refused even with --force."""
    source = external_data_model(tmp_path)
    model = onnx.load_model(str(source))
    onnx.save_model(model, str(tmp_path / "in.onnx"), save_as_external_data=True,
                    location="weights.bin" if output == "weights.bin" else "B.onnx.data", size_threshold=0)
    before = snapshot(tmp_path)
    assert main(["rewrite", str(tmp_path / "in.onnx"), "-o", str(tmp_path / output), "--force"]) == 2
    one_line_error(capsys, "is external data of the input model", "choose another output name")
    assert snapshot(tmp_path) == before
    np.testing.assert_array_equal(rows(tmp_path / "in.onnx", [3]), TABLE[[3]])


# -- 5: --json never names a model or a data file the command reads or writes ----------------------

@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("report", ["out.onnx", "out.onnx.data"])
def test_json_is_not_the_output(tmp_path, capsys, report, force):
    source = external_data_model(tmp_path)
    before = snapshot(tmp_path)
    assert main(["rewrite", str(source), "-o", str(tmp_path / "out.onnx"), "--json", str(tmp_path / report),
                 *force]) == 2
    one_line_error(capsys, f"--json {tmp_path / report}: is the output", "choose another name")
    assert snapshot(tmp_path) == before


def _commands(model: Path, out: Path) -> dict[str, list[str]]:
    return {"rewrite": ["rewrite", str(model), "-o", str(out)],
            "lower": ["lower", str(model), "-o", str(out)],
            "lower --in-place": ["lower", str(model), "--in-place"],
            "check": ["check", str(model)],
            "check FOLDER": ["check", str(model.parent)],
            "policies": ["policies", str(model)],
            "webnn-check": ["webnn-check", str(model)],
            "bench lowering": ["bench", "lowering", str(model), "--no-kernels"],
            "bench end-to-end": ["bench", "end-to-end", str(model.parent)]}


@pytest.mark.parametrize("report", ["with_weights.onnx", "weights.bin"])
@pytest.mark.parametrize("command", list(_commands(Path("m.onnx"), Path("o.onnx"))))
def test_json_never_replaces_the_input_or_its_data(tmp_path, capsys, command, report):
    source = external_data_model(tmp_path)
    before = snapshot(tmp_path)
    argv = _commands(source, tmp_path / "out.onnx")[command]
    assert main([*argv, "--json", str(tmp_path / report), "--force"]) == 2
    err = one_line_error(capsys, f"--json {tmp_path / report}: is ", "choose another name")
    assert ("external data of" in err) == (report == "weights.bin"), err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["rewrite", "policies", "webnn-check"])
def test_fifo_input_is_not_opened_for_its_data_files(tmp_path, capsys, command):
    """The data files of the input are read only when a name the command writes exists; a FIFO given as
    the input is never opened for them (it would block): the usual one-line refusal."""
    fifo = tmp_path / "in.onnx"
    os.mkfifo(fifo)
    (tmp_path / "out.onnx").write_bytes(b"old")
    (tmp_path / "report.json").write_bytes(b"old")
    argv = {"rewrite": ["rewrite", str(fifo), "-o", str(tmp_path / "out.onnx")]}.get(command, [command, str(fifo)])
    assert main([*argv, "--json", str(tmp_path / "report.json"), "--force"]) == 2
    one_line_error(capsys, "a FIFO")


def test_json_never_replaces_load_inputs_or_test_data(tmp_path, capsys):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, ids=np.array([1, 2]))
    source = external_data_model(tmp_path)
    before = snapshot(tmp_path)
    for argv in (["check", str(source)], ["policies", str(source)]):
        assert main([*argv, "--load-inputs", str(inputs), "--json", str(inputs), "--force"]) == 2
        one_line_error(capsys, "is the --load-inputs file")
    assert snapshot(tmp_path) == before
    case = tmp_path / "case"
    (case / "test_data_set_0").mkdir(parents=True)
    (case / "model.onnx").write_bytes(EXAMPLE_PATH.read_bytes())
    (case / "test_data_set_0" / "input_0.pb").write_bytes(b"kept")
    assert main(["check", str(tmp_path), "--json", str(case / "test_data_set_0" / "input_0.pb"), "--force"]) == 2
    one_line_error(capsys, "is test data of")
    assert main(["check", str(tmp_path), "--json", str(case / "model.onnx"), "--force"]) == 2
    one_line_error(capsys, "is a model this check reads")
    assert (case / "test_data_set_0" / "input_0.pb").read_bytes() == b"kept"
    assert (case / "model.onnx").read_bytes() == EXAMPLE_PATH.read_bytes()


def test_plot_is_not_the_json_report(tmp_path, capsys):
    report = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--json", str(report), "--plot", str(report)]) == 2
    one_line_error(capsys, "--plot", "is the --json report")
    assert files_in(tmp_path) == set()


# -- 11: all or nothing when the files are moved into place ----------------------------------------

def _old_pair(folder: Path) -> dict[str, bytes]:
    (folder / "out.onnx").write_bytes(b"old model")
    (folder / "out.onnx.data").write_bytes(b"old data")
    return snapshot(folder)


def test_output_that_is_a_folder_is_refused_before_anything_is_written(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    source = external_data_model(tmp_path / "in")
    (tmp_path / "out.onnx").mkdir()
    (tmp_path / "out.onnx.data").write_bytes(b"old data")
    assert main(["rewrite", str(source), "-o", str(tmp_path / "out.onnx"), "--force"]) == 2
    one_line_error(capsys, "out.onnx: is a folder, not a file")
    assert (tmp_path / "out.onnx.data").read_bytes() == b"old data"
    assert files_in(tmp_path) == {"in", "out.onnx", "out.onnx.data"}


def _fail_moving(monkeypatch, target: Path, error: BaseException) -> None:
    """os.replace raises ``error`` when it would move the staged model onto ``target`` (the data file
    has been moved into place by then); every other replace (putting old files back) goes through."""
    replace = os.replace

    def failing_replace(source, destination, *args, **kwargs):
        if Path(destination) == target and Path(source).name == target.name:
            raise error
        return replace(source, destination, *args, **kwargs)

    monkeypatch.setattr(os, "replace", failing_replace)


@pytest.mark.parametrize("error", [IsADirectoryError(21, "Is a directory"), RuntimeError("anything else"),
                                   KeyboardInterrupt()])
def test_failed_move_puts_the_old_pair_back(tmp_path, monkeypatch, error):
    (tmp_path / "in").mkdir()
    model, folder = model_io.load_model(external_data_model(tmp_path / "in"), session_options=session_options)
    before = _old_pair(tmp_path)
    _fail_moving(monkeypatch, tmp_path / "out.onnx", error)
    with pytest.raises((model_io.ModelFileError, type(error))):
        model_io.save_model(model, tmp_path / "out.onnx", external_data=True, external_data_folder=folder,
                            overwrite=True)
    assert snapshot(tmp_path) == before and files_in(tmp_path) == {"in", "out.onnx", "out.onnx.data"}


def test_failed_move_on_the_command_line_keeps_the_old_pair(tmp_path, monkeypatch, capsys):
    (tmp_path / "in").mkdir()
    source = external_data_model(tmp_path / "in")
    before = _old_pair(tmp_path)
    _fail_moving(monkeypatch, tmp_path / "out.onnx", IsADirectoryError(21, "Is a directory"))
    assert main(["rewrite", str(source), "-o", str(tmp_path / "out.onnx"), "--force"]) == 2
    one_line_error(capsys, "Is a directory")
    assert snapshot(tmp_path) == before and files_in(tmp_path) == {"in", "out.onnx", "out.onnx.data"}


def test_failed_move_of_a_new_pair_leaves_nothing(tmp_path, monkeypatch):
    (tmp_path / "in").mkdir()
    model, folder = model_io.load_model(external_data_model(tmp_path / "in"), session_options=session_options)
    _fail_moving(monkeypatch, tmp_path / "out.onnx", RuntimeError("anything"))
    with pytest.raises(RuntimeError):
        model_io.save_model(model, tmp_path / "out.onnx", external_data=True, external_data_folder=folder,
                            overwrite=True)
    assert files_in(tmp_path) == {"in"}


# -- 9: --input-shapes: one parser, one line, exit 2, on every command -----------------------------

BAD_SPECS = [  # (the specs given, what the error says)
    (["x=3"], "expected NAME:[d0,d1,...]"),
    (["x:[,]"], "an empty dim"),
    (["x:[3 4]"], "dim '3 4' is not a size"),
    (["x:[99999999999999999999]"], "is over 2**63-1"),
    (["x:[-1]"], "dim '-1' is not a size"),
    (["x:[1,,2]"], "an empty dim"),
    (["x:[1.5]"], "dim '1.5' is not a size"),
    (["x:[1]", "x:[2]"], "input 'x' is given twice"),
]


def _shape_commands(out: Path) -> dict[str, list[str]]:
    return {"lower --target webnn": ["lower", str(EXAMPLE_PATH), "-o", str(out), "--target", "webnn"],
            "webnn-check": ["webnn-check", str(EXAMPLE_PATH)],
            "check": ["check", str(EXAMPLE_PATH)],
            "policies": ["policies", str(EXAMPLE_PATH)]}


@pytest.mark.parametrize("specs, problem", BAD_SPECS, ids=[" ".join(specs) for specs, _ in BAD_SPECS])
@pytest.mark.parametrize("command", list(_shape_commands(Path("o.onnx"))))
def test_malformed_input_shapes(tmp_path, capsys, command, specs, problem):
    argv = _shape_commands(tmp_path / "out.onnx")[command]
    assert main([*argv, "--input-shapes", *specs]) == 2
    one_line_error(capsys, "--input-shapes", problem)
    assert files_in(tmp_path) == set()


@pytest.mark.parametrize("spec", ["x:[,]", "x:[3 4]"])
def test_malformed_input_shapes_from_the_console_command(tmp_path, spec):
    """The installed command: no traceback (a SyntaxError escaped before)."""
    run = subprocess.run(["gathermultiaxis", "webnn-check", str(EXAMPLE_PATH), "--input-shapes", spec],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr and run.stderr.count("\n") == 1, run.stderr


def test_input_shapes_grammar():
    assert parse_input_shapes(["input_ids:[1,128]", "scalar:[]", "trailing:[2,]", "a:b:[ 3 , 4 ]", " pad:[0] "]) == {
        "input_ids": (1, 128), "scalar": (), "trailing": (2,), "a:b": (3, 4), "pad": (0,)}
    assert parse_input_shapes([f"big:[{(1 << 63) - 1}]"]) == {"big": ((1 << 63) - 1,)}
    with pytest.raises(BadInput, match="is over"):
        parse_input_shapes([f"big:[{1 << 63}]"])


@pytest.mark.parametrize("existing", ["out.onnx", "out.onnx.data"])
def test_existing_output_is_refused_before_the_work(tmp_path, monkeypatch, capsys, existing):
    from gathermultiaxis import graphs

    rewrites = []
    monkeypatch.setattr(graphs, "rewrite_model", lambda *args, **kwargs: rewrites.append(args))
    (tmp_path / "in").mkdir()
    source = external_data_model(tmp_path / "in")
    (tmp_path / existing).write_bytes(b"old")
    assert main(["rewrite", str(source), "-o", str(tmp_path / "out.onnx")]) == 2
    one_line_error(capsys, f"{existing}: already exists (pass --force")
    assert rewrites == [] and (tmp_path / existing).read_bytes() == b"old"


def parsed(groups, argv):
    parser = OneLineParser(prog="t")
    for group in groups:
        group.add_to(parser)
    return parser.parse_args(argv)


def test_verbosity_seed_and_report_groups():
    groups = (VerbosityOptions(), SeedOptions("seed"), JsonReportOptions("report"))
    assert (parsed(groups, []).verbose, parsed(groups, ["-q"]).verbose, parsed(groups, ["-vv"]).verbose) == (0, -1, 2)
    args = parsed(groups, ["--seed", "7", "--json", "r.json", "--force"])
    assert (args.seed, args.json, args.force) == (7, "r.json", True)
    with pytest.raises(SystemExit):
        parsed(groups, ["-q", "-v"])  # one or the other


@pytest.mark.parametrize("argv, message", [
    (["in.onnx"], "no output: give -o OUT.onnx"),
    (["in.onnx", "-o", "x.onnx", "--in-place"], "give either -o/--output or --in-place, not both"),
    (["in.onnx", "-o", "./in.onnx"], "the output is the input file"),
])
def test_source_and_target_refuses(argv, message):
    with pytest.raises(CommandError, match=message):
        ModelFileOptions.source_and_target(parsed([ModelFileOptions()], argv))


def test_source_and_target():
    args = parsed([ModelFileOptions()], ["in.onnx", "--in-place"])
    assert ModelFileOptions.source_and_target(args) == (Path("in.onnx"), Path("in.onnx"))
    args = parsed([ModelFileOptions()], ["in.onnx", "-o", "out.onnx"])
    assert ModelFileOptions.source_and_target(args) == (Path("in.onnx"), Path("out.onnx"))


def test_files_load_inputs_reads(tmp_path):
    assert LoadInputsOptions.files_read(None) == {}
    assert LoadInputsOptions.files_read(str(tmp_path / "x.npz")) == {tmp_path / "x.npz": "the --load-inputs file"}
    (tmp_path / "a.npz").write_bytes(b"")
    (tmp_path / "test_data_set_0").mkdir()
    (tmp_path / "test_data_set_0" / "input_0.pb").write_bytes(b"")
    (tmp_path / "notes.txt").write_bytes(b"")
    assert set(LoadInputsOptions.files_read(str(tmp_path))) == {tmp_path / "a.npz",
                                                                 tmp_path / "test_data_set_0" / "input_0.pb"}


def test_not_over_and_exists(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    assert exists(model) and exists(tmp_path / "dangling") and not exists(None) and not exists("")
    not_over("--json", str(tmp_path / "other.json"), {model: "the model"})
    not_over("--json", None, {model: "the model"})
    with pytest.raises(CommandError, match="--json .*m.onnx: is the model; choose another name"):
        not_over("--json", str(tmp_path / "." / "m.onnx"), {model: "the model"})
