"""Bad input: one line on stderr, a non-zero exit, and nothing written.

Every zdinit run here gets a scratch cache and a PATH with no tools on it:
if a check were missing, the command would stop at its first step ("needs
a Debian system") with exit 1 instead of building anything, and the test
would fail on the exit status and the message.
"""
import argparse
import dataclasses
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from zdinit import cli
from zdinit.families import scenarios
from zdinit.kernel import bases, build
from zdinit.vm import qemu
from zdinit.errors import UsageError

# The scenarios --align applies to, as the refusal names them.
ALIGNED = ", ".join(name for name, sc in scenarios.SCENARIOS.items()
                    if sc.takes_align)


def results_entries():
    results = ROOT / "results"
    return set(results.iterdir()) if results.exists() else set()


def run_zdinit(cache, *args, **env):
    return subprocess.run([sys.executable, "-m", "zdinit", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, ZDINIT_CACHE=str(cache),
                                   PATH="/nonexistent", **env))


@pytest.mark.parametrize("args,message", [
    (["bench", "--size", "3X"], "bad size '3X'"),
    (["bench", "--size", "0"], "size: '0' must be a multiple of 128M"),
    # A value starting with '-' is refused for what it is, in the units
    # typed, not with argparse's "expected one argument".
    (["bench", "--size", "-1G"], "bad size '-1G'"),
    (["bench", "--size", "1100M"], "error: argument --size: '1100M' must be "
     "a multiple of 128M between 256M and 1T"),
    (["bench", "--size", "2T"], "size: '2T' must be a multiple of 128M "
     "between 256M and 1T"),
    (["clear", "--size", "2T"], "clear: size 2T is over the limit of 1T"),
    (["clear", "--size", "1536M"], "clear: size 1536M must be a non-zero "
     "multiple of the largest page size (1G)"),
    (["clear-check", "--size", "-1G"], "bad size '-1G'"),
    # A base without the patches a kernel needs is refused before anything
    # is built (stock first would be a wasted build), naming the bases
    # that have them and what this one lacks, from the project's root.
    (["bench", "--base", "6.12", "--kernels", "base,patched-workqueue"],
     "kernel 'patched-workqueue' exists for base 7.3 only; base 6.12 has no "
     "patched-workqueue kernel"),
    (["build", "--base", "6.12", "patched-workqueue"], "error: kernel "
     "'patched-workqueue' exists for base 7.3 only; base 6.12 has no "
     "patched-workqueue kernel"),
    (["bench", "--base", "7.3", "--scenarios", "kmem", "--kernels",
      "patched", "--contiguity"], "argument --contiguity: checks the hotplug "
     "kernels in kmem and virtio-mem only, not kernel(s) patched:"),
    (["bench", "--base", "7.3", "--scenarios", "kmem,devdax-mem", "--kernels",
      "hotplug-base", "--contiguity"], "not scenario(s) devdax-mem:"),
    (["bench", "--size", "1X"], "bad size '1X'"),
    (["bench", "--size=-4G"], "bad size '-4G'"),
    (["bench", "--size", ""], "bad size ''"),
    (["bench", "--scenarios", "fsdax-dev,bogus"], "unknown scenario 'bogus'"),
    (["bench", "--n", "0"], "argument --n: must be 1..1000, not 0"),
    (["bench", "--n", "-3"], "argument --n: must be 1..1000, not -3"),
    (["bench", "--n", "x"], "argument --n: invalid int value: 'x'"),
    (["bench", "--rounds", "0"], "argument --rounds: must be 1..100, not 0"),
    (["bench", "--kernels", "base,other"], "unknown kernel 'other'"),
    (["bench", "--strategies", "fast"], "unknown strategy 'fast'"),
    (["bench", "--verify"], "argument --verify: only the patched kernel"),
    (["bench", "--scenarios", "devdax-dev", "--size", "4G", "--align", "7M"],
     "unknown alignment '7M'"),
    (["bench", "--scenarios", "fsdax-dev", "--align", "7M"],
     "unknown alignment '7M'"),
    (["bench", "--scenarios", "devdax-mem", "--size", "1G", "--align", "1G"],
     "--size: '1G' must be a multiple of 1G and at least 2G for --align 1G"),
    # Options that would be dropped unseen: --align where no devdax rebind
    # scenario runs (kmem onlines at its default alignment), --strategies
    # where no kernel has the series' strategies.
    (["bench", "--scenarios", "fsdax-dev", "--align", "2M"],
     f"argument --align: 2M sets the alignments of {ALIGNED} only, not of "
     "--scenarios fsdax-dev: add one to --scenarios or leave out --align"),
    (["bench", "--scenarios", "kmem,fsdax-mem", "--align", "1G"],
     f"argument --align: 1G sets the alignments of {ALIGNED} only, not of "
     "--scenarios kmem,fsdax-mem"),
    (["bench", "--kernels", "base", "--strategies", "auto"],
     "--strategies chooses the series' memmap strategies, which kernel stock "
     "does not have: add patched to --kernels or leave out --strategies"),
    (["bench", "--scenarios", "kmem", "--kernels", "base,hotplug-base",
      "--strategies", "template"], "which kernels stock, hotplug-stock do "
     "not have"),
    (["bench", "--kernels", ","], "argument --kernels: no kernel given"),
    (["bench", "--kernels", ""], "argument --kernels: no kernel given"),
    (["bench", "--scenarios", ","], "argument --scenarios: no scenario given"),
    (["bench", "--strategies", " , "],
     "argument --strategies: no strategy given"),
    (["bench", "--align", ","], "argument --align: no alignment given"),
    (["bench", "--kernels", "base,"], "empty item in 'base,'"),
    (["bench", "--kernels", "patched,base,patched"],
     "kernel 'patched' given twice"),
    (["selftest", "--size", "0"], "size: '0' must be a multiple of 128M"),
    (["selftest", "--size", "3X"], "bad size '3X'"),
    (["selftest", "--size", "1G"], "--size: '1G' must be a multiple of 1G and "
     "at least 2G for devdax-dev's 1G alignment"),
    (["build", "debug9"], "unknown kernel 'debug9'"),
    (["build", ""], "unknown kernel ''"),
    (["build", "base", "base"], "kernel 'stock' given twice in 'stock stock'"),
    (["check-series", "--targets", "sparc"], "unknown target 'sparc'"),
    (["check-series", "--targets", "none,arm64"],
     "'none' cannot be combined with other targets"),
    (["check-series", "--series", "clear", "--targets", "x86_64"],
     "--targets applies to the zone-device series only: add it to --series"),
    (["check-series", "--base", "7.3", "--series", "zone-device",
      "--series", "clear"], "argument --series: given more than once"),
    (["lab", "--slow"], "unrecognized arguments: --slow"),
    # An option given twice would keep its last value without a word.
    (["bench", "--size", "4G", "--size", "8G"],
     "argument --size: given more than once; give it once (see "),
    (["bench", "--size=4G", "--size", "4G"], "argument --size: given more"),
    (["bench", "--n", "3", "--n", "4"], "argument --n: given more"),
    (["bench", "--rounds", "1", "--rounds", "2"], "argument --rounds: given"),
    (["bench", "--align", "2M", "--align", "1G"], "argument --align: given"),
    (["bench", "--scenarios", "kmem", "--scenarios", "virtio-mem"],
     "argument --scenarios: given more than once; give it once, with a "
     "comma list of them all"),
    (["bench", "--kernels", "base", "--kernels", "patched"],
     "argument --kernels: given more than once"),
    (["bench", "--strategies", "auto", "--strategies", "slow"],
     "argument --strategies: given more than once"),
    (["bench", "--base", "7.3", "--base", "6.12"], "argument --base: given"),
    (["clear", "--loops", "3", "--loops", "3"], "argument --loops: given"),
    (["clear", "--base", "7.3", "--base", "6.12"],
     "argument --base: given more than once; give it once, with a comma"),
    (["build", "--base", "6.12", "base", "--base", "7.3"],
     "argument --base: given more"),
    (["bogus"], "invalid choice: 'bogus'"),
    ([], "the following arguments are required: command"),
])
def test_usage_errors(tmp_path, args, message):
    before = results_entries()
    cache = tmp_path / "cache"
    proc = run_zdinit(cache, *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zdinit: error: ") \
        and message in lines[0], proc.stderr
    assert results_entries() == before
    assert not cache.exists(), "a refused command touched the cache"


@pytest.mark.parametrize("args", [
    ["bench", "--scenarios", "kmem", "--size", "1T"],
    ["clear", "--base", "6.12", "--pages", "2M", "--size", "64G"],
    ["clear-check", "--base", "6.12", "--pages", "2M", "--size", "64G"],
])
def test_host_memory_is_checked_before_the_lock(tmp_path, monkeypatch,
                                                capsys, args):
    """Too big for this host is the answer even while another run holds
    the cache, and it comes before apt (no tools on PATH here)."""
    from test_cache_lock import HOLDER
    cache = tmp_path / "cache"
    monkeypatch.setenv("ZDINIT_CACHE", str(cache))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(qemu, "mem_available", lambda: 23 << 30)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        assert cli.main(args) == 1
    finally:
        holder.kill()
        holder.wait()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "GiB of host memory and 23.0 GiB is " \
        "available" in lines[0] and f"at {args[-1]} " in lines[0] and \
        "use a smaller --size" in lines[0], lines


def test_every_option_has_help():
    """--help says what each option of each command does."""
    for name, sub in cli.parser()._subparsers._group_actions[0] \
            .choices.items():
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}"


@pytest.mark.parametrize("args,warning", [
    (["--align", "1G"], "warning: --align 1G applies to devdax-dev, "
     "devdax-mem only, not fsdax-dev, fsdax-mem, devprivate"),
    (["--scenarios", "devdax-mem,kmem", "--align", "2M,1G"],
     "warning: --align 2M,1G applies to devdax-mem only, not kmem"),
    (["--scenarios", "devdax-dev,devdax-mem", "--align", "2M"], None),
    (["--scenarios", "fsdax-dev"], None),
])
def test_align_beside_scenarios_it_does_not_set_is_said(capsys, args,
                                                        warning):
    """--align with some devdax scenarios and others is a plain request
    (the default scenarios are such a mix): it runs, and one line says
    where the alignments apply."""
    specs = cli.validate_bench(cli.parser().parse_args(
        ["bench", "--size", "4G", *args]))
    assert all(s.aligns == s.scenario.default_aligns for s in specs
               if not s.scenario.takes_align)
    lines = capsys.readouterr().err.strip().splitlines()
    if warning is None:
        assert lines == []
    else:
        assert len(lines) == 1 and lines[0].endswith(warning), lines


def test_every_option_with_a_value_is_taken_once():
    """Every option of every command that takes a value refuses a second
    one (SingleValue); the rest are flags, which say the same twice."""
    for name, sub in cli.parser()._subparsers._group_actions[0] \
            .choices.items():
        for action in sub._actions:
            if action.option_strings and action.nargs != 0:
                assert isinstance(action, cli.SingleValue), \
                    (name, action.option_strings)


def test_parsed_options_carry_nothing_of_the_check():
    args = cli.parser().parse_args(["bench", "--size", "4G"])
    assert args.size == "4G" and not any(
        key.startswith("_") for key in vars(args)), vars(args)


def test_unusable_cache_is_one_line(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    proc = run_zdinit(not_a_dir, "build", "base")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot use {not_a_dir} as the cache" \
        in lines[0], proc.stderr


@pytest.mark.parametrize("text", ["", ",", " , ", ",,", "base,", ",base",
                                  "base,,patched", "base,base", "Base"])
def test_comma_list_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError):
        cli.CommaList("kernel", cli.KERNELS)(text)


def test_comma_list_keeps_order_and_strips_blanks():
    parse = cli.CommaList("kernel", cli.KERNELS)
    assert parse(" patched , stock") == ["patched", "stock"]


@pytest.mark.parametrize("text", ["auto@", "auto@0", "auto@65", "auto@x",
                                  "auto@1@2", "fast", "fast@2", "@2",
                                  "auto@1,auto@1"])
def test_strategy_list_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError):
        cli.CommaList("strategy", cli.STRATEGIES,
                       scenarios.check_strategy)(text)


def test_strategy_list_takes_thread_counts():
    parse = cli.CommaList("strategy", cli.STRATEGIES,
                           scenarios.check_strategy)
    assert parse("auto@1,auto,stream@64") == ["auto@1", "auto", "stream@64"]
    assert scenarios.strategy_name("auto@1") == "auto"


def test_bench_refuses_a_bad_thread_count_before_work(tmp_path):
    proc = run_zdinit(tmp_path / "cache", "bench", "--strategies", "auto@0")
    assert proc.returncode == 2
    assert "thread count after @ must be 1..64" in proc.stderr


def test_too_big_for_host_memory_is_refused(monkeypatch):
    from zdinit.families import loop, registry, scenarios
    from zdinit.errors import ZdinitError

    monkeypatch.setattr(qemu, "mem_available", lambda: 4 << 30)
    spec, = scenarios.plan(["fsdax-mem"], size="256G")
    with pytest.raises(ZdinitError, match="host memory.*smaller --size"):
        loop.check_resources([(registry.REBIND, spec)], ["base"])


def test_a_base_without_the_series_is_refused_before_any_build(tmp_path):
    """Stock built first would be a wasted build."""
    lacking = dataclasses.replace(bases.get("7.3"), name="9.9")
    with pytest.raises(UsageError, match="^kernel 'clear' exists for bases "
                       "6.12, 7.3 only; base 9.9 has no "
                       "patches/linux-9.9-clear/series$"):
        cli.require_series(["clear-base", "clear"], lacking)


def test_a_kernel_no_base_has_is_refused_as_it_is(monkeypatch):
    """A variant naming a patch no series has is the project's bug: said
    as it is, not as a choice of base."""
    monkeypatch.setitem(build.VARIANTS, "odd", build.Variant(
        ("zdinit",), "zone-device", only=("mm-no-such-patch",)))
    with pytest.raises(UsageError, match="^base 7.3: kernel 'odd' names "
                       "patch 'mm-no-such-patch', which its zone-device "
                       "series lacks$"):
        cli.require_series(["odd"], bases.get("7.3"))
