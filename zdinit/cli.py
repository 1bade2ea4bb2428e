"""zdinit command line: thin wrappers around the modules that do the work.

Every option is checked before anything is installed, built or booted; a
command that writes to the cache holds its lock for the whole run.
"""
import argparse
import contextlib
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import time

from zdinit import cache, deps, lint, paths, progress
from zdinit.checks import clear_checks, memmap_equality, safety
from zdinit.docs import (changelog_numbers, commands, links, tables,
                         typed_numbers)
from zdinit.families import clearing, loop, registry, scenarios, summary
from zdinit.kernel import bases, build, cross, series, source, under_test
from zdinit.lab import memmap_stores
from zdinit.vm import qemu
from zdinit.errors import UsageError, ZdinitError

# Each unpatched kernel is called stock; build.FORMER_NAMES are its
# first names ("base"), accepted too.
KERNELS = ("stock", "patched")
# hotplug-stock: stock plus the contiguity count, for kmem and
# virtio-mem.
HOTPLUG_KERNELS = ("hotplug-stock",)
# Stock, upstream's 7.4 method and stock with onlining patches: no
# strategy knob, they run with the kernel's own code alone.
KERNELS_WITHOUT_STRATEGIES = ("stock", "upstream") + HOTPLUG_KERNELS
# The bench's default, of the kernels the base has: stock, upstream's
# 7.4 method and the series.
BENCH_DEFAULT = ("stock", "upstream", "patched")
# patched-workqueue (7.3): the series fanning out through work items of
# its own instead of padata.
BENCH_KERNELS = BENCH_DEFAULT + ("patched-workqueue",) + HOTPLUG_KERNELS
VARIANTS = tuple(build.VARIANTS)
FIRST_NAMES_HELP = ("the stock kernels' first names ("
                    + ", ".join(build.FORMER_NAMES) + ") are accepted")
STRATEGIES = scenarios.STRATEGIES
# The bench's default: upstream 7.4's method (template and streaming
# stores everywhere, one thread) and the series' own choice of method
# and threads.
BENCH_STRATEGIES = (scenarios.UPSTREAM_METHOD, "auto", scenarios.ON_DEMAND)
# The most boots per kernel (bench, clear) or rounds per check
# (clear-check) one --rounds asks for.
MAX_ROUNDS = 100


def one_of(what, choices, text):
    """One of choices, or an argparse error saying which there are."""
    if text not in choices:
        raise argparse.ArgumentTypeError(
            f"unknown {what} '{text}'; choose from " + ", ".join(choices))
    return text


class CommaList:
    """argparse type: a comma list of choices, at least one, none twice;
    with check, items are whatever check (one line why not, or None)
    accepts; with each, what each item becomes.  SingleValue knows an
    option of this type by its class, to say how to give several."""

    def __init__(self, what, choices, check=None, each=lambda item: item,
                 rename=lambda item: item):
        self.what, self.choices, self.check = what, choices, check
        self.each, self.rename = each, rename

    def __call__(self, text):
        typed = [item.strip() for item in text.split(",")]
        items = [self.rename(item) for item in typed]
        if not any(items):
            raise argparse.ArgumentTypeError(
                f"no {self.what} given; choose from "
                + ", ".join(self.choices))
        for item, as_typed in zip(items, typed):
            if not item:
                raise argparse.ArgumentTypeError(f"empty item in '{text}'")
            why = self.check(as_typed) if self.check else None
            if why:
                raise argparse.ArgumentTypeError(why)
            if not self.check and item not in self.choices:
                # What the user typed, not what a former name became.
                one_of(self.what, self.choices, as_typed)
            if items.count(item) > 1:
                raise argparse.ArgumentTypeError(
                    f"{self.what} '{item}' given twice in '{text}'")
        return [self.each(item) for item in items]



def plain_threads(strategy):
    """'auto@01' as 'auto@1', so that a strategy given twice in two
    spellings is seen as given twice."""
    name, at, threads = strategy.partition("@")
    return f"{name}@{int(threads)}" if at and threads.isdigit() else strategy


def kernel_choice(choices):
    """argparse type: one kernel of choices, by its name or first name."""
    def choice(text):
        name = build.canonical(text)
        return name if name in choices else one_of("kernel", choices, text)
    return choice


def base_option(text):
    """argparse type: a kernel base by name."""
    try:
        return bases.get(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


# A comma list of kernel bases, none twice.
base_list = CommaList("kernel base", tuple(bases.BASES), each=base_option)


def require_series(variants, base, contiguity=False):
    """Before anything is locked, installed or built: every kernel the
    command builds must have its patches on base (a stock kernel built
    first would otherwise be wasted)."""
    for variant in variants:
        try:
            build.require_patches(variant, base, contiguity)
        except ZdinitError as err:
            raise UsageError(str(err)) from None


def wanted(variant, base, strategies, hotplug_strategies=None,
           contiguity=False):
    """A kernel under_test.prepare() builds.  hotplug_strategies: what
    the patched kernel onlines with, each in turn (None: the kernel's
    choice, not touching the knob); contiguity: build it with the
    contiguity check."""
    variant = build.canonical(variant)
    stock = variant in KERNELS_WITHOUT_STRATEGIES
    return {"variant": variant, "base": base,
            "strategies": ("default",) if stock else strategies,
            "hotplug_strategies": ("default",) if stock or not
            hotplug_strategies else hotplug_strategies,
            "contiguity": contiguity}


def check_safety(args):
    if args.stock_record and args.record_stock:
        raise UsageError("argument --record-stock: it records what stock "
                         "does, which --stock-record does not boot; give "
                         "one of them")
    if args.stock_record:
        safety.recorded_outcomes(args.base)
    args.variants = sorted({v for job in safety.jobs(args.base, args.full,
                                                     args.stock_record)
                            for v in job.kernels})
    require_series(args.variants, args.base)


def cmd_safety(args):
    variants = args.variants
    with cache.lock(args.command_line):
        deps.ensure_packages()
        targets, accel, _ = under_test.prepare(
            [wanted(v, args.base, scenarios.base_strategies(args.base)
                    if v in ("patched", "debug", "held")
                    else ("auto",)) for v in variants])
        final = safety.run(dict(zip(variants, targets)), accel, args.base,
                           full=args.full, stock_record=args.stock_record,
                           record=args.record_stock)
    print(f"\nresults: {final} (results/latest)")


def cmd_setup(args):
    with cache.lock(args.command_line):
        deps.ensure_packages()
        source.pristine_tree(args.base)
    progress.say(f"setup complete (base {args.base.name})")


def check_build(args):
    twice = [v for v in args.variants if args.variants.count(v) > 1]
    if twice:
        raise UsageError(f"kernel '{twice[0]}' given twice in '"
                         + " ".join(args.variants) + "'")
    require_series(args.variants, args.base)


def cmd_build(args):
    with cache.lock(args.command_line):
        deps.ensure_packages()
        for name in args.variants:
            kernel = build.build(name, args.base)
            print(f"{name}: {kernel.bzimage} ({kernel.release})")


def check_series_targets(args):
    """The targets the whole series is built for: --targets, or by default
    arm64 and i386 after building each prefix and none without."""
    if args.targets is None:
        return () if args.no_build else cross.DEFAULT_TARGETS
    if "none" in args.targets:
        if len(args.targets) > 1:
            raise UsageError("argument --targets: 'none' cannot be "
                             "combined with other targets in '"
                             + ",".join(args.targets) + "'")
        return ()
    if not any(series.SERIES[name].cross_build for name in args.series):
        raise UsageError("--targets applies to the zone-device series "
                         "only: add it to --series or leave out --targets")
    return tuple(args.targets)


def base_series(args):
    """--series, or every series of --base; one a base lacks is refused
    naming the bases that have it."""
    if args.series is None:
        return list(args.base.stacks)
    for name in args.series:
        if name not in args.base.stacks:
            having = [b.name for b in bases.BASES.values()
                      if name in b.stacks]
            raise UsageError(f"base {args.base.name} has no {name} series; "
                             f"it is base {', '.join(having)}'s")
    return args.series


def check_check_series(args):
    args.series = base_series(args)
    args.targets = check_series_targets(args)
    # Every stack's structure before anything is locked, installed or
    # built: a refusal of the last stack must not wait for the first's
    # builds.
    args.parts = {name: series.checked_stack(name, args.base)
                  for name in args.series}
    # And every number of their changelogs and cover letters a run backs.
    for name in args.series:
        for part, _ in args.parts[name]:
            problems = changelog_numbers.check_dir(
                args.base.series_dir(part))
            if problems:
                raise ZdinitError(f"base {args.base.name} series "
                                  f"{part.name}: {problems[0]} "
                                  f"({len(problems)} in all; python3 -m "
                                  "zdinit docs --check)")


def cmd_check_series(args):
    targets, checked = args.targets, args.parts
    with cache.lock(args.command_line):
        deps.ensure_packages()
        for name in args.series:
            results, other_arches = series.check(name, args.base,
                                                 build_each=not args.no_build,
                                                 targets=targets,
                                                 parts=checked[name])
            for result in results:
                built = (f", built in {result.build_s:.0f}s" if result.build_s
                         else "")
                print(f"{args.base.name} {name}/{result.patch}: applies, checkpatch "
                      f"{result.checkpatch}{built}")
            for line in other_arches:
                print(line)


def check_rounds(rounds):
    if not 1 <= rounds <= MAX_ROUNDS:
        raise UsageError(f"argument --rounds: must be 1..{MAX_ROUNDS}, "
                         f"not {rounds}")


def check_ab(specs, rounds):
    """--timing ab arms the probes in rounds 1, 4, 5, 8, 9, ... of each
    boot (guest/trace.sh): only an even number of rounds a boot has as
    many with them as without."""
    for spec in (s for s in specs if s.timing == "ab"):
        shares = loop.split_rounds(spec.n, rounds)
        if any(share % 2 for share in shares):
            per_boot = "/".join(map(str, shares))
            raise UsageError(
                f"argument --timing ab: {spec.scenario.name}'s --n "
                f"{spec.n} over --rounds {rounds} gives {per_boot} a boot; "
                "each boot needs an even number, as many with the probes "
                "as without (on, off, off, on, ...), e.g. --n "
                f"{4 * len(shares)} --rounds {len(shares)}")


def bench_strategies(base, icount=False):
    """The series' strategies the bench runs by default on base; with
    --icount, not demand (check_icount)."""
    return tuple(s for s in BENCH_STRATEGIES
                 if scenarios.strategy_name(s) in scenarios.base_strategies(base)
                 and not (icount and s == scenarios.ON_DEMAND))


def check_strategies(strategies, kernels):
    """--strategies with no kernel that has them would be dropped unseen."""
    if strategies and set(kernels) <= set(KERNELS_WITHOUT_STRATEGIES):
        raise UsageError(
            "--strategies chooses the series' memmap strategies, which "
            f"kernel{'s' if len(kernels) > 1 else ''} {', '.join(kernels)} "
            f"{'do' if len(kernels) > 1 else 'does'} not have: add patched "
            "to --kernels or leave out --strategies")


def check_align(aligns, specs):
    """--align sets the alignments of the devdax rebind scenarios alone:
    refused where none of them runs; where others run beside them, a
    warning names those it sets (bench --align 1G with the default
    scenarios is a plain request)."""
    if not aligns:
        return
    aligned = [s.scenario.name for s in specs if s.scenario.takes_align]
    others = [s.scenario.name for s in specs if not s.scenario.takes_align]
    if not aligned:
        raise UsageError(
            f"argument --align: {','.join(aligns)} sets the alignments of "
            + ", ".join(name for name, sc in scenarios.SCENARIOS.items()
                        if sc.takes_align)
            + " only, not of --scenarios " + ",".join(others)
            + ": add one to --scenarios or leave out --align")
    if others:
        progress.say(f"warning: --align {','.join(aligns)} applies to "
                     f"{', '.join(aligned)} only, not {', '.join(others)}")


def kernel_list(names):
    """names for --help, each with the bases it is for where not every."""
    return ", ".join(
        name + (f" ({', '.join(build.VARIANTS[name].only_on)} only)"
                if build.VARIANTS[name].only_on else "") for name in names)


def check_icount(specs, strategies):
    """bench --icount: TCG counting instructions, so never KVM, and the
    rebind scenarios alone, whose tables it labels in instructions; not
    the memmap built on demand, whose background build the kernel times
    in jiffies, which do not count the instructions of vCPUs that run in
    turn."""
    if scenarios.ON_DEMAND in map(scenarios.strategy_name, strategies or ()):
        raise UsageError("argument --icount: the strategy demand is timed "
                         "by its background build's jiffies, which do not "
                         "count instructions: leave demand out of "
                         "--strategies (--icount runs without it by "
                         "default)")
    if os.environ.get("ZDINIT_ACCEL") == "kvm":
        raise UsageError("argument --icount: counts instructions under TCG and cannot "
                         "run with ZDINIT_ACCEL=kvm: unset it or leave out "
                         "--icount")
    other = [s.scenario.name for s in specs if s.scenario.hotplug]
    if other:
        raise UsageError("argument --icount: counts the instructions of the "
                         "rebind scenarios, not " + ", ".join(other))


def validate_bench(args):
    """What argparse cannot check alone; returns the scenarios' RunSpecs
    (also args.specs), each kernel's patches on the base checked."""
    kernels_given = args.kernels is not None
    if args.kernels is None:
        args.kernels = [k for k in BENCH_DEFAULT
                        if args.base.name in build.bases_with(k)]
    # A refusal names the kernels as given, or says they are the default.
    default_kernels = "" if kernels_given else " (the default --kernels)"
    unchecked = [k for k in args.kernels if k in KERNELS_WITHOUT_STRATEGIES]
    if args.verify and unchecked:
        raise UsageError("argument --verify: only the patched kernel has "
                         f"the memmap self-check, not {', '.join(unchecked)}"
                         f"{default_kernels}: give --kernels patched")
    check_rounds(args.rounds)
    check_strategies(args.strategies, args.kernels)
    scenarios.check_base_strategies(args.strategies, args.base)
    specs = scenarios.plan(args.scenarios, args.size, args.n, args.align,
                           timing=args.timing)
    check_align(args.align, specs)
    check_ab(specs, args.rounds)
    if args.contiguity:
        other_kernels = [k for k in args.kernels if k not in HOTPLUG_KERNELS]
        other_scenarios = [s.scenario.name for s in specs
                           if not s.scenario.zones]
        default_scenarios = " (the default --scenarios)" \
            if args.scenarios == list(scenarios.DEFAULT_BENCH) else ""
        wrong = ([f"kernel(s) {', '.join(other_kernels)}{default_kernels}"]
                 if other_kernels else []) \
            + ([f"scenario(s) {', '.join(other_scenarios)}"
                f"{default_scenarios}"] if other_scenarios else [])
        if wrong:
            raise UsageError("argument --contiguity: checks the hotplug "
                             "kernels in kmem and virtio-mem only, not "
                             + " nor ".join(wrong) + ": give --kernels "
                             "hotplug-stock --scenarios kmem,virtio-mem")
    if args.icount:
        check_icount(specs, args.strategies)
    hotplug_only = [k for k in args.kernels if k in HOTPLUG_KERNELS]
    if hotplug_only:
        other = [s.scenario.name for s in specs if not s.scenario.hotplug]
        if other:
            raise UsageError(f"--kernels {hotplug_only[0]} is for the onlining "
                             "scenarios (kmem, virtio-mem), not "
                             + ", ".join(other))
    require_series(args.kernels, args.base, args.contiguity)
    args.specs = specs
    return specs


def cmd_bench(args):
    specs = args.specs
    plan = [(registry.of_spec(spec), spec) for spec in specs]
    loop.check_resources(plan, args.kernels)
    with cache.lock(args.command_line):
        deps.ensure_packages()
        # Onlining follows --strategies only where it is given.
        targets, accel, why = under_test.prepare(
            [wanted(k, args.base, args.strategies
                    or bench_strategies(args.base, args.icount),
                    args.strategies, args.contiguity) for k in args.kernels],
            icount=args.icount)
        final, results = loop.measure(plan, targets, args.rounds, accel,
                                        why, args.command_line,
                                        started=args.started,
                                        verify=args.verify)
    print(summary.text_report(results))
    print(f"\nresults: {final} (results/latest)")


def clear_spec(args, kernels):
    """The clear family's options, checked (args.spec, args.pairs).
    kernels: (base, variant) pairs."""
    check_rounds(args.rounds)
    on_bases = list(dict.fromkeys(base for base, _ in kernels))
    args.spec = scenarios.plan_clear(args.pages, args.size,
                                     getattr(args, "loops", None),
                                     args.preempt, on_bases)
    for base in on_bases:
        require_series([v for b, v in kernels if b == base], base)
    args.pairs = kernels


def clear_resources(args):
    """The host must back the guest of each kernel: refused before the
    lock, but not at parse level (check()), which is the host's."""
    loop.check_resources([(registry.CLEARING, args.spec)],
                         [v for _, v in args.pairs])
    return args.spec


def check_clear(args):
    clear_spec(args, clearing.kernel_pairs(args.kernels, args.base))


def cmd_clear(args):
    kernels = args.pairs
    spec = clear_resources(args)
    with cache.lock(args.command_line):
        deps.ensure_packages()
        targets, accel, why = clearing.prepare(spec, kernels, with_perf=True)
        final, results = loop.measure(
            [(registry.CLEARING, spec)], targets, args.rounds, accel, why,
            args.command_line, started=args.started,
            name=lambda k: clearing.kernel_name(k.base, k.variant))
    print(summary.text_report(results))
    print(f"\nresults: {final} (results/latest)")


def check_clear_check(args):
    if args.record_stock and not args.selftests:
        raise UsageError("argument --record-stock: needs --selftests")
    clear_spec(args, [(args.base, args.kernel)])


def cmd_clear_check(args):
    spec = clear_resources(args)
    with cache.lock(args.command_line):
        deps.ensure_packages()
        lines = clear_checks.check_zero(spec, args.rounds, args.kernel, args.base)
        if args.selftests:
            lines += clear_checks.check_selftests(
                spec.models(args.base), args.base,
                record=clear_checks.STOCK_SELFTESTS if args.record_stock else None)
    for line in lines:
        print(line)


def check_memmap_equality(args):
    args.specs = memmap_equality.altmap_specs(args.size)
    require_series(["patched"], args.base)


def cmd_memmap_equality(args):
    specs = args.specs
    with cache.lock(args.command_line):
        deps.ensure_packages()
        (target,), accel, _ = under_test.prepare(
            [wanted("patched", args.base,
                    scenarios.base_strategies(args.base))])
        lines = memmap_equality.run(target, accel, specs)
    for line in lines:
        print(line)
    # Any check that fails raises before this.
    print(f"\nmemmap equality passed: all {len(lines)} checks above, on "
          f"{target.kernel.release}")


def cmd_lab(args):
    # No cache lock and no kernel toolchain: the lab builds in lab/ and
    # never reads the cache.
    deps.ensure_packages(deps.LAB_PACKAGES)
    deps.offer_packages(deps.PLOT_PACKAGES, "the lab's plots")
    print(memmap_stores.run(quick=args.quick, reserve_hugetlb=args.reserve_hugetlb))


# pytest -m of each selection: make test, make test-full, make test-unit.
TEST_MARKERS: dict[str, list[str]] = {
    "default": ["-m", "not full"], "full": [], "unit": ["-m", "not e2e"]}


def cmd_test(args):
    """The test suite as one run: with end-to-end tests, under the cache
    lock from the package check to the last test; unit tests alone take
    neither the lock nor the kernel toolchain."""
    selection = "full" if args.full else "unit" if args.unit else "default"
    pytest = [sys.executable, "-m", "pytest", "-v",
              *TEST_MARKERS[selection], str(paths.TESTS)]
    # The lint goes before any test: a finding fails the run in seconds.
    if args.unit:
        deps.ensure_packages(deps.UNIT_PACKAGES)
        lint.run(install=False)
        rc = subprocess.run(pytest).returncode
    else:
        with cache.lock(args.command_line):
            deps.ensure_packages()
            lint.run(install=False)
            for base in bases.BASES.values():
                source.pristine_tree(base)
            rc = subprocess.run(pytest, pass_fds=cache.held_fds()).returncode
    if rc != 0:
        raise ZdinitError(f"the {selection} test selection failed (pytest "
                          f"exit {rc}; its summary is above)", exit_code=rc)


def cmd_lint(args):
    lint.run()
    print("lint: pyflakes and mypy found nothing")


def cmd_docs(args):
    # No cache and no lock: it reads the committed runs and the pages.
    stale, count = tables.update(check=args.check)
    if args.check and stale:
        raise ZdinitError("tables differ from what their runs render in "
                          + tables.stale_text(stale)
                          + " (run 'python3 -m zdinit docs')")
    # The numbers typed beside the tables, the commits the pages cite and
    # the commands they show and the numbers of the patches' changelogs
    # are what the tables cannot re-render: a check reports them too.
    # And the links between the pages, which nothing renders.
    problems = (typed_numbers.unbacked() + typed_numbers.missing_commits()
                + commands.refusals(check) + changelog_numbers.unbacked()
                + links.broken())
    if args.check and problems:
        raise ZdinitError(f"{len(problems)} number(s), commit(s), "
                          "command(s) or link(s) in the pages that no run "
                          f"backs, zdinit refuses or nothing answers, "
                          f"first: {problems[0]}")
    done = "checked" if args.check else "rendered"
    print(f"{done} {count} tables" + (f"; changed {', '.join(stale)}"
                                      if stale and not args.check else "")
          + (f"; {len(problems)} number(s), commit(s), command(s) or "
             "link(s) no run backs, zdinit refuses or nothing answers"
             if problems and not args.check
             else ""))


def cmd_capture_vectors(args):
    with cache.lock(args.command_line):
        deps.ensure_packages()
        (target,), accel, _ = under_test.prepare(
            [wanted("stock", args.base, ("default",))])
        print(memmap_stores.capture_vectors(target, accel))


# Where SingleValue notes, during one parse, the options already given;
# OneLineParser takes it out of the parsed namespace.
_GIVEN = "_zdinit_options_given"


def given_once(action, namespace):
    """Refuse an option given a second time in one parse: argparse would
    keep the last value and drop the others without a word (--size 4G
    --size 8G), or take a flag twice (--full --full)."""
    given = vars(namespace).setdefault(_GIVEN, set())
    if action.option_strings:
        if action.dest in given:
            raise argparse.ArgumentError(
                action, "given more than once; give it once"
                + (", with a comma list of them all"
                   if isinstance(action.type, CommaList) else ""))
        given.add(action.dest)


class SingleValue(argparse.Action):
    """argparse's plain store, for every argument of every command, except
    that an option given twice is refused (given_once)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given_once(self, namespace)
        setattr(namespace, self.dest, values)


class SingleFlag(argparse._StoreTrueAction):
    """argparse's store_true, refused the second time (given_once)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given_once(self, namespace)
        super().__call__(parser, namespace, values, option_string)


def revision():
    """The checkout's revision as git describes it, or why there is none."""
    try:
        rev = loop.git_rev()      # what every run records
    except FileNotFoundError:
        return "unknown (git is not installed)"
    return "unknown (not a git checkout)" if rev == "unknown" else rev


class Version(argparse.Action):
    """--version: the revision, found only when asked for."""

    def __init__(self, option_strings, dest, help=None):
        super().__init__(option_strings, dest, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"zdinit {revision()}")
        parser.exit(0)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in the same one-line form as every other error; an
    argument added without an action is a SingleValue."""

    def __init__(self, *args, **kwargs):
        # No abbreviations: '--si 4G' is not '--size 4G'.
        super().__init__(*args, **dict(kwargs, allow_abbrev=False))
        # Registered for each parser: every subcommand's parser is one too.
        self.register("action", None, SingleValue)
        self.register("action", "store", SingleValue)
        self.register("action", "store_true", SingleFlag)

    def parse_known_args(self, args=None, namespace=None):
        parsed, extras = super().parse_known_args(args, namespace)
        vars(parsed).pop(_GIVEN, None)
        return parsed, extras

    def parse_args(self, args=None, namespace=None):
        """What no option took is refused by the subcommand's parser, so
        that its error points at that command's --help."""
        words = list(sys.argv[1:] if args is None else args)
        self.refuse_unknown_leading_options(words)
        parsed, extras = self.parse_known_args(words, namespace)
        if extras:
            self.owner(parsed, words, extras).error(
                "unrecognized arguments: " + " ".join(extras))
        return parsed

    def refuse_unknown_leading_options(self, words):
        """An option this parser does not know, before any command name
        (--versio, -V), is refused as such: argparse would first miss
        the command and say only that one is required."""
        commands = [name for action in self._actions
                    if isinstance(action, argparse._SubParsersAction)
                    for name in action.choices]
        if not commands:
            return
        for word in words:
            if word in commands or word == "--":
                return
            if word.startswith("-") and \
                    word.split("=")[0] not in self._option_string_actions:
                self.error(f"unrecognized arguments: {word}")

    def owner(self, parsed, words, extras):
        """The parser of the subcommand parsed names, unless an extra
        comes before the command's name: then this one."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                name = getattr(parsed, action.dest, None)
                before = words[:words.index(name)] if name in words else words
                if name in action.choices and \
                        not set(extras) & set(before):
                    return action.choices[name]
        return self

    def error(self, message):
        self.exit(2, f"zdinit: error: {message} (see '{self.prog} --help')\n")


def add_clear_options(p, size):
    p.add_argument("--pages", default=",".join(scenarios.CLEAR.default_pages),
                   type=CommaList("page size", tuple(scenarios.CLEAR_PAGES)),
                   help="comma list of: " + ", ".join(scenarios.CLEAR_PAGES)
                   + " (default " + ",".join(scenarios.CLEAR.default_pages)
                   + ")")
    default_size = size or scenarios.size_text(scenarios.CLEAR.default_size)
    p.add_argument("--size", default=size, help="bytes mapped per page "
                   "size, a multiple of the largest page size up to "
                   f"{scenarios.size_text(scenarios.MAX_SIZE)} (default "
                   f"{default_size})")
    p.add_argument("--preempt",
                   type=CommaList("preemption model", scenarios.PREEMPT_MODELS),
                   help="comma list of the models the base boots with ("
                   + "; ".join(f"{b.name}: {', '.join(b.preempt_models)}"
                               for b in bases.BASES.values())
                   + "); default per base: "
                   + "; ".join(f"{b.name}: {','.join(b.clear_preempt)}"
                               for b in bases.BASES.values()))
    return p


def add_base_option(p):
    p.add_argument("--base", default=bases.get(bases.DEFAULT),
                   type=base_option,
                   help=f"kernel base (default {bases.DEFAULT}): "
                   + bases.help_text())


def parser():
    p = OneLineParser(
        prog="python3 -m zdinit",
        description="Measure and test ZONE_DEVICE memmap initialisation.")
    # A command's check refuses, before any work, what argparse cannot:
    # kernels without patches on the base, options that contradict.
    p.set_defaults(validate=lambda args: None)
    p.add_argument("--version", action=Version,
                   help="print the checkout's revision and exit")
    sub = p.add_subparsers(dest="command", required=True)

    st = sub.add_parser("setup", help="install packages, fetch and unpack "
                        "the base's kernel source")
    add_base_option(st)
    st.set_defaults(func=cmd_setup)

    b = sub.add_parser("build", help="build kernel variants")
    b.add_argument("variants", nargs="*", default=list(KERNELS),
                   type=kernel_choice(VARIANTS),
                   help="any of: " + kernel_list(VARIANTS)
                   + " (default: stock patched); " + FIRST_NAMES_HELP)
    add_base_option(b)
    b.set_defaults(func=cmd_build, validate=check_build)

    c = sub.add_parser("check-series", help="apply each patch, checkpatch "
                       "--strict it and build it")
    c.add_argument("--no-build", action="store_true",
                   help="apply and checkpatch every patch, build no prefix "
                   "(--targets still builds the whole series)")
    c.add_argument("--targets",
                   type=CommaList("target", (*cross.TARGETS, "none")),
                   help="comma list of where the whole ZONE_DEVICE series is "
                   "also built, each a kernel build of its own: " + "; ".join(
                       f"{name} ({t.what})" for name, t in cross.TARGETS.items())
                   + "; or none (default " + ",".join(cross.DEFAULT_TARGETS)
                   + ", none with --no-build)")
    c.add_argument("--series",
                   type=CommaList("series", tuple(series.SERIES)),
                   help="comma list of: " + ", ".join(series.SERIES)
                   + " (default: every "
                   "series of the base)")
    add_base_option(c)
    c.set_defaults(func=cmd_check_series, validate=check_check_series)

    r = sub.add_parser("bench", help="rebind ZONE_DEVICE ranges in QEMU and "
                       "report memmap init times",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="scenarios:\n" + "\n".join(
                           f"  {name:12} {sc.what}"
                           for name, sc in scenarios.SCENARIOS.items()))
    r.add_argument("--kernels", type=CommaList("kernel", BENCH_KERNELS,
                                               rename=build.canonical),
                   help="comma list of: " + kernel_list(BENCH_KERNELS)
                   + " (default: those of " + ", ".join(BENCH_DEFAULT)
                   + " the base has); " + FIRST_NAMES_HELP)
    r.add_argument("--scenarios", default=",".join(scenarios.DEFAULT_BENCH),
                   type=CommaList("scenario", tuple(scenarios.SCENARIOS)),
                   help="comma list of: " + ", ".join(scenarios.SCENARIOS)
                   + " (default: " + ", ".join(scenarios.DEFAULT_BENCH) + ")")
    r.add_argument("--size", help="device size, e.g. 100G, "
                   + scenarios.size_rule() + " (default: per scenario, "
                   "100G; devprivate 64G; kmem, virtio-mem 16G)")
    r.add_argument("--n", type=int, help="rebinds per strategy, or "
                   "offline/online cycles per zone for kmem and virtio-mem, "
                   f"1..{scenarios.MAX_N} (default 30; devprivate 10; kmem, "
                   "virtio-mem 5)")
    r.add_argument("--align", type=CommaList("alignment",
                                              tuple(scenarios.ALIGNS)),
                   help="devdax alignments, comma list of: "
                   + ", ".join(scenarios.ALIGNS) + " (default: devdax-dev "
                   "2M, devdax-mem 2M,1G)")
    r.add_argument("--strategies",
                   type=CommaList("strategy", STRATEGIES,
                                   scenarios.check_strategy,
                                   rename=plain_threads),
                   help="patched kernel strategies, NAME or NAME@THREADS "
                   f"(THREADS 1..{scenarios.MAX_THREADS}): "
                   + ", ".join(STRATEGIES) + " (demand: on 7.3 only, "
                   "no @THREADS, not with --icount; the memmap built on "
                   "demand: its row is the synchronous part, a row "
                   "'background' the rest), interleaved in each boot "
                   "(default: " + ",".join(BENCH_STRATEGIES) + ", demand "
                   "on 7.3 only; kmem and virtio-mem "
                   "online with them only when given)")
    r.add_argument("--rounds", type=int, default=2,
                   help="boots per kernel, alternating kernels, "
                   f"1..{MAX_ROUNDS} (default 2)")
    r.add_argument("--timing", choices=tuple(scenarios.TIMINGS),
                   help="how the kernel is timed: " + "; ".join(
                       f"{name}: {what}" for name, what in
                       scenarios.TIMINGS.items())
                   + " (default: " + ", ".join(
                       f"{family} {timing}" for family, timing in
                       scenarios.FAMILY_TIMING.items()) + ")")
    r.add_argument("--verify", action="store_true",
                   help="compare every memmap with the slow path (patched)")
    r.add_argument("--icount", action="store_true",
                   help="count instructions instead of timing: TCG with "
                   f"-icount {qemu.ICOUNT_OPTIONS}, one nanosecond of guest "
                   "time per guest instruction, so the kernel's times are "
                   "instruction counts, whatever the host; the vCPUs run in "
                   "turn, so a strategy's threads are counted one after the "
                   "other; rebind scenarios only, not with ZDINIT_ACCEL=kvm "
                   "nor the strategy demand")
    r.add_argument("--contiguity", action="store_true",
                   help="build the hotplug kernels with the zone contiguity "
                   "check and fail where a zone's flag contradicts a walk "
                   "of it after a step (kmem, virtio-mem)")
    add_base_option(r)
    r.set_defaults(func=cmd_bench, validate=validate_bench)

    # 'selftest', its first name, stays accepted.
    t = sub.add_parser("memmap-equality", aliases=["selftest"],
                       help="prove every strategy builds the slow path's "
                       "memmap, byte for byte, in QEMU")
    t.add_argument("--size", default="4G", help="NVDIMM size, "
                   + scenarios.size_rule() + " (default 4G)")
    add_base_option(t)
    t.set_defaults(func=cmd_memmap_equality, validate=check_memmap_equality)

    sf = sub.add_parser("safety", help="data integrity, guards, churn and "
                        "debug-kernel checks in QEMU, the series against "
                        "stock (booted, or its recorded outcomes)")
    sf.add_argument("--full", action="store_true",
                    help="add the tracepoint and KASAN/lockdep kernels "
                    "and, on 7.3, the held on-demand build again on the "
                    "'held' kernel (DEBUG_VM): more cold kernel builds")
    sf.add_argument("--stock-record", action="store_true",
                    help="compare the series with stock's outcomes as "
                    "recorded in zdinit/checks/stock-safety.json instead of "
                    "building and booting stock (what make test runs)")
    sf.add_argument("--record-stock", action="store_true",
                    help="boot stock and the series and write stock's "
                    "outcomes to zdinit/checks/stock-safety.json (a tracked "
                    "file: commit it); not with --stock-record")
    add_base_option(sf)
    sf.set_defaults(func=cmd_safety, validate=check_safety)

    cb = add_clear_options(sub.add_parser(
        "clear", help="demand-fault huge pages in QEMU, stock vs the clear "
        "series, on one base or several: GB/s of zdclear and of 'perf "
        "bench mem mmap', and the wait of a task on the same CPU"), None)
    cb.add_argument("--loops", type=int, help="timed mappings per method, "
                    f"1..{scenarios.MAX_N} (default "
                    f"{scenarios.CLEAR.default_loops})")
    cb.add_argument("--kernels",
                    type=CommaList("kernel", clearing.KERNELS,
                                   rename=build.canonical),
                    help="comma list of: " + ", ".join(clearing.KERNELS)
                    + ", each on every base (default: clear-stock on every "
                    "base, clear on the last)")
    cb.add_argument("--rounds", type=int, default=2,
                    help="boots per kernel and model, alternating, "
                    f"1..{MAX_ROUNDS} (default 2)")
    cb.add_argument("--base", default=[bases.get(bases.DEFAULT)],
                    type=base_list,
                    help=f"comma list of kernel bases (default "
                    f"{bases.DEFAULT}): " + bases.help_text())
    cb.set_defaults(func=cmd_clear, validate=check_clear)
    cc = add_clear_options(sub.add_parser(
        "clear-check", help="every huge page the clear kernel hands out "
        "reads back zero, for each method and preemption model"), "1G")
    cc.add_argument("--rounds", type=int, default=2,
                    help="fill, free, re-fault rounds per check, "
                    f"1..{MAX_ROUNDS} (default 2)")
    cc.add_argument("--kernel", default="clear",
                    type=kernel_choice(clear_checks.CHECK_KERNELS),
                    help="kernel for the zero read-back: "
                    + ", ".join(clear_checks.CHECK_KERNELS) + " (default clear)")
    cc.add_argument("--selftests", action="store_true",
                    help="also the kernel's hugetlb/THP selftests, stock "
                    "vs the series on the base (about 3 minutes a boot under TCG)")
    cc.add_argument("--record-stock", action="store_true",
                    help="with --selftests: write stock's outcomes to "
                    "zdinit/checks/stock-selftests.json, which make test-full "
                    "compares the series with")
    add_base_option(cc)
    cc.set_defaults(func=cmd_clear_check, validate=check_clear_check)

    lb = sub.add_parser("lab", help="native store-pattern benchmark")
    lb.add_argument("--quick", action="store_true",
                    help="small sizes and few repetitions")
    lb.add_argument("--reserve-hugetlb", action="store_true",
                    help="grow the hugetlb pools (2M, 1G) the clearing sweep "
                    "needs for the run and restore them afterwards")
    lb.set_defaults(func=cmd_lab)

    ts = sub.add_parser("test", help="the test suite (make test): lint, "
                        "unit tests, the lab's tests and the end-to-end "
                        "tests under the cache lock (--unit: no kernel, "
                        "cache or lock)")
    which = ts.add_mutually_exclusive_group()
    which.add_argument("--full", action="store_true", help="also the heavier "
                       "checks (make test-full): stock 7.3 in every bench "
                       "scenario and safety check, each prefix of 7.3's "
                       "ZONE_DEVICE series, its arm64 KUnit boot, 7.3's "
                       "clear kernels and zero read-back, 6.12's "
                       "KUnit kernel, prefix builds and memmap self-test, the "
                       "i386 compile, upstream in every bench scenario, the "
                       "broken onlining kernels, the contiguity check, debug and KMSAN kernels, stock's "
                       "selftest record (docs/testing.md)")
    which.add_argument("--unit", action="store_true", help="unit and lab "
                       "tests only (make test-unit): no kernel, no cache")
    ts.set_defaults(func=cmd_test)

    li = sub.add_parser("lint", help="pyflakes over the checkout's Python "
                        "and mypy over the harness (make lint; make test "
                        "runs it first)")
    li.set_defaults(func=cmd_lint)

    dc = sub.add_parser("docs", help="render the results tables of "
                        "README.md and docs/ from the runs in docs/results/")
    dc.add_argument("--check", action="store_true",
                    help="change nothing; fail if a table differs from "
                    "what its run renders, a number typed in the prose is "
                    "in no file of its run, a cited commit is not in the "
                    "history, or zdinit refuses a command line the pages "
                    "show (parsed and checked, nothing run), or a "
                    "relative link names no file or heading")
    dc.set_defaults(func=cmd_docs)

    cv = sub.add_parser("capture-vectors", help="record the struct page "
                        "images of the stock kernel for the lab")
    add_base_option(cv)
    cv.set_defaults(func=cmd_capture_vectors)
    return p


def check(argv):
    """None if zdinit takes the command line argv (its words after
    'python3 -m zdinit') as written, else the one line it refuses it
    with: the parse and each command's check (kernel names, patches on
    the base, options that contradict), nothing built, booted, locked or
    installed, and nothing of the host asked."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), \
                contextlib.redirect_stdout(io.StringIO()):
            checked(argv)
    except SystemExit as exit:
        return None if exit.code == 0 else err.getvalue().strip()
    except ZdinitError as refused:
        return f"zdinit: error: {refused}"
    return None


def checked(argv):
    """argv parsed and checked by its command's check: a usage error
    there is refused as argparse's own are, pointing at the command's
    --help (SystemExit 2); other errors of the check are raised."""
    p = parser()
    words = join_dash_values(argv)
    args = p.parse_args(words)
    try:
        args.validate(args)
    except UsageError as err:
        p.owner(args, words, []).error(str(err))
    return args


def _terminate(signum, frame):
    raise KeyboardInterrupt


def join_dash_values(argv):
    """'--size -1G' as '--size=-1G', so that a value starting with '-' is
    refused for what it is, not with argparse's 'expected one argument'."""
    out: list = []
    for arg in argv:
        if (out and re.fullmatch(r"--[a-z][a-z-]*", out[-1])
                and re.match(r"-\d", arg)):
            out[-1] += "=" + arg
        else:
            out.append(arg)
    return out


def main(argv=None):
    # The start of the command's wall time, which its results record.
    started = time.monotonic()
    argv = sys.argv[1:] if argv is None else argv
    # SIGTERM unwinds like ^C, so partial results are marked FAILED.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        args = checked(argv)
        args.command_line = "python3 -m zdinit " + shlex.join(argv)
        args.started = started
        args.func(args)
    except ZdinitError as err:
        print(f"zdinit: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("zdinit: interrupted", file=sys.stderr)
        return 130
    return 0
