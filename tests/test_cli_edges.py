"""The command line's edges: no abbreviations, nothing taken twice, an
error that points at the command's own --help and names what the user
gave, a make target refusing the BASE it would ignore, and --version.
Unit tests: no kernel, and a scratch cache nothing may touch."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from test_cli_errors import run_zdinit
from zdinit import cli


def refusal(tmp_path, *args):
    """The one stderr line of a refused command (exit 2)."""
    proc = run_zdinit(tmp_path / "cache", *args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert not (tmp_path / "cache").exists()
    return lines[0]


@pytest.mark.parametrize("args,given", [
    (["bench", "--si", "4G"], "--si 4G"),       # not --size
    (["bench", "--kern", "patched"], "--kern patched"),
    (["clear", "--pag", "2M"], "--pag 2M"),
    (["check-series", "--no-b"], "--no-b"),
])
def test_no_abbreviation_is_taken(tmp_path, args, given):
    assert f"unrecognized arguments: {given} (see 'python3 -m zdinit " \
        f"{args[0]} --help')" in refusal(tmp_path, *args)


@pytest.mark.parametrize("args,message", [
    (["safety", "--full", "--full"], "argument --full: given more than once"),
    (["bench", "--verify", "--verify"], "argument --verify: given more"),
    (["lab", "--quick", "--quick"], "argument --quick: given more"),
    (["bench", "--strategies", "auto@01,auto@1"],
     "strategy 'auto@1' given twice in 'auto@01,auto@1'"),
    (["bench", "--strategies", "stream@2,stream@002"],
     "strategy 'stream@2' given twice"),
])
def test_a_repeated_option_or_item_is_refused(tmp_path, args, message):
    assert message in refusal(tmp_path, *args)


def test_every_flag_is_taken_once():
    """Every flag of every command refuses a second one (SingleFlag), as
    every option with a value does (SingleValue)."""
    for name, sub in cli.parser()._subparsers._group_actions[0] \
            .choices.items():
        for action in sub._actions:
            if action.option_strings and action.nargs == 0 \
                    and action.dest != "help":
                assert isinstance(action, cli.SingleFlag), \
                    (name, action.option_strings)


@pytest.mark.parametrize("args", [
    ["lab", "--bogus"], ["docs", "--check", "extra"], ["lint", "extra"],
    ["test", "--unit", "extra"], ["bench", "--n", "3", "extra"],
])
def test_a_subcommands_error_points_at_its_own_help(tmp_path, args):
    line = refusal(tmp_path, *args)
    assert line.endswith(f"(see 'python3 -m zdinit {args[0]} --help')"), line


def test_an_unknown_option_before_the_command_points_at_the_top_help(
        tmp_path):
    assert refusal(tmp_path, "--bogus", "lab").endswith(
        "(see 'python3 -m zdinit --help')")


@pytest.mark.parametrize("args,message", [
    # The default scenarios include devdax-mem, aligned 1G by default.
    (["bench", "--size", "1.5G"], "error: argument --size: '1.5G' must be a "
     "multiple of 1G and at least 2G for devdax-mem's 1G alignment"),
    (["bench", "--scenarios", "devdax-dev", "--size", "1G", "--align",
      "2M,1G"], "error: argument --size: '1G' must be a multiple of 1G and "
     "at least 2G for --align 1G"),
    (["memmap-equality", "--size", "0"], "error: argument --size: '0' must "
     "be a multiple of 128M between 256M and 1T (a size without a unit is "
     "in bytes)"),
    (["bench", "--size", "100M"], "error: argument --size: '100M' must be"),
    (["bench", "--size", "4X"], "argument --size: bad size '4X'"),
    (["bench", "--size", "100"], "argument --size: '100' must be a multiple "
     "of 128M between 256M and 1T (a size without a unit is in bytes)"),
    (["bench", "--size", "0G"], "argument --size: '0G' must be"),
    (["bench", "--size", "2T"], "argument --size: '2T' must be"),
    (["bench", "--size", "4.5G"], "argument --size: '4.5G' must be a "
     "multiple of 1G"),
    (["bench", "--n", "0"], "argument --n: must be 1..1000, not 0"),
    (["bench", "--rounds", "0"], "argument --rounds: must be 1..100, not 0"),
    (["bench", "--rounds", "-1"], "argument --rounds: must be 1..100, not -1"),
    (["clear", "--loops", "0"], "argument --loops: must be 1..1000, not 0"),
    (["bench", "--verify", "--kernels", "stock"], "argument --verify: only "
     "the patched kernel has the memmap self-check, not stock: give "
     "--kernels patched"),
    (["bench", "--verify"], "not stock, upstream (the default --kernels)"),
    # Kernels and scenarios, each said as what it is.
    (["bench", "--contiguity"], "argument --contiguity: checks the hotplug "
     "kernels in kmem and virtio-mem only, not kernel(s) stock, upstream, "
     "patched (the default --kernels) nor scenario(s) fsdax-dev, "
     "devdax-dev, devdax-mem, fsdax-mem, devprivate (the default "
     "--scenarios)"),
    (["bench", "--align", "1G", "--scenarios", "fsdax-dev"],
     "argument --align: 1G sets the alignments of devdax-dev, devdax-mem "
     "only, not of --scenarios fsdax-dev"),
    (["build", "stock", "stock"], "kernel 'stock' given twice in "
     "'stock stock'"),
    (["build", "--base", "6.12", "patched-workqueue"], "kernel "
     "'patched-workqueue' exists for base 7.3 only"),
    (["check-series", "--targets", "none,arm64"], "argument --targets: "
     "'none' cannot be combined with other targets in 'none,arm64'"),
    # What the user typed, not what its former name became.
    (["bench", "--kernels", "clear-base"], "argument --kernels: unknown "
     "kernel 'clear-base'"),
    (["clear-check", "--kernel", "patched-base"], "argument --kernel: "
     "unknown kernel 'patched-base'"),
])
def test_an_error_names_what_the_user_gave(tmp_path, args, message):
    """...and points at the command's own --help, as argparse's do."""
    line = refusal(tmp_path, *args)
    assert message in line, line
    assert line.endswith(f"(see 'python3 -m zdinit {args[0]} --help')"), line


@pytest.mark.parametrize("option", ["--versio", "-V", "--bogus=1"])
def test_an_unknown_option_alone_is_named(tmp_path, option):
    """Not 'the following arguments are required: command'."""
    assert refusal(tmp_path, option) == f"zdinit: error: unrecognized " \
        f"arguments: {option} (see 'python3 -m zdinit --help')"


def make(*args):
    # As a user types it: under an outer make (make test runs these tests)
    # the inherited MAKELEVEL and MAKEFLAGS would make it print its
    # directory and take the outer run's flags.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "-n", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)


@pytest.mark.parametrize("target", ["test", "test-full", "test-unit", "lint",
                                    "lab", "docs"])
def test_a_make_target_without_a_base_refuses_base(target):
    proc = make(target, "BASE=6.12")
    assert proc.returncode != 0 and proc.stdout == ""
    assert f"make {target} takes no BASE" in proc.stderr, proc.stderr
    assert make(target).returncode == 0


@pytest.mark.parametrize("target", ["setup", "bench", "bench-clear",
                                    "memmap-equality", "safety",
                                    "check-series"])
def test_a_make_target_with_a_base_passes_it_on(target):
    proc = make(target, "BASE=6.12")
    assert proc.returncode == 0 and "--base 6.12" in proc.stdout, proc


def test_version_prints_the_revision(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "zdinit", "--version"],
                          cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ,
                                   ZDINIT_CACHE=str(tmp_path / "cache")))
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("zdinit ") and \
        head.startswith(proc.stdout.split()[1][:12]), proc.stdout


def test_version_outside_a_checkout_says_so(tmp_path, monkeypatch):
    from zdinit import paths
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    assert cli.revision() == "unknown (not a git checkout)"
