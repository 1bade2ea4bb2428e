"""Judge a KUnit run from a console log with the kernel's own kunit.py."""
import pathlib
import re
import subprocess
import sys

from zdinit.errors import ZdinitError

# kunit.py prints "[HH:MM:SS] Testing complete. Ran 16 tests: passed: 16"
# and names only the counts that are not zero.
_SUMMARY = re.compile(r"Testing complete\. Ran (\d+) tests: (.*)$")
_COUNTS = ("passed", "failed", "crashed", "skipped", "errors")


def summary_counts(output):
    """The counts of kunit.py's last summary line, every name present
    (zero where kunit.py left it out); None without a summary line."""
    found = [m for m in map(_SUMMARY.search, output.splitlines()) if m]
    if not found:
        return None
    ran, listed = found[-1].groups()
    counts = dict.fromkeys(_COUNTS, 0)
    for item in filter(None, (s.strip() for s in listed.split(","))):
        name, _, number = item.partition(":")
        counts[name.strip()] = int(number)
    counts["ran"] = int(ran)
    return counts


def label(suites):
    return "KUnit " + ", ".join(suites)


def judge(output, suites):
    """One line "N tests: P passed, 0 failed, ..." for a clean run of
    suites; None when a test failed, crashed or errored, none passed, or
    a suite is not in the output."""
    counts = summary_counts(output)
    if (counts is None or any(suite not in output for suite in suites)
            or counts["passed"] == 0
            or counts["failed"] or counts["crashed"] or counts["errors"]):
        return None
    return (f"{counts['ran']} tests: {counts['passed']} passed, 0 failed, "
            f"0 crashed, {counts['skipped']} skipped")


def verdict(tree, console_log, suites):
    """judge() of kunit.py parse over console_log; raise with kunit.py's
    output when the run is not clean."""
    tool = pathlib.Path(tree) / "tools/testing/kunit/kunit.py"
    proc = subprocess.run([sys.executable, str(tool), "parse",
                           str(console_log)], capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    line = None if proc.returncode else judge(out, suites)
    if line is None:
        raise ZdinitError(f"KUnit suites {', '.join(suites)} failed "
                          f"(kunit.py parse {console_log}):\n{out[-3000:]}")
    return line
