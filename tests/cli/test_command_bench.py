"""``bench``: the job chosen (by name, or by the spellings from before the jobs, with a note), options given
before the job kept, and the --json report never naming a file the job reads."""

import pytest
from test_command_rewrite import external_data_model

from gathermultiaxis.cli import build_parser, main
from gathermultiaxis.cli.command_bench import LEGACY_BENCH, bench_reads


def parse(*argv):
    return build_parser().parse_args(["bench", *argv])


def test_options_before_the_job_are_kept():
    args = parse("--repeats", "9", "--json", "r.json", "runtime", "--quick")
    assert (args.job, args.repeats, args.json, args.quick, args.runtime) == ("runtime", 9, "r.json", True, True)
    args = parse("runtime", "--repeats", "5")
    assert args.repeats == 5 and args.json is None


@pytest.mark.parametrize("argv, note, error", [
    (["--build-exports", "/no/such/dir"], "`bench --build-exports` is now `bench build-exports DIR`",
     "build-exports /no/such/dir: no such folder"),
    (["--end-to-end", "/no/such.onnx"], "`bench --end-to-end` is now `bench end-to-end MODEL|FOLDER...`",
     "end-to-end /no/such.onnx: no such file or folder"),
])
def test_legacy_spellings_print_a_note_and_run_the_job(capsys, argv, note, error):
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"note: {note}\ngathermultiaxis bench: {error}\n"


def test_every_legacy_spelling_is_a_bench_option():
    args = parse()
    assert all(getattr(args, flag) in (None, False) for flag in LEGACY_BENCH)


def test_bench_reads_the_models_and_their_data(tmp_path):
    model = external_data_model(tmp_path)
    report = tmp_path / "r.json"
    args = parse("end-to-end", str(tmp_path), "--json", str(report))
    assert bench_reads(args) == {}  # no report there yet: nothing it could replace
    report.write_text("{}")
    reads = bench_reads(args)
    assert reads[model] == "a model this bench reads" and reads[tmp_path / "weights.bin"].startswith("external data")
    assert reads[tmp_path / "inputs.npz"] == f"the inputs of {model}"
