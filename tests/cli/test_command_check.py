"""``check``'s own options: the values the parser writes out, --runtime and --cluster-timeout refused where
they do not apply, --mutate's and --fuzz's exclusions."""

import pytest

from gathermultiaxis.cli import build_parser, command_check, main


def test_the_parsers_written_out_values_are_the_runners():
    """The parser imports no runner: its copies of the runner's values must stay equal to them."""
    from gathermultiaxis.conformance import check_results, isolation, runtimes

    assert command_check.RUNTIME_NAMES == runtimes.RUNTIMES
    assert command_check.DEFAULT_TIMEOUT_S == check_results.DEFAULT_TIMEOUT_S
    assert command_check.DEFAULT_CONNECT_TIMEOUT_S == isolation.DEFAULT_CONNECT_TIMEOUT_S


def test_defaults():
    args = build_parser().parse_args(["check"])
    assert (args.mode, args.timeout, args.jobs, args.seed, args.argv) == (
        "default", 600.0, command_check.default_jobs(), 0, None)
    assert command_check.default_jobs() >= 1


@pytest.mark.parametrize("argv, message", [
    (["--runtime", "tract"], "--runtime tract goes with --lowered or --webnn"),
    (["--runtime", "ort", "--lowered", "--cluster", "local"], "--runtime ort runs on this machine only"),
    (["--cluster-timeout", "3"], "--cluster-timeout goes with --cluster"),
    (["--fuzz", "1", "some.onnx"], "--fuzz checks generated models and takes no PATH"),
    (["--mutate", "1", "--fuzz", "1"], "--mutate and --fuzz are two runs"),
    (["--mutate", "1", "--session"], "it takes no --session"),
    (["--fuzz", "1", "--save-dir", "/no/such/folder"], "--save-dir /no/such/folder: no such folder"),
])
def test_options_that_do_not_go_together(capsys, argv, message):
    assert main(["check", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gathermultiaxis check: ") and message in err and err.count("\n") == 1, err
