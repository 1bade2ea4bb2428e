"""Kconfig fragments: parse them and check that olddefconfig kept them."""
import pathlib
import re
import subprocess

from zdinit import paths
from zdinit.errors import ZdinitError

_SET = re.compile(r"^(CONFIG_\w+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_\w+) is not set$")


def parse(text):
    """Map each CONFIG_ symbol to its value; 'n' for '# ... is not set'."""
    options = {}
    for line in text.splitlines():
        line = line.strip()
        m = _SET.match(line)
        if m:
            options[m.group(1)] = m.group(2)
            continue
        m = _UNSET.match(line)
        if m:
            options[m.group(1)] = "n"
    return options


def fragment_paths(variant_fragments, base):
    """Each fragment, followed by its additions for base where there are
    some (configs/linux-<base>/<fragment>.config).

    A symbol that exists on one base only (CONFIG_PROC_SYSCTL is gone in
    7.3, where CONFIG_SYSCTL builds /proc/sys) goes into that base's
    addition: every line stays verified after olddefconfig, so a typo is
    still caught, and the common fragment is not copied per base.  The
    addition is merged after the common fragment, so it may also override
    a common line for its base.
    """
    found = []
    for name in variant_fragments:
        path = paths.CONFIGS / f"{name}.config"
        if not path.is_file():
            raise ZdinitError(f"kconfig fragment {path} not found")
        addition = paths.CONFIGS / f"linux-{base.name}" / f"{name}.config"
        found += [path] + ([addition] if addition.is_file() else [])
    return found


def requested(paths):
    """Options of several fragments; later fragments win, as in merge_config."""
    options = {}
    for path in paths:
        options.update(parse(path.read_text()))
    return options


def defined(tree, options):
    """Those of options (CONFIG_ names, so word characters alone) that a
    Kconfig file somewhere in tree defines, for any architecture."""
    names = "|".join(o.removeprefix("CONFIG_") for o in options)
    if not names:
        return set()
    proc = subprocess.run(
        ["grep", "-rhoE", "--include=Kconfig*",
         rf"^\s*(menu)?config\s+({names})\b", str(tree)],
        capture_output=True, text=True)
    # grep exits 1 when nothing matched, 2 on an error.
    if proc.returncode > 1:
        raise ZdinitError(f"kconfig: cannot read the Kconfig files of {tree}: "
                          + (proc.stderr.strip() or "grep failed"))
    return {"CONFIG_" + line.split()[-1] for line in proc.stdout.splitlines()}


def mismatches(wanted, dotconfig_text):
    """(option, wanted, got) for every requested option that did not stick."""
    have = parse(dotconfig_text)
    bad = []
    for option, value in wanted.items():
        got = have.get(option, "n")
        if got != value:
            bad.append((option, value, got))
    return bad


def verify(wanted, dotconfig_path):
    bad = mismatches(wanted, pathlib.Path(dotconfig_path).read_text())
    if bad:
        option, value, got = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise ZdinitError(
            f"kconfig: {option}={value} was requested but olddefconfig set "
            f"it to '{got}'{more}; a dependency is missing from the fragment")
