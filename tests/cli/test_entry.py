"""``gathermultiaxis``: the commands in their order, the console entry points, what ``main`` returns, and
the library's log on stderr."""

import logging
import subprocess
import sys

import pytest

from gathermultiaxis.cli import build_parser, main
from gathermultiaxis.cli.entry import COMMANDS, LOG_HANDLER, show_library_log


def test_the_parser_lists_the_commands_in_order():
    commands = next(action for action in build_parser()._actions if action.dest == "command")
    assert list(commands.choices) == [command.name for command in COMMANDS] == [
        "rewrite", "lower", "webnn-check", "check", "bench", "policies", "example"]


def test_no_command_prints_the_help(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: gathermultiaxis") and "Exit status:" in out


@pytest.mark.parametrize("command", [["gathermultiaxis"], [sys.executable, "-m", "gathermultiaxis"],
                                     [sys.executable, "-m", "gathermultiaxis.cli"]])
def test_console_entry_points(command):
    version = subprocess.run(command + ["--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("gathermultiaxis ")
    usage = subprocess.run(command + ["--help"], capture_output=True, text=True, check=True)
    assert all(word in usage.stdout for word in ("rewrite", "check", "example"))


def test_bad_option_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["rewrite", "--no-such-option"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("(see gathermultiaxis rewrite --help)\n"), err


def test_show_library_log_follows_quiet_and_verbose():
    package_log = logging.getLogger("gathermultiaxis")
    level, handlers = package_log.level, list(package_log.handlers)
    try:
        for verbose, expected in [(-1, logging.ERROR), (0, logging.WARNING), (1, logging.INFO), (3, logging.DEBUG)]:
            show_library_log(verbose)
            assert package_log.level == expected
        assert package_log.handlers.count(LOG_HANDLER) == 1
    finally:
        package_log.setLevel(level)
        package_log.handlers[:] = handlers
