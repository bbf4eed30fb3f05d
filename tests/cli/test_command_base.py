"""The bases every command shares: a ``Command`` adds its groups then its options and runs; one-line errors;
printable file names; the number types; progress lines."""

import argparse

import pytest

from gathermultiaxis.cli import build_parser
from gathermultiaxis.cli.command_base import (EXIT_STATUS, ArgGroup, Command, CommandError, OneLineParser, Output,
                                              non_negative_int, positive_float, positive_int, printable, seed_number)


class Loud(ArgGroup):
    def add_to(self, parser):
        parser.add_argument("--loud", action="store_true")


class Echo(Command):
    name, help, groups = "echo", "say it", (Loud(),)

    def add_arguments(self, parser):
        parser.add_argument("word")

    def run(self, args):
        if args.word == "bad":
            raise CommandError("bad word")
        return 3 if args.loud else 0


def test_a_command_adds_its_groups_and_options_and_runs():
    parser = OneLineParser(prog="p")
    Echo().add_to(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["echo", "hi", "--loud"])
    assert (args.word, args.loud, args.run(args)) == ("hi", True, 3)
    with pytest.raises(CommandError, match="bad word"):
        args = parser.parse_args(["echo", "bad"])
        args.run(args)


def test_bad_arguments_are_one_line(capsys):
    parser = OneLineParser(prog="p")
    parser.add_argument("--n", type=positive_int)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--n", "0"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "p: argument --n: must be at least 1, got 0 (see p --help)\n"


@pytest.mark.parametrize("parse, text, value", [(positive_int, "3", 3), (non_negative_int, "0", 0),
                                                (seed_number, "0", 0), (positive_float, "0.5", 0.5)])
def test_number_types_accept(parse, text, value):
    assert parse(text) == value


@pytest.mark.parametrize("parse, text, message", [
    (positive_int, "1.5", "expected a whole number, got '1.5'"), (non_negative_int, "-1", "must be 0 or more, got -1"),
    (seed_number, "-2", "a seed is 0 or more"), (positive_float, "0", "must be more than 0, got 0"),
    (positive_float, "nan", "must be more than 0, got nan"), (positive_float, "x", "expected a number, got 'x'")])
def test_number_types_refuse(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse(text)


def test_printable_escapes_bytes_that_are_not_utf8():
    assert printable("model\udcff.onnx") == "model\\xff.onnx" and printable("café") == "café"


def test_exit_status_is_the_epilog():
    assert build_parser().epilog == EXIT_STATUS and EXIT_STATUS.startswith("Exit status:\n  0    success")


def test_output_progress_lines(capsys):
    output = Output(0, period=0.0)
    output.progress(1, 4, "one")
    output.progress(2, None, "two")
    Output(-1, period=0.0).progress(1, 1, "quiet")
    output.end_progress()
    assert capsys.readouterr().err == "[1/4] one\n[2] two\n"
