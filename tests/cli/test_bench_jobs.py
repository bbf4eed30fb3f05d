"""The jobs of ``bench``: listed in their order, one chosen per run (kernel when none is), each refusing
what it cannot use before it measures."""

import pytest

from gathermultiaxis.cli import build_parser, main
from gathermultiaxis.cli.bench_jobs import DISPATCH, JOBS, KERNEL, LOWERING, RUNTIME


def parse(*argv):
    return build_parser().parse_args(["bench", *argv])


def test_the_jobs_in_order_and_each_dispatched_once():
    bench = next(a for a in build_parser()._actions if a.dest == "command").choices["bench"]
    jobs = next(a for a in bench._actions if a.dest == "job")
    assert list(jobs.choices) == [job.name for job in JOBS] == [
        "kernel", "runtime", "end-to-end", "lowering", "build-exports", "big-graph", "big-model"]
    assert sorted(job.name for job in DISPATCH) == sorted(job.name for job in JOBS) and DISPATCH[-1] is KERNEL


@pytest.mark.parametrize("argv, job", [((), "kernel"), (("kernel",), "kernel"), (("runtime",), "runtime"),
                                       (("--runtime",), "runtime"), (("lowering", "m.onnx"), "lowering"),
                                       (("big-graph",), "big-graph"), (("--big-model",), "big-model"),
                                       (("end-to-end", "m.onnx"), "end-to-end")])
def test_the_chosen_job(argv, job):
    args = parse(*argv)
    assert next(j for j in DISPATCH if j.chosen(args)).name == job


def test_job_defaults():
    args = parse("big-graph")
    assert (args.big_graph, args.repeats) == ([10_000, 50_000], None)
    assert parse("big-graph", "20", "30", "--profile").big_graph == [20, 30]
    args = parse("big-model")
    assert (args.big_model, args.big_model_folder, args.ort_optimize) == (2.2, None, False)
    assert parse("end-to-end", "m.onnx").processes == 2 and parse("end-to-end", "m.onnx").load == 0
    assert LOWERING.chosen(parse("lowering")) and not RUNTIME.chosen(parse("lowering"))


@pytest.mark.parametrize("argv, error", [
    (["end-to-end", "/no/such.onnx"], "end-to-end /no/such.onnx: no such file or folder"),
    (["lowering", "--no-kernels"], "lowering: nothing to measure (no model given, and --no-kernels)"),
    (["big-model", "--folder", "/no/such/dir"], "big-model --folder /no/such/dir: no such folder"),
    (["big-graph", "20", "--against", "/no/such/python"], "big-graph --against /no/such/python: no such program"),
    (["build-exports", "/no/such/dir"], "build-exports /no/such/dir: no such folder"),
])
def test_jobs_refuse_before_measuring(capsys, argv, error):
    assert main(["bench", *argv]) == 2
    assert capsys.readouterr().err == f"gathermultiaxis bench: {error}\n"


def test_a_folder_without_models(tmp_path, capsys):
    assert main(["bench", "end-to-end", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"gathermultiaxis bench: end-to-end {tmp_path}: no .onnx file\n"
