"""Judge a KUnit run from a console log with the kernel's own kunit.py."""
import pathlib
import subprocess
import sys

from zdinit.errors import ZdinitError

SUITE = "zone_device_memmap"


def verdict(tree, console_log, suite=SUITE):
    """kunit.py's summary line; raise with its output when a test failed,
    none ran, or the suite is missing from the log."""
    tool = pathlib.Path(tree) / "tools/testing/kunit/kunit.py"
    proc = subprocess.run([sys.executable, str(tool), "parse",
                           str(console_log)], capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    summary = [line for line in out.splitlines() if "Testing complete" in line]
    if proc.returncode or not summary or suite not in out:
        raise ZdinitError(f"KUnit suite {suite} failed (kunit.py parse "
                          f"{console_log}):\n{out[-3000:]}")
    return summary[-1].strip()
