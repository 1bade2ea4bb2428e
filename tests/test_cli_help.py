"""--help states each option's limits, from the constant its check uses:
changing the constant changes both, so they cannot drift apart."""
import pytest

from zdinit import cli
from zdinit.families import scenarios
from zdinit.errors import UsageError


def help_of(command):
    """A command's --help, with argparse's line wrapping undone."""
    sub = cli.parser()._subparsers._group_actions[0].choices[command]
    return " ".join(sub.format_help().split())


def option_help(command, option):
    """The help text of one option of command, as given to argparse."""
    sub = cli.parser()._subparsers._group_actions[0].choices[command]
    action, = [a for a in sub._actions if option in a.option_strings]
    return action.help


@pytest.mark.parametrize("command", ["bench", "clear", "clear-check"])
def test_rounds_limit_is_in_help_and_in_the_check(monkeypatch, command):
    monkeypatch.setattr(cli, "MAX_ROUNDS", 7)
    assert "1..7 (default 2)" in option_help(command, "--rounds")
    args = cli.parser().parse_args([command, "--rounds", "8"])
    with pytest.raises(UsageError, match=r"^argument --rounds: must be 1\.\.7, not 8$"):
        cli.check_rounds(args.rounds)
    cli.check_rounds(7)


def test_n_limit_is_in_help_and_in_the_check(monkeypatch):
    monkeypatch.setattr(scenarios, "MAX_N", 7)
    assert "1..7 (default 30;" in option_help("bench", "--n")
    with pytest.raises(UsageError, match=r"^argument --n: must be 1\.\.7, not 8$"):
        scenarios.plan(["fsdax-dev"], n=8)


def test_loops_limit_is_in_help_and_in_the_check(monkeypatch):
    monkeypatch.setattr(scenarios, "MAX_N", 7)
    assert "timed mappings per method, 1..7 (default 5)" in \
        option_help("clear", "--loops")
    with pytest.raises(UsageError, match=r"^argument --loops: must be 1\.\.7, not 8$"):
        scenarios.plan_clear(loops=8)


def test_thread_limit_is_in_help_and_in_the_check(monkeypatch):
    monkeypatch.setattr(scenarios, "MAX_THREADS", 7)
    assert "NAME@THREADS (THREADS 1..7)" in option_help("bench",
                                                        "--strategies")
    assert "must be 1..7" in scenarios.check_strategy("auto@8")


@pytest.mark.parametrize("command", ["bench", "memmap-equality"])
def test_size_limits_are_in_help_and_in_the_check(monkeypatch, command):
    monkeypatch.setattr(scenarios, "MAX_SIZE", 64 << 30)
    rule = "a multiple of 128M between 256M and 64G"
    assert rule in help_of(command)
    with pytest.raises(UsageError, match=f"size: '128G' must be {rule}$"):
        scenarios.plan(["fsdax-dev"], size="128G")


def test_clear_size_limit_is_in_help_and_in_the_check(monkeypatch):
    monkeypatch.setattr(scenarios, "MAX_SIZE", 64 << 30)
    assert "a multiple of the largest page size up to 64G (default 8G)" in \
        help_of("clear")
    with pytest.raises(UsageError, match="over the limit of 64G"):
        scenarios.plan_clear(size="128G")


def test_the_limits_as_shipped():
    """What a user reads today."""
    bench = help_of("bench")
    assert "1..1000 (default 30;" in bench and "1..100 (default 2)" in bench
    assert "a multiple of 128M between 256M and 1T" in bench
    assert "1..1000 (default 5)" in help_of("clear")
