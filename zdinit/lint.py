"""make lint: a linter (pyflakes) over every Python file of the
checkout and a type checker (mypy, configured by mypy.ini) over the
harness, both from Debian's packages; run by make test before its
tests."""
import subprocess
import sys

from zdinit import deps, paths, progress
from zdinit.errors import ZdinitError

# What is linted: the harness, its tests and the scripts committed with
# the runs they made.
LINTED = ("zdinit", "tests", "docs/results")


def run(install=True):
    """Both checks, each printing what it finds; one line and a non-zero
    exit if either finds anything.  install=False: the caller has
    installed deps.LINT_PACKAGES already."""
    if install:
        deps.ensure_packages(deps.LINT_PACKAGES)
    failed = []
    for name, cmd in [
            ("pyflakes", [sys.executable, "-m", "pyflakes", *LINTED]),
            ("mypy", [sys.executable, "-m", "mypy", "--config-file",
                      "mypy.ini"])]:
        progress.say(f"lint: {name}")
        if subprocess.run(cmd, cwd=paths.ROOT).returncode:
            failed.append(name)
    if failed:
        raise ZdinitError(f"lint: {' and '.join(failed)} found problems "
                          "(listed above)")
