"""Run zdinit under the Python that has its packages.

apt installs python3-matplotlib for Debian's /usr/bin/python3 only, and the
first python3 on PATH may be another one (pyenv, a venv).  A command typed
as documented, 'python3 -m zdinit ...', then re-executes itself under
/usr/bin/python3 before doing anything, instead of measuring for an hour and
failing to plot.
"""
import importlib.util
import os
import sys

SYSTEM_PYTHON = "/usr/bin/python3"
# Third-party modules zdinit imports; they come from deps.PACKAGES.
NEEDED = ("matplotlib",)
# Set in the re-executed process, so that it never re-executes again.
REEXEC_GUARD = "ZDINIT_REEXEC_FROM"


def missing_modules():
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def is_system_python(executable=None):
    return os.path.realpath(executable or sys.executable) == \
        os.path.realpath(SYSTEM_PYTHON)


def ensure(args):
    """Re-execute 'python3 -m zdinit args' under Debian's python3 when this
    interpreter lacks a module zdinit needs and that one is a different
    interpreter; otherwise return and run here.

    Debian's own python3 always runs here: the commands install what it
    lacks with apt.  Without a Debian python3 the command runs here too,
    and only its plots are skipped, with a warning (report.save_plot).
    """
    if is_system_python() or REEXEC_GUARD in os.environ \
            or not os.path.exists(SYSTEM_PYTHON) or not missing_modules():
        return
    # Same working directory and environment, so '-m zdinit' finds the
    # same package.
    os.environ[REEXEC_GUARD] = sys.executable
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, "-m", "zdinit", *args])
